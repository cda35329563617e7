#!/usr/bin/env python3
"""CI check of the Ray scale-out: a local 2-node Ray cluster on loopback (ray.cluster_utils.Cluster) runs the
sharded pipeline of stepwise_ray.py on a world corpus, with one embedding shard and one sweep shard killed
mid-way (SIGKILL of stepwise and of its Ray worker) and retried; the merged feature stores and suite must equal a
single-machine run byte for byte, both nodes must have run shards, and no partial output may be left behind.

    python scripts/ray/cluster_check.py --stepwise target/debug/stepwise

--measure also times the single-machine run and the pipeline on a 1-node and a 2-node cluster (each node given
--cpus-per-node cores) and prints the table the README quotes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stepwise_ray import run_pipeline  # noqa: E402

ENCODERS = ["descriptor", "w2v"]


def sh(stepwise: str, args: list[str], cwd: Path, threads: int) -> None:
    subprocess.run([stepwise, "-q", "--threads", str(threads), *args], cwd=cwd, check=True)


def single_run(stepwise: str, corpus: str, root: Path, threads: int) -> float:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    t = time.time()
    for enc in ENCODERS:
        sh(stepwise, ["embed", corpus, "--encoder", enc, "-o", f"features/{enc}"], root, threads)
    feats = [a for enc in ENCODERS for a in ("--features", f"features/{enc}")]
    sh(stepwise, ["sweep", corpus, *feats, "-o", "suite"], root, threads)
    return time.time() - t


def tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def compare(single: Path, cluster: Path) -> int:
    files = 0
    for sub in [*(f"features/{e}" for e in ENCODERS), "suite"]:
        a, b = tree(single / sub), tree(cluster / sub)
        if a.keys() != b.keys():
            raise SystemExit(f"FAIL {sub}: different files: {sorted(a.keys() ^ b.keys())[:5]}")
        for name in a:
            if a[name] != b[name]:
                raise SystemExit(f"FAIL {sub}/{name} differs between the single-machine and the cluster run")
        files += len(a)
    return files


def with_cluster(nodes: int, cpus: int, fn):
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": cpus, "object_store_memory": 80 * 1024 * 1024, "include_dashboard": False},
    )
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=cpus, object_store_memory=80 * 1024 * 1024)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        return fn(len([n for n in ray.nodes() if n["Alive"]]))
    finally:
        ray.shutdown()
        cluster.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stepwise", required=True)
    ap.add_argument("--procedures", type=int, default=40)
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--measure", action="store_true")
    ap.add_argument("--measure-only", action="store_true", help="skip the kill-and-retry check (timings only)")
    ap.add_argument("--cpus-per-node", type=int, default=1)
    ap.add_argument("--measure-nodes", default="1,2", help="cluster sizes to time (comma-separated)")
    ap.add_argument(
        "--reuse-single",
        type=float,
        metavar="SECONDS",
        help="keep the single-machine outputs of an earlier run with --keep (which took SECONDS) instead of redoing them",
    )
    ap.add_argument("--keep", help="work in this folder (kept) instead of a temporary one")
    a = ap.parse_args()
    stepwise = str(Path(a.stepwise).resolve())
    tmp = None if a.keep else tempfile.TemporaryDirectory(prefix="stepwise-ray-")
    root = Path(a.keep or tmp.name).resolve()
    root.mkdir(parents=True, exist_ok=True)
    corpus = str(root / "world")
    if a.reuse_single is not None:
        single_secs = a.reuse_single
    else:
        t = time.time()
        sh(stepwise, ["world", "generate", "-n", str(a.procedures), "--seed", "11", "-o", corpus, "--force"], root, 2)
        print(f"world of {a.procedures} procedures: {time.time() - t:.1f} s")
        single_secs = single_run(stepwise, corpus, root / "single", a.cpus_per_node)
    print(f"single machine (--threads {a.cpus_per_node}): {single_secs:.1f} s")

    shutil.rmtree(root / "cluster", ignore_errors=True)

    def check(alive: int) -> dict:
        if alive != 2:
            raise SystemExit(f"FAIL: expected a 2-node cluster, {alive} nodes alive")
        return run_pipeline(
            stepwise=stepwise,
            corpus=corpus,
            encoders=ENCODERS,
            shards=a.shards,
            workdir=str(root / "cluster"),
            threads=1,
            cpus_per_task=1,
            kill_first_attempt=["embed:1", f"sweep:{a.shards - 1}"],
        )

    if a.measure_only:
        a.measure = True
        log = None
    else:
        log = with_cluster(2, a.cpus_per_node, check)
    if log is not None:
        report_check(a, root, log)
    if a.measure:
        measure(a, stepwise, corpus, root, single_secs)
    return 0


def report_check(a, root: Path, log: dict) -> None:
    files = compare(root / "single", root / "cluster")
    killed = sorted(p.name for p in (root / "cluster" / "chaos").glob("*.killed"))
    if killed != ["embed-1.killed", f"sweep-{a.shards - 1}.killed"]:
        raise SystemExit(f"FAIL: the chaos kills did not happen mid-way (markers: {killed})")
    nodes = {t["node"] for stage in ("embed", "sweep") for t in log[stage]}
    if len(nodes) != 2:
        raise SystemExit(f"FAIL: shards ran on {len(nodes)} node(s), expected both")
    partial = [str(p) for p in (root / "cluster").rglob("*") if ".partial-" in p.name]
    if partial:
        raise SystemExit(f"FAIL: partial outputs left behind: {partial[:5]}")
    print(
        f"OK: 2-node Ray cluster, {a.shards} shards, embed shard 1 and sweep shard {a.shards - 1} killed and retried: "
        f"{files} files of {len(ENCODERS)} feature stores and the suite byte-identical to the single-machine run; "
        f"shards ran on both nodes; no partial output left"
    )


def measure(a, stepwise: str, corpus: str, root: Path, single_secs: float) -> None:
    """Wall time of the pipeline on a 1-node and a 2-node cluster, next to the single-machine run."""
    rows = [("single machine", single_secs)]
    for n in (int(x) for x in a.measure_nodes.split(",")):
        work = root / f"measure-{n}"
        shutil.rmtree(work, ignore_errors=True)

        def timed(_alive: int, work=work) -> dict:
            return run_pipeline(
                stepwise=stepwise, corpus=corpus, encoders=ENCODERS, shards=a.shards, workdir=str(work), threads=1
            )

        m = with_cluster(n, a.cpus_per_node, timed)
        compare(root / "single", work)
        rows.append((f"Ray, {n} node(s)", m["stages"]["total"]))
        print(json.dumps({"nodes": n, "stages": m["stages"]}))
    print(f"\n| run ({a.procedures} procedures, {a.shards} shards, {a.cpus_per_node} core(s) per node) | wall time |")
    print("|---|---:|")
    for name, secs in rows:
        print(f"| {name} | {secs:.1f} s |")


if __name__ == "__main__":
    sys.exit(main())
