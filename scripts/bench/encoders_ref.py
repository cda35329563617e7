#!/usr/bin/env python3
"""Reference throughput for `stepwise bench encoders`: the same models run by onnxruntime on CPU.

MiniLM: the all-MiniLM-L6-v2 BERT graph (scripts/crosscheck/onnx_models.py) on the token ids stepwise wrote
(--ids, an (N x 48) .npy), batches of 32, attention mask all ones, mean pooling + L2 norm in numpy.
EfficientNet-Lite0 / Lite2: the ONNX graph built from models/effnet-lite{0,2}/model.safetensors on N random
224x224 / 260x260 inputs, batches of 16 (network only: preprocessing is not timed).
With --photos DIR --photo-list FILE: also photo files to features for both networks, as a Python pipeline would do
it: PIL reads and decodes each file, crops the centred square stepwise crops (size / (size + 32) of the shorter
side), resizes it bicubically (PIL's bicubic is Catmull-Rom, as stepwise's) and normalises ((x - 127) / 128, CHW);
a thread pool of --threads workers prepares images ahead of the network (PIL releases the GIL while decoding and
resizing), onnxruntime runs batches of 16.

Prints one JSON object: {"minilm_sentences_per_s": ..., "effnet_lite0_images_per_s": ...,
"effnet_lite2_images_per_s": ..., "threads": ..., "onnxruntime": version}, plus "effnet_lite{0,2}_files_per_s"
with --photos.
pip: numpy onnx onnxruntime safetensors tokenizers (pillow for --photos)
"""

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
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
    ap.add_argument("--photos", type=Path, help="folder the --photo-list paths are relative to")
    ap.add_argument("--photo-list", type=Path, help="photo paths, one per line")
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

    def effnet_session(variant):
        state = load_file(str(args.models / variant / "model.safetensors"))
        return onnx_models.ort_session(onnx_models.effnet_lite_onnx(state, variant, with_logits=False),
                                       threads=args.threads)

    def effnet_rate(variant, side):
        effnet = effnet_session(variant)
        x = np.random.default_rng(0).uniform(-1, 1, (args.images, 3, side, side)).astype(np.float32)

        def run():
            for s in range(0, len(x), 16):
                effnet.run(None, {"x": x[s:s + 16]})

        return best_rate(run, len(x), args.repeats)

    def files_rate(variant, side):
        from PIL import Image

        paths = [args.photos / p for p in args.photo_list.read_text().splitlines() if p]
        effnet = effnet_session(variant)

        def prepare(path):
            with Image.open(path) as im:
                im = im.convert("RGB")
                w, h = im.size
                crop = max(min(w, h) * side / (side + 32), 1.0)
                left, top = (w - crop) / 2, (h - crop) / 2
                im = im.resize((side, side), Image.BICUBIC, box=(left, top, left + crop, top + crop))
            return ((np.asarray(im, dtype=np.float32) - 127.0) / 128.0).transpose(2, 0, 1)

        def run():
            with ThreadPoolExecutor(args.threads) as pool:
                images = pool.map(prepare, paths)  # submitted at once, prepared ahead of the network
                for s in range(0, len(paths), 16):
                    batch = np.stack([next(images) for _ in range(min(16, len(paths) - s))])
                    effnet.run(None, {"x": batch})

        return best_rate(run, len(paths), args.repeats)

    out = {
        "minilm_sentences_per_s": best_rate(run_minilm, len(ids), args.repeats),
        "effnet_lite0_images_per_s": effnet_rate("effnet-lite0", 224),
        "effnet_lite2_images_per_s": effnet_rate("effnet-lite2", 260),
        "threads": args.threads,
        "onnxruntime": __import__("onnxruntime").__version__,
    }
    if args.photos is not None and args.photo_list is not None:
        out["effnet_lite0_files_per_s"] = files_rate("effnet-lite0", 224)
        out["effnet_lite2_files_per_s"] = files_rate("effnet-lite2", 260)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
