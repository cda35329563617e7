#!/usr/bin/env python3
"""Run stepwise's embedding and suite generation as shards on a Ray cluster, then merge.

    python scripts/ray/stepwise_ray.py --address auto --stepwise /shared/bin/stepwise \
        --corpus /shared/corpus --encoder descriptor --encoder w2v --shards 8 --workdir /shared/run

Pipeline (every command runs with the working folder --workdir, which all nodes must see at the same path):
  1. per encoder, N Ray tasks `stepwise embed CORPUS --encoder E --shard i/N -o parts/features/E/i`;
  2. `stepwise features merge parts/features/E/* -o features/E`;
  3. N Ray tasks `stepwise sweep CORPUS --features features/E... --shard i/N -o parts/suite/i`;
  4. `stepwise sweep --merge parts/suite/* -o suite`.
The merged outputs are byte-identical to the single-machine commands run in a folder with the same layout
(`stepwise embed CORPUS --encoder E -o features/E`, then `stepwise sweep CORPUS --features features/E ... -o suite`).

A failed shard (non-zero exit, or its worker or node dying) is retried by Ray (--retries); stepwise's embedding
resumes from the part's checkpoints and a sweep part is rewritten whole, so a retried shard gives the same bytes.
The driver only orchestrates: all the work is done by the stepwise binary (Ray's own task API, no other deps).

--kill-first-attempt STAGE:I (testing aid) SIGKILLs the stepwise process of shard I of STAGE (embed or sweep) on its
first attempt once it has started writing, and then its Ray worker process, as a machine dying would.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import ray


def _stepwise(stepwise: str, args: list[str], workdir: str, threads: int, chaos: dict | None) -> dict:
    """Run one stepwise command in `workdir`; raise on a non-zero exit (Ray retries it)."""
    cmd = [stepwise, "-q", "--threads", str(threads), *args]
    started = time.time()
    proc = subprocess.Popen(
        cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent
    )
    if chaos is not None:
        marker = Path(workdir) / chaos["marker"]
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(json.dumps({"cmd": cmd, "pid": os.getpid()}))
            # Wait until the shard has written something (its checkpoint or partial output), then kill it and
            # this worker without any cleanup.
            watch = Path(workdir) / chaos["watch"]
            deadline = time.time() + 120
            while time.time() < deadline and proc.poll() is None and not _has_output(watch):
                time.sleep(0.005)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                (Path(workdir) / (chaos["marker"] + ".killed")).write_text("killed mid-way\n")
            os.kill(os.getpid(), signal.SIGKILL)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}: {err.strip()}")
    return {
        "cmd": cmd,
        "seconds": time.time() - started,
        "node": ray.get_runtime_context().get_node_id(),
    }


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the Ray worker dies (Linux), so a retry never races an orphaned run."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _has_output(path: Path) -> bool:
    """True once a shard has started writing: its checkpoint folder, or a hidden partial folder next to it."""
    if (path / ".work").exists():
        return True
    parent = path.parent
    return parent.exists() and any(p.name.startswith(f".{path.name}.partial-") for p in parent.iterdir())


def run_pipeline(
    *,
    stepwise: str,
    corpus: str,
    encoders: list[str],
    shards: int,
    workdir: str,
    threads: int = 1,
    cpus_per_task: float = 1,
    retries: int = 3,
    embed_args: list[str] | None = None,
    sweep_args: list[str] | None = None,
    kill_first_attempt: list[str] | None = None,
) -> dict:
    """The sharded pipeline on the connected Ray cluster; returns a log of every task (node, seconds)."""
    workdir = str(Path(workdir).resolve())
    Path(workdir).mkdir(parents=True, exist_ok=True)
    chaos_of = {}
    for spec in kill_first_attempt or []:
        stage, _, idx = spec.partition(":")
        chaos_of[(stage, int(idx))] = True
    task = ray.remote(num_cpus=cpus_per_task, max_retries=retries, retry_exceptions=True)(_stepwise)

    def chaos(stage: str, i: int, watch: str) -> dict | None:
        if (stage, i) not in chaos_of:
            return None
        return {"marker": f"chaos/{stage}-{i}", "watch": watch}

    log: dict = {"embed": [], "merge": [], "sweep": [], "stages": {}}
    t0 = time.time()
    refs = []
    for enc in encoders:
        for i in range(shards):
            out = f"parts/features/{enc}/{i}"
            args = ["embed", corpus, "--encoder", enc, "--shard", f"{i}/{shards}", "-o", out, *(embed_args or [])]
            refs.append(task.remote(stepwise, args, workdir, threads, chaos("embed", i, out)))
    log["embed"] = ray.get(refs)
    log["stages"]["embed"] = time.time() - t0

    t1 = time.time()
    merges = []
    for enc in encoders:
        parts = [f"parts/features/{enc}/{i}" for i in range(shards)]
        merges.append(task.remote(stepwise, ["features", "merge", *parts, "-o", f"features/{enc}", "--force"], workdir, threads, None))
    log["merge"] = ray.get(merges)
    log["stages"]["features_merge"] = time.time() - t1

    t2 = time.time()
    features = [a for enc in encoders for a in ("--features", f"features/{enc}")]
    refs = []
    for i in range(shards):
        out = f"parts/suite/{i}"
        args = ["sweep", corpus, *features, *(sweep_args or []), "--shard", f"{i}/{shards}", "-o", out, "--force"]
        refs.append(task.remote(stepwise, args, workdir, threads, chaos("sweep", i, out)))
    log["sweep"] = ray.get(refs)
    log["stages"]["sweep"] = time.time() - t2

    t3 = time.time()
    parts = [f"parts/suite/{i}" for i in range(shards)]
    log["merge"].append(ray.get(task.remote(stepwise, ["sweep", "--merge", *parts, "-o", "suite", "--force"], workdir, threads, None)))
    log["stages"]["sweep_merge"] = time.time() - t3
    log["stages"]["total"] = time.time() - t0
    return log


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--address", default="auto", help="Ray cluster address (`auto`: the running cluster; `local`: start one here)")
    ap.add_argument("--stepwise", required=True, help="the stepwise binary (same path on every node)")
    ap.add_argument("--corpus", required=True, help="corpus folder (same path on every node)")
    ap.add_argument("--encoder", action="append", required=True, help="encoder to embed with (repeatable)")
    ap.add_argument("--shards", type=int, required=True)
    ap.add_argument("--workdir", required=True, help="working folder every node sees at the same path")
    ap.add_argument("--threads", type=int, default=1, help="--threads of each stepwise task")
    ap.add_argument("--cpus-per-task", type=float, default=1)
    ap.add_argument("--retries", type=int, default=3)
    ap.add_argument("--embed-arg", action="append", default=[], help="extra argument of every embed (repeatable)")
    ap.add_argument("--sweep-arg", action="append", default=[], help="extra argument of every sweep (repeatable)")
    ap.add_argument("--kill-first-attempt", action="append", default=[], metavar="STAGE:I", help=argparse.SUPPRESS)
    ap.add_argument("--log", help="write the task log (nodes, seconds per task and stage) here as JSON")
    a = ap.parse_args()
    if a.shards < 1:
        ap.error("--shards must be at least 1")
    ray.init(address=None if a.address == "local" else a.address, include_dashboard=False, log_to_driver=False)
    log = run_pipeline(
        stepwise=a.stepwise,
        corpus=a.corpus,
        encoders=a.encoder,
        shards=a.shards,
        workdir=a.workdir,
        threads=a.threads,
        cpus_per_task=a.cpus_per_task,
        retries=a.retries,
        embed_args=a.embed_arg,
        sweep_args=a.sweep_arg,
        kill_first_attempt=a.kill_first_attempt,
    )
    if a.log:
        Path(a.log).write_text(json.dumps(log, indent=2))
    for stage, secs in log["stages"].items():
        print(f"{stage}: {secs:.1f} s")
    print(f"suite: {Path(a.workdir).resolve() / 'suite'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
