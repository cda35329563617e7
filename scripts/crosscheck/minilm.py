#!/usr/bin/env python3
"""Cross-check stepwise's all-MiniLM-L6-v2 encoder against an independent onnxruntime implementation.

The reference tokenises with Hugging Face `tokenizers` (Python), runs a BERT graph built op by op in ONNX from the
package's model.safetensors, and pools like sentence-transformers (mean over the attention mask, L2 norm).
stepwise encodes the same texts with `stepwise models encode minilm`.

Checks (exit 1 on any failure):
- "This is an example sentence" starts with the published 0.06766, 0.06350, 0.04871 (to 1e-4), in both;
- every embedding agrees within --tol (max abs difference per coordinate; default 1e-5) and has cosine >= 0.9999;
  texts: English and Chinese step texts of ../shared/data/procedures (short and long, some over 256 tokens) and
  the step texts of the RecipeQA dev recipes (../shared/data/recipeqa/recipes-dev.json, every --recipeqa-every-th).

pip: numpy onnx onnxruntime safetensors tokenizers
Usage: minilm.py [--stepwise target/release/stepwise] [--models models] [--data ../shared/data] [--n 400]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import onnx_models  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "This is an example sentence"
PUBLISHED = [0.06766, 0.06350, 0.04871]


def step_texts(data, n):
    texts = []
    for f in sorted((data / "procedures").glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            for s in json.loads(line)["steps"]:
                t = " ".join(x for x in (s.get("title"), s.get("text")) if x)
                if t.strip():
                    texts.append(" ".join(t.split()))  # one line per text
    step = max(1, len(texts) // n)
    return texts[::step][:n]


def recipeqa_texts(data, every):
    doc = json.loads((data / "recipeqa" / "recipes-dev.json").read_text(encoding="utf-8"))
    texts = [" ".join(s["body"].split()) for r in doc["recipes"] for s in r["steps"] if s.get("body", "").strip()]
    return texts[::every]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stepwise", default=os.environ.get("STEPWISE", str(ROOT / "target/release/stepwise")))
    ap.add_argument("--models", type=Path, default=ROOT / "models")
    ap.add_argument("--data", type=Path,
                    default=Path(os.environ.get("STEPWISE_SHARED_DATA", ROOT.parent / "shared" / "data")))
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--recipeqa-every", type=int, default=4)
    args = ap.parse_args()

    texts = [EXAMPLE, "A", ""] + step_texts(args.data, args.n)
    # The longest step text too (truncation at 256 word pieces).
    texts.append(max(step_texts(args.data, 10**9), key=len))
    texts += recipeqa_texts(args.data, args.recipeqa_every)
    tmp = Path(tempfile.mkdtemp(prefix="xcheck-minilm-"))
    (tmp / "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    subprocess.run([args.stepwise, "models", "encode", "minilm", "--texts", str(tmp / "texts.txt"),
                    "--out", str(tmp / "ours.npy"), "--models", str(args.models)], check=True)
    ours = np.load(tmp / "ours.npy")

    model_dir = args.models / "all-minilm-l6-v2"
    weights, config, tok = onnx_models.load_minilm(model_dir)
    sess = onnx_models.ort_session(onnx_models.bert_onnx(weights, config))
    ref = onnx_models.minilm_embed(sess, tok, texts)

    failures = []
    for name, v in (("stepwise", ours[0]), ("reference", ref[0])):
        got = [round(float(x), 5) for x in v[:3]]
        if np.abs(v[:3] - np.array(PUBLISHED)).max() > 1e-4:
            failures.append(f"{name}: {EXAMPLE!r} starts {got}, published {PUBLISHED}")
        print(f"{name}: {EXAMPLE!r} -> {got}")
    diff = np.abs(ours - ref).max(axis=1)
    cos = (ours * ref).sum(1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(ref, axis=1))
    longest = max(len(tok.encode(t).ids) for t in texts)
    print(f"{len(texts)} texts (up to {longest} tokens): max |diff| {diff.max():.2e}, min cosine {cos.min():.6f}")
    if diff.max() > args.tol:
        i = int(diff.argmax())
        failures.append(f"embedding {i} ({texts[i][:40]!r}) differs by {diff[i]:.2e} > {args.tol}")
    if cos.min() < 0.9999:
        failures.append(f"min cosine {cos.min():.6f} < 0.9999")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("OK: MiniLM agrees with the onnxruntime reference and the published embedding")


if __name__ == "__main__":
    main()
