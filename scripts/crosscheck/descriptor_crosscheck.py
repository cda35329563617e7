"""Cross-check the built-in image descriptor against a NumPy re-implementation with scikit-image's CIELAB.

Writes seeded random PNG images (lossless, so both sides see the same pixels; sizes from 1x1 to 333x97),
embeds them with `stepwise embed --encoder descriptor`, and recomputes every descriptor from the documented
recipe (crates/stepwise-features/src/builtin/descriptor.rs): area-average to 64x64 in linear RGB, CIELAB D65 via
skimage.color.rgb2lab, soft 4x6x6 Lab histogram, 4x4x9 gradient-orientation histograms, tiny 8x8 Lab image,
part-wise normalisation. Rows must agree to 5e-4, or the script exits 1 (float32 vs float64 arithmetic, and
skimage's sRGB->XYZ matrix differs from ours in the 5th digit; a real bug shows as >1e-2).

    python scripts/crosscheck/descriptor_crosscheck.py [--stepwise target/release/stepwise] [--images 40]

pip: numpy scikit-image
"""

import argparse
import json
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
from skimage.color import rgb2lab

ROOT = Path(__file__).resolve().parents[2]
WORK, L_BINS, AB_BINS, AB_RANGE, CELLS, ORIENT, TINY = 64, 4, 6, 80.0, 4, 9, 8


def write_png(path, rgb):
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    path.write_bytes(png)


def area_matrix(src, dst):
    """dst x src box-filter weights: output cell i averages [i*s, (i+1)*s) of the source."""
    m = np.zeros((dst, src))
    s = src / dst
    for i in range(dst):
        a, b = i * s, (i + 1) * s
        for j in range(int(np.floor(a)), min(int(np.ceil(b)), src)):
            m[i, j] = max(0.0, min(b, j + 1) - max(a, j)) / (b - a)
    return m


def soft(v, lo, hi, n):
    p = np.clip((v - lo) / (hi - lo), 0, 1) * n - 0.5
    i = np.floor(p)
    w = p - i
    i0 = np.where(p <= 0, 0, np.where(i >= n - 1, n - 1, i)).astype(int)
    i1 = np.minimum(i0 + 1, n - 1)
    w1 = np.where((p <= 0) | (i >= n - 1), 0.0, w)
    return [(i0, 1 - w1), (i1, w1)]


def hellinger(h):
    s = h.sum()
    return np.sqrt(h / s) if s > 0 else h


def l2(v):
    n = np.linalg.norm(v)
    return v / n if n > 1e-6 else np.zeros_like(v)


def descriptor(rgb):
    c = rgb.astype(np.float64) / 255.0
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    h, w, _ = rgb.shape
    ay, ax = area_matrix(h, WORK), area_matrix(w, WORK)
    small = np.einsum("yh,hwc,xw->yxc", ay, lin, ax)
    # skimage takes gamma-encoded sRGB: encode the averaged linear values back.
    srgb = np.where(small <= 0.0031308, small * 12.92, 1.055 * np.power(small, 1 / 2.4) - 0.055)
    lab = rgb2lab(srgb, illuminant="D65", observer="2")
    L, A, B = lab[..., 0], lab[..., 1], lab[..., 2]
    colour = np.zeros((L_BINS, AB_BINS, AB_BINS))
    for li, lw in soft(L, 0, 100, L_BINS):
        for ai, aw in soft(A, -AB_RANGE, AB_RANGE, AB_BINS):
            for bi, bw in soft(B, -AB_RANGE, AB_RANGE, AB_BINS):
                np.add.at(colour, (li, ai, bi), lw * aw * bw)
    g = L / 100.0
    gx = g[:, np.r_[1:WORK, WORK - 1]] - g[:, np.r_[0, 0:WORK - 1]]
    gy = g[np.r_[1:WORK, WORK - 1], :] - g[np.r_[0, 0:WORK - 1], :]
    mag = np.hypot(gx, gy)
    ang = np.arctan2(gy, gx)
    ang = np.where(ang < 0, ang + np.pi, ang)
    p = ang / np.pi * ORIENT - 0.5
    lo = np.floor(p)
    wt = p - lo
    b0 = np.mod(lo.astype(int), ORIENT)
    b1 = (b0 + 1) % ORIENT
    cell = WORK // CELLS
    yy, xx = np.mgrid[0:WORK, 0:WORK]
    base = ((yy // cell) * CELLS + xx // cell) * ORIENT
    grad = np.zeros(CELLS * CELLS * ORIENT)
    ok = mag > 1e-6
    np.add.at(grad, (base + b0)[ok], (mag * (1 - wt))[ok])
    np.add.at(grad, (base + b1)[ok], (mag * wt)[ok])
    blk = WORK // TINY
    tiny = (lab / 100.0).reshape(TINY, blk, TINY, blk, 3).mean(axis=(1, 3))
    tiny = (tiny - tiny.reshape(-1, 3).mean(axis=0)).reshape(-1)
    v = np.concatenate([hellinger(colour.reshape(-1)), hellinger(grad), l2(tiny)])
    return l2(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stepwise", default=str(ROOT / "target" / "release" / "stepwise"))
    ap.add_argument("--images", type=int, default=40)
    args = ap.parse_args()
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "img").mkdir()
        images, steps = {}, []
        sizes = [(1, 1), (333, 97), (64, 64), (17, 200)]
        for i in range(args.images):
            w, h = sizes[i] if i < len(sizes) else (int(rng.integers(20, 300)), int(rng.integers(20, 300)))
            # Smooth colour fields plus noise and a few edges: all three parts of the descriptor get signal.
            yy, xx = np.mgrid[0:h, 0:w]
            base = rng.integers(0, 256, 3)
            img = (base + 80 * np.sin(xx[..., None] / (3 + i) + np.arange(3)) + rng.normal(0, 20, (h, w, 3)))
            img[(yy + xx * (i % 3)) % 23 < 4] = rng.integers(0, 256, 3)
            img = np.clip(img, 0, 255).astype(np.uint8)
            rel = f"img/{i:03d}.png"
            write_png(tmp / rel, img)
            images[f"image:{rel}"] = img
            steps.append({"title": None, "text": f"step {i}", "images": [rel]})
        (tmp / "procedures.jsonl").write_text(json.dumps({"id": "x/1", "steps": steps}) + "\n")
        subprocess.run([args.stepwise, "-q", "embed", tmp / "procedures.jsonl", "--encoder", "descriptor",
                        "-o", tmp / "feat"], check=True)
        ids = (tmp / "feat" / "ids").read_text().split("\n")[:-1]
        x = np.load(tmp / "feat" / "vectors.npy")
        worst = 0.0
        for row, id_ in zip(x, ids):
            ref = descriptor(images[id_])
            err = np.abs(row - ref).max()
            worst = max(worst, err)
            if err > 5e-4:
                print(f"FAIL {id_} {images[id_].shape}: max diff {err:.2e} (colour {np.abs(row[:144] - ref[:144]).max():.1e}, "
                      f"gradient {np.abs(row[144:288] - ref[144:288]).max():.1e}, tiny {np.abs(row[288:] - ref[288:]).max():.1e})")
        print(f"descriptor: {len(ids)} images, max |stepwise - numpy/skimage| = {worst:.2e}")
        if len(ids) != args.images or worst > 5e-4:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
