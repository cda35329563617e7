#!/usr/bin/env python3
"""Reference timing for `stepwise bench features`: exact top-k with faiss IndexFlatIP.

Reads the base and query matrices (.npy, float32) written by the benchmark, searches with the requested
number of OpenMP threads, and writes {"seconds", "faiss_version", "threads", "indices"} as JSON to --out.
Only the search is timed (adding vectors to a flat index is a copy); with --repeat N, the best of N. Needs: pip install faiss-cpu numpy.
Exit code 3 when faiss or numpy is missing.
"""
import argparse
import json
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--base", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="time the search this many times, report the best")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    try:
        import numpy as np
        import faiss
    except ImportError as e:
        print(f"missing Python package {e.name!r}: pip install faiss-cpu numpy", file=sys.stderr)
        return 3
    xb = np.ascontiguousarray(np.load(args.base), dtype=np.float32)
    xq = np.ascontiguousarray(np.load(args.queries), dtype=np.float32)
    if args.threads > 0:
        faiss.omp_set_num_threads(args.threads)
    index = faiss.IndexFlatIP(xb.shape[1])
    index.add(xb)
    index.search(xq[:16], args.k)  # warm-up: page in, start the thread pool
    seconds = float("inf")
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        _, ids = index.search(xq, args.k)
        seconds = min(seconds, time.perf_counter() - t0)
    result = {
        "seconds": seconds,
        "faiss_version": faiss.__version__,
        "threads": faiss.omp_get_max_threads(),
        "indices": ids.tolist(),
    }
    with open(args.out, "w") as f:
        json.dump(result, f)
    print(json.dumps({k: v for k, v in result.items() if k != "indices"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
