"""Cross-check `stepwise eval`'s percentile bootstrap intervals against scipy.stats.bootstrap(method="percentile").

Bootstrap intervals are random, so this checks agreement up to Monte Carlo noise (both sides use 20,000
resamples; bounds must agree within 0.01 for accuracies and within 2% of the interval width plus 0.005 for
Kendall's tau): multiple-choice accuracy per task on a generated task set (0/1 data, where stepwise draws
multinomial counts over repeated rows) and the mean Kendall's tau of generated sequencing predictions (many distinct
values, where stepwise draws rows). Exits with status 1 on disagreement.

    python scripts/crosscheck/metrics_bootstrap.py [--stepwise target/release/stepwise]

pip: numpy scipy
"""

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.stats import bootstrap

from metrics_crosscheck import find_stepwise, tau_sets

B = 20000


def scipy_ci(values, seed):
    res = bootstrap((np.asarray(values, dtype=float),), np.mean, n_resamples=B, confidence_level=0.95,
                    method="percentile", random_state=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stepwise", default=None)
    args = ap.parse_args()
    exe = find_stepwise(args.stepwise)
    rng = random.Random(3)
    failures = []

    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        # Multiple choice: two tasks with different accuracies.
        questions, preds, correct = [], [], {"textual_cloze": [], "visual_cloze": []}
        for i in range(700):
            task = "textual_cloze" if i < 400 else "visual_cloze"
            p_correct = 0.62 if task == "textual_cloze" else 0.31
            answer = rng.randrange(4)
            ok = rng.random() < p_correct
            questions.append({"qid": f"q{i}", "recipe_id": f"r{i // 3}", "task": task, "question": ["@placeholder"],
                              "choice_list": ["a", "b", "c", "d"], "answer": answer})
            preds.append({"qid": f"q{i}", "answer": answer if ok else (answer + 1) % 4})
            correct[task].append(1.0 if ok else 0.0)
        (td / "set.json").write_text(json.dumps({"data": questions}))
        (td / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
        subprocess.run([exe, "-q", "eval", str(td / "set.json"), "-p", str(td / "preds.jsonl"), "--bootstrap",
                        str(B), "--json", str(td / "mc.json")], check=True, stdout=subprocess.DEVNULL)
        mc = json.load(open(td / "mc.json"))
        for row in mc["sets"][0]["tasks"]:
            if row["task"] not in correct:
                continue
            ours = (row["accuracy"]["ci"]["low"], row["accuracy"]["ci"]["high"])
            ref = scipy_ci(correct[row["task"]], 1)
            print(f"{row['task']}: stepwise [{ours[0]:.4f}, {ours[1]:.4f}]  scipy [{ref[0]:.4f}, {ref[1]:.4f}]")
            if abs(ours[0] - ref[0]) > 0.01 or abs(ours[1] - ref[1]) > 0.01:
                failures.append(f"{row['task']}: {ours} vs scipy {ref}")

        # Sequencing: mean Kendall's tau over 1,500 predictions of 3 to 10 items.
        taus = []
        with open(td / "inst.jsonl", "w") as fi, open(td / "orders.jsonl", "w") as fo:
            for i in range(1500):
                n = rng.randint(3, 10)
                gold = list(range(n))
                rng.shuffle(gold)
                pred = list(gold)
                for _ in range(rng.randint(0, n)):
                    a = rng.randrange(n - 1)
                    pred[a], pred[a + 1] = pred[a + 1], pred[a]
                fi.write(json.dumps({"id": f"s{i}", "procedure": "p", "split": "test", "modality": "text",
                                     "items": [{"step": k} for k in range(n)], "references": [gold]}) + "\n")
                fo.write(json.dumps({"id": f"s{i}", "order": pred}) + "\n")
                taus.append(tau_sets(pred, gold))
        subprocess.run([exe, "-q", "eval", str(td / "inst.jsonl"), "-p", str(td / "orders.jsonl"), "--bootstrap",
                        str(B), "--json", str(td / "seq.json")], check=True, stdout=subprocess.DEVNULL)
        seq = json.load(open(td / "seq.json"))
        e = seq["groups"][0]["metrics"]["kendall_tau"]
        ours = (e["ci"]["low"], e["ci"]["high"])
        ref = scipy_ci(taus, 2)
        width = ref[1] - ref[0]
        print(f"kendall_tau: stepwise [{ours[0]:.4f}, {ours[1]:.4f}]  scipy [{ref[0]:.4f}, {ref[1]:.4f}]")
        tol = 0.02 * width + 0.005
        if abs(ours[0] - ref[0]) > tol or abs(ours[1] - ref[1]) > tol:
            failures.append(f"kendall_tau: {ours} vs scipy {ref}")

    if failures:
        print("FAIL: " + "; ".join(failures), file=sys.stderr)
        sys.exit(1)
    print("OK: percentile intervals agree with scipy within Monte Carlo noise")


if __name__ == "__main__":
    main()
