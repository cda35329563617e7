"""Cross-check `stepwise eval --task r2vq` (exact match and token F1) against the SemEval-2022 Task 9 scorer's
definitions, re-typed here from SQuAD v1.1's evaluation script (which the task's Codalab scoring program uses):
normalize_answer, exact_match_score and f1_score, best over the gold answers, null matching only null. stepwise
also reads the string "N/A" as null on both sides (its documented convention); this script does the same.

Gold answers come from the shared train sample (real answers) and from generated recipes whose answers mix case,
ASCII and Unicode punctuation, articles inside and around words, underscores, digits and "N/A"; predictions are
perturbations of them (case, punctuation, articles, dropped/added/repeated tokens, other answers, null, missing).
Every question's EM and F1 must agree exactly. Exits with status 1 on disagreement.

    python scripts/crosscheck/r2vq_scorer.py [--stepwise target/release/stepwise] [--cases 5000]

pip: (none)
"""

import argparse
import json
import random
import re
import string
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from common import find_stepwise, shared_data


def normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def no_answer(a):
    return a is None or a.strip().lower() == "n/a"


def exact_match_score(prediction, ground_truth):
    if no_answer(prediction) or no_answer(ground_truth):
        return float(no_answer(prediction) and no_answer(ground_truth))
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_score(prediction, ground_truth):
    if no_answer(prediction) or no_answer(ground_truth):
        return float(no_answer(prediction) and no_answer(ground_truth))
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


WORDS = ["the", "a", "an", "pan", "Pan", "knife", "by", "using", "into", "cubes", "olive_oil", "2", "1/2", "N/A",
         "thé", "äpfel", "Theme", "another", "a's", "the-pan", "(couscous", "rice)", "…", "’s", "x_the", "an.",
         "ÉTÉ", "ﬁsh", "İstanbul", "the\u00a0pan", "10-12", "minutes"]


def random_answer(rng):
    if rng.random() < 0.08:
        return "N/A"
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 6))]
    seps = [rng.choice([" ", " ", " ", "  ", ", ", " - ", "\t"]) for _ in words]
    return "".join(w + s for w, s in zip(words, seps)).strip()


def perturb(answer, rng, other):
    r = rng.random()
    if r < 0.12:
        return None
    if r < 0.2:
        return other
    tokens = answer.split(" ")
    ops = rng.randint(0, 3)
    for _ in range(ops):
        op = rng.randrange(6)
        if op == 0 and tokens:
            tokens.pop(rng.randrange(len(tokens)))
        elif op == 1:
            tokens.insert(rng.randrange(len(tokens) + 1), rng.choice(WORDS))
        elif op == 2 and tokens:
            tokens.append(tokens[rng.randrange(len(tokens))])
        elif op == 3:
            tokens = [t.upper() if rng.random() < 0.5 else t.lower() for t in tokens]
        elif op == 4:
            tokens.insert(rng.randrange(len(tokens) + 1), rng.choice(["the", "a", "An", ".", "!", "?"]))
        else:
            tokens = [t + rng.choice(["", ".", ",", ";", "'"]) for t in tokens]
    return " ".join(tokens)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stepwise", default=None)
    ap.add_argument("--cases", type=int, default=5000)
    args = ap.parse_args()
    exe = find_stepwise(args.stepwise)
    rng = random.Random(11)

    gold = {}  # key -> answer
    lines = []
    sample = shared_data() / "r2vq" / "semeval2022_task9" / "train_sample_1recipe_srpol.csv"
    real = sample.read_text(encoding="utf-8")
    for line in real.splitlines():
        if line.startswith("# answer "):
            qid, answer = line[len("# answer "):].split(" = ", 1)
            gold[f"f-6VWP66LZ/{qid}"] = answer
    for k in range(args.cases):
        recipe, family, index = f"g-{k // 50}", rng.randrange(19), k % 50
        if k % 50 == 0:
            lines.append(f"# newdoc id = {recipe}")
        answer = random_answer(rng)
        lines.append(f"# question {family}-{index} = Question {k}?")
        lines.append(f"# answer {family}-{index} = {answer}")
        gold[f"{recipe}/{family}-{index}"] = answer

    keys = sorted(gold)
    predictions = {}
    for key in keys:
        if rng.random() < 0.05:
            continue  # missing: scores 0
        predictions[key] = perturb(gold[key], rng, gold[rng.choice(keys)])

    failures = []
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        gold_file = td / "gold.csv"
        # The real recipe first (its annotation included), then the generated header-only recipes.
        gold_file.write_text(real.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n", encoding="utf-8")
        pred_file = td / "predictions.jsonl"
        pred_file.write_text("".join(json.dumps({"id": k, "answer": a}) + "\n" for k, a in predictions.items()),
                             encoding="utf-8")
        subprocess.run([exe, "-q", "eval", str(gold_file), "-p", str(pred_file), "--task", "r2vq", "--bootstrap", "0",
                        "-o", str(td / "out")], check=True, stdout=subprocess.DEVNULL)
        rows = [json.loads(l) for l in (td / "out" / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
        if len(rows) != len(gold):
            failures.append(f"{len(rows)} scored questions, {len(gold)} gold")
        for row in rows:
            key = row["id"]
            pred = predictions.get(key, "\0missing")
            if pred == "\0missing":
                want = (0.0, 0.0)
            else:
                want = (exact_match_score(pred, gold[key]), f1_score(pred, gold[key]))
            got = (row["em"], row["f1"])
            if got[0] != want[0] or abs(got[1] - want[1]) > 1e-12:
                failures.append(f"{key}: prediction {pred!r} gold {gold[key]!r}: stepwise {got}, reference {want}")

    print(f"r2vq scorer: {len(gold)} questions ({len(predictions)} predicted), {len(failures)} disagreements")
    for f in failures[:20]:
        print("  " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
