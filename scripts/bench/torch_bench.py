"""Shared pieces of the PyTorch-on-CPU training benchmarks (htrn_torch.py, seq_torch.py).

Not a script: the two benchmarks import it from this folder. Timing of single training steps (median and
minimum after a warm-up), one timed epoch, thread setup, parameter counts by module, and the JSON record.
"""
import argparse
import json
import platform
import resource
import statistics
import sys
import time


def import_torch():
    """torch and numpy, or exit with code 3 and the install recipe."""
    try:
        import numpy
        import torch
    except ImportError as e:
        print(
            f"missing Python package {e.name!r}: python3 -m venv V && "
            "V/bin/pip install --no-deps -r scripts/bench/requirements-torch.txt (see scripts/bench/README.md)",
            file=sys.stderr,
        )
        sys.exit(3)
    return torch, numpy


def add_common_args(ap: argparse.ArgumentParser, batch: int, epoch_name: str):
    ap.add_argument("--batch", type=int, default=batch)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads and set_num_interop_threads (0: torch's default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=2, help="untimed training steps first")
    ap.add_argument("--steps", type=int, default=5, help="timed single training steps (median and minimum)")
    ap.add_argument(f"--epoch-{epoch_name}", type=int, default=0, dest="epoch_items",
                    help=f"time one epoch over this many random {epoch_name} in batches (0: skip)")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout (tables go to stderr)")


def setup_threads(torch, threads: int):
    """Must run before any parallel work (set_num_interop_threads fails once the pool has started)."""
    if threads > 0:
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(threads)
    return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}


def train_step_fn(torch, model, optimiser):
    """One training step: zero_grad, forward + loss, backward, optimiser step. Returns the loss."""

    def step(*batch):
        optimiser.zero_grad(set_to_none=True)
        loss = model.loss(*batch)
        loss.backward()
        optimiser.step()
        return float(loss.detach())

    return step


def time_steps(step, batches, warmup: int, steps: int):
    """Warm-up steps, then `steps` single steps timed one by one; batches are used in turn."""
    losses = []
    for i in range(warmup):
        losses.append(step(*batches[i % len(batches)]))
    seconds = []
    for i in range(steps):
        b = batches[(warmup + i) % len(batches)]
        t0 = time.perf_counter()
        losses.append(step(*b))
        seconds.append(time.perf_counter() - t0)
    return seconds, losses


def time_epoch(step, batches):
    t0 = time.perf_counter()
    losses = [step(*b) for b in batches]
    return time.perf_counter() - t0, losses


def counts_by_module(groups):
    """Parameter counts of (name, module or parameter) pairs, in order. The names follow the Rust model's parameter
    names cut to their first two dot-separated parts (Rust's `Params::counts_by_prefix(2)`), so the two tables
    can be compared key by key."""
    out = {}
    for name, m in groups:
        params = [m] if not hasattr(m, "parameters") else list(m.parameters())
        out[name] = out.get(name, 0) + sum(p.numel() for p in params)
    return out


def print_table(counts: dict, total: int, file):
    width = max(len(k) for k in counts)
    print("parameters by module:", file=file)
    for k, v in counts.items():
        print(f"  {k:<{width}}  {v:>12,}", file=file)
    print(f"  {'total':<{width}}  {total:>12,}", file=file)


def peak_rss_mib():
    """This process's peak resident memory. Linux's ru_maxrss is not used: it carries the high-water mark of the
    process that forked us across exec (a benchmark that spawns this script after allocating 3.9 GB would read
    3.9 GB here); /proc/self/status VmHWM belongs to this process's own address space."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def versions(torch, numpy):
    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__}


def report(args, record: dict, counts: dict, total: int):
    """JSON on stdout (table on stderr) with --json, else a readable summary on stdout."""
    if args.json:
        print_table(counts, total, sys.stderr)
        print(json.dumps(record))
        return
    print_table(counts, total, sys.stdout)
    for k, v in record.items():
        if k in ("parameters_by_module", "step_seconds", "config"):
            continue
        print(f"{k}: {v}")
    print("config: " + ", ".join(f"{k}={v}" for k, v in record["config"].items()))
    print("step_seconds: " + ", ".join(f"{s:.4f}" for s in record["step_seconds"]))


def summarise(step_seconds):
    if not step_seconds:
        return None, None
    return statistics.median(step_seconds), min(step_seconds)


def measure(torch, np, a, build_model, expected_parameters, make_batches, after_steps=None):
    """The run both training benchmarks share, right after `import_torch`: threads, the seeded model and its
    parameter check, Adam (lr 5e-4, betas 0.9/0.999, eps 1e-8), random batches made before timing, the timed
    single steps, `after_steps(model, optimiser, rng)` (e.g. more timings), then the timed epoch."""
    rss_import = peak_rss_mib()
    threads = setup_threads(torch, a.threads)
    torch.manual_seed(a.seed)
    model = build_model(torch, a)
    model.train()
    counts = counts_by_module(model.groups())
    total = sum(p.numel() for p in model.parameters())
    assert total == sum(counts.values()) == expected_parameters(a), (total, expected_parameters(a))
    opt = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    step = train_step_fn(torch, model, opt)

    rng = np.random.default_rng(a.seed)
    step_batches = make_batches(np, torch, rng, a, a.batch * max(1, min(a.warmup + a.steps, 4)))
    epoch_batches = make_batches(np, torch, rng, a, a.epoch_items) if a.epoch_items > 0 else []

    step_seconds, losses = time_steps(step, step_batches, a.warmup, a.steps)
    median, minimum = summarise(step_seconds)
    extra = after_steps(model, opt, rng) if after_steps else None
    epoch_seconds = None
    if epoch_batches:
        epoch_seconds, epoch_losses = time_epoch(step, epoch_batches)
        losses += epoch_losses
    if epoch_seconds:
        items_per_second = a.epoch_items / epoch_seconds
    else:
        items_per_second = a.batch / median if median else None
    return {
        "rss_import": rss_import, "threads": threads, "counts": counts, "total": total,
        "step_seconds": step_seconds, "median": median, "minimum": minimum, "epoch_seconds": epoch_seconds,
        "items_per_second": items_per_second, "losses": losses, "extra": extra,
    }
