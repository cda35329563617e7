#!/usr/bin/env python3
"""Reference throughput for `stepwise bench encoders`: the same models run by onnxruntime on CPU.

MiniLM: the all-MiniLM-L6-v2 BERT graph (scripts/crosscheck/onnx_models.py) on the token ids stepwise wrote
(--ids, an (N x 48) .npy), batches of 32, attention mask all ones, mean pooling + L2 norm in numpy.
EfficientNet-Lite0 / Lite2: the ONNX graph built from models/effnet-lite{0,2}/model.safetensors on N random
224x224 / 260x260 inputs, batches of 16 (network only: preprocessing is not timed).

Prints one JSON object: {"minilm_sentences_per_s": ..., "effnet_lite0_images_per_s": ...,
"effnet_lite2_images_per_s": ..., "threads": ..., "onnxruntime": version}.
pip: numpy onnx onnxruntime safetensors tokenizers
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "crosscheck"))
import onnx_models  # noqa: E402


def best_rate(fn, items, repeats):
    fn()  # warm-up
    best = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = max(best, items / (time.perf_counter() - t))
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=Path, required=True)
    ap.add_argument("--ids", type=Path, required=True)
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from safetensors.numpy import load_file

    weights, config, _tok = onnx_models.load_minilm(args.models / "all-minilm-l6-v2")
    bert = onnx_models.ort_session(onnx_models.bert_onnx(weights, config), threads=args.threads)
    ids = np.load(args.ids).astype(np.int64)
    pos = np.arange(ids.shape[1], dtype=np.int64)

    def run_minilm():
        for s in range(0, len(ids), 32):
            b = ids[s:s + 32]
            (h,) = bert.run(None, {"input_ids": b, "attention_mask": np.ones_like(b), "position_ids": pos})
            pooled = h.mean(1)
            pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)

    def effnet_rate(variant, side):
        state = load_file(str(args.models / variant / "model.safetensors"))
        effnet = onnx_models.ort_session(onnx_models.effnet_lite_onnx(state, variant, with_logits=False),
                                         threads=args.threads)
        x = np.random.default_rng(0).uniform(-1, 1, (args.images, 3, side, side)).astype(np.float32)

        def run():
            for s in range(0, len(x), 16):
                effnet.run(None, {"x": x[s:s + 16]})

        return best_rate(run, len(x), args.repeats)

    out = {
        "minilm_sentences_per_s": best_rate(run_minilm, len(ids), args.repeats),
        "effnet_lite0_images_per_s": effnet_rate("effnet-lite0", 224),
        "effnet_lite2_images_per_s": effnet_rate("effnet-lite2", 260),
        "threads": args.threads,
        "onnxruntime": __import__("onnxruntime").__version__,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
