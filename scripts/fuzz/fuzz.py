#!/usr/bin/env python3
"""Coverage-guided fuzzing of every stepwise reader (libFuzzer through libfuzzer-sys, on stable Rust).

Builds `fuzz/` with sanitizer-coverage instrumentation, seeds each target's corpus (built-in seeds from the
binary itself, slices of the real files in ../shared/data, files written by a small `stepwise demo`), runs every
target for --seconds, and prints one row per target: executions, executions/s, coverage (edges, features), corpus
size, peak memory and findings (crash, timeout, out-of-memory inputs). Exit status 1 when any target found one.

    scripts/fuzz/fuzz.py --seconds 60                # every target, 60 s each, two at a time
    scripts/fuzz/fuzz.py --seconds 600 --targets npy,pickle
    scripts/fuzz/fuzz.py --seconds 30 --no-demo      # without the demo's files as seeds

A finding is kept in target/fuzz/work/artifacts/<target>/; once fixed, copy it into fuzz/regressions/<target>/
where `cargo test` replays it (crates/stepwise-cli/tests/fuzz_regressions.rs). Only the standard library is used.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COVERAGE_FLAGS = [
    "--cfg fuzzing",
    "-Cpasses=sancov-module",
    "-Cllvm-args=-sanitizer-coverage-level=4",
    "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters",
    "-Cllvm-args=-sanitizer-coverage-pc-table",
    "-Cllvm-args=-sanitizer-coverage-trace-compares",
]
# Inputs larger than this are cut by libFuzzer; big enough for a JPEG thumbnail or a few JSON records.
MAX_LEN = 64 * 1024
FINDING_PREFIXES = ("crash-", "timeout-", "oom-", "leak-")


def host_triple():
    out = subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout
    return next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("host: "))


def build(target_dir):
    """The instrumented fuzz binary. The target triple is explicit so build scripts are not instrumented."""
    triple = host_triple()
    env = dict(os.environ, RUSTFLAGS=" ".join(COVERAGE_FLAGS), CARGO_TARGET_DIR=str(target_dir))
    print(f"building fuzz/ (libFuzzer, sanitizer coverage, {triple})", flush=True)
    subprocess.run(["cargo", "build", "--release", "--locked", "--target", triple], cwd=ROOT / "fuzz", env=env,
                   check=True)
    return target_dir / triple / "release" / "stepwise-fuzz"


def targets_of(binary):
    """The binary names the targets when asked for an unknown one."""
    r = subprocess.run([str(binary), "-runs=0"], env=dict(os.environ, STEPWISE_FUZZ_TARGET="?"),
                       capture_output=True, text=True)
    m = re.search(r"one of: (.*)", r.stderr)
    if not m:
        sys.exit(f"fuzz.py: {binary} did not list its targets:\n{r.stderr}")
    return [t.strip() for t in m.group(1).split(",")]


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def copy(src, dst):
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)


def head_lines(path, n):
    with open(path, "rb") as f:
        return b"".join(line for _, line in zip(range(n), f))


def json_slice(path, key, n):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if key is None:
        items = list(doc.items())[:n] if isinstance(doc, dict) else doc[:n]
        return json.dumps(dict(items) if isinstance(doc, dict) else items, ensure_ascii=False, indent=1)
    return json.dumps(dict(doc, **{key: doc[key][:n]}), ensure_ascii=False, indent=1)


def real_data_seeds(data, seeds):
    """Small slices of the real files: the shapes strangers' files really have."""
    if not data or not data.is_dir():
        print("no shared data folder: real-data seeds skipped", flush=True)
        return
    procs = data / "procedures"
    for jsonl in sorted(procs.glob("*.jsonl")):
        write(seeds / "procedure-jsonl" / f"{jsonl.stem}.jsonl", head_lines(jsonl, 2))
    rqa = data / "recipeqa"
    if (rqa / "val-dev.json").is_file():
        doc = json.loads((rqa / "val-dev.json").read_text(encoding="utf-8"))
        for task in sorted({q["task"] for q in doc["data"]}):
            first = next(q for q in doc["data"] if q["task"] == task)
            write(seeds / "recipeqa" / f"{task}.json", json.dumps({"data": [first]}, ensure_ascii=False))
    if (rqa / "official-examples.json").is_file():
        copy(rqa / "official-examples.json", seeds / "recipeqa" / "official-examples.json")
    if (rqa / "recipes-dev.json").is_file():
        write(seeds / "recipeqa-recipes" / "two-recipes.json", json_slice(rqa / "recipes-dev.json", "recipes", 2))
    sem = data / "r2vq" / "semeval2022_task9"
    if (sem / "train_sample_1recipe_srpol.csv").is_file():
        copy(sem / "train_sample_1recipe_srpol.csv", seeds / "r2vq-conllu" / "train-sample.conllu")
    if (sem / "test_crl_srl.csv").is_file():
        text = (sem / "test_crl_srl.csv").read_text(encoding="utf-8")
        docs = text.split("# newdoc id")
        write(seeds / "r2vq-conllu" / "test-first-recipe.conllu", "# newdoc id" + docs[1])
    derived = sem / "hitqmul_derived"
    if (derived / "test_qa.json").is_file():
        write(seeds / "r2vq-questions" / "test-qa.json", json_slice(derived / "test_qa.json", None, 8))
    release_2021 = data / "r2vq" / "recipe2video_site_2021" / "r2vq.jsonl"
    if release_2021.is_file():
        write(seeds / "r2vq-2021" / "first-recipe.jsonl", head_lines(release_2021, 1))
    for name in ("data_train3.json", "entity_train3.json"):
        if (derived / "inline_tagged" / name).is_file():
            write(seeds / "r2vq-inline" / name, json_slice(derived / "inline_tagged" / name, None, 2))
    images = sorted(p for p in (data / "procedures" / "images").rglob("*.jpg") if p.stat().st_size < MAX_LEN)
    images += sorted(p for p in (data / "distractors").rglob("*.jpg") if p.stat().st_size < MAX_LEN)
    for p in images[:6]:
        copy(p, seeds / "image" / p.name)


def demo_seeds(stepwise, work, seeds):
    """Files the pipeline itself writes (task sets, predictions, a study definition), from a small demo."""
    demo = work / "demo"
    print(f"running `stepwise demo -n 30` for seeds ({demo})", flush=True)
    subprocess.run([stepwise, "demo", "-n", "30", "-o", str(demo), "--force", "-q"], check=True,
                   stdout=subprocess.DEVNULL)
    for qs in sorted(demo.glob("suite/recipeqa/*/questions.json")):
        write(seeds / "taskset" / f"{qs.parent.name}.json", json_slice(qs, "data", 2))
    for preds in sorted(demo.glob("predictions/*.jsonl"))[:3]:
        write(seeds / "choice-predictions" / preds.name, head_lines(preds, 4))
    for preds in sorted(demo.glob("sequencing-results/predictions/*.jsonl"))[:2] + sorted(demo.glob("seq-study/predictions/*.jsonl"))[:2]:
        write(seeds / "order-predictions" / preds.name, head_lines(preds, 4))
    for npy in sorted(demo.glob("features/**/*.npy")):
        if npy.stat().st_size < MAX_LEN:
            copy(npy, seeds / "npy" / f"{npy.parent.name}-{npy.name}")
    study = work / "study"
    shutil.rmtree(study, ignore_errors=True)
    seq = sorted(demo.glob("sequencing/**/instances.jsonl"))
    if seq:
        subprocess.run([stepwise, "annotate", "create", str(seq[0].parent), "--corpus", str(demo / "corpus"),
                        "-o", str(study), "-q"], check=True)
        copy(study / "study.json", seeds / "study" / "study.json")


def builtin_seeds(binary, targets, seeds):
    for t in targets:
        out = seeds / t
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(binary)], env=dict(os.environ, STEPWISE_FUZZ_TARGET=t, STEPWISE_FUZZ_WRITE_SEEDS=str(out)),
                       check=True, capture_output=True)


STAT = re.compile(r"^stat::(\w+):\s*(\d+)", re.M)
PROGRESS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/", re.M)


def run_target(binary, target, seconds, work, seeds):
    corpus = work / "corpus" / target
    artifacts = work / "artifacts" / target
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    log = work / "logs" / f"{target}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [str(binary), f"-max_total_time={seconds}", "-timeout=10", "-rss_limit_mb=2048", f"-max_len={MAX_LEN}",
           "-print_final_stats=1", f"-artifact_prefix={artifacts}/", str(corpus), str(seeds / target)]
    start = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, env=dict(os.environ, STEPWISE_FUZZ_TARGET=target), stdout=f, stderr=f)
        try:
            # libFuzzer stops itself; the margin covers loading the seeds and a last slow input.
            proc.wait(timeout=seconds + 120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for scratch in Path(os.environ.get("TMPDIR", "/tmp")).glob(f"stepwise-fuzz-{proc.pid}-*"):
        shutil.rmtree(scratch, ignore_errors=True)
    text = log.read_text(errors="replace")
    stats = {k: int(v) for k, v in STAT.findall(text)}
    progress = PROGRESS.findall(text)
    last = progress[-1] if progress else ("0", "0", "0", "0")
    findings = sorted(p.name for p in artifacts.iterdir() if p.name.startswith(FINDING_PREFIXES))
    return {
        "target": target,
        "seconds": round(time.monotonic() - start, 1),
        "executions": stats.get("number_of_executed_units", int(last[0])),
        "exec_per_s": stats.get("average_exec_per_sec", 0),
        "coverage_edges": int(last[1]),
        "features": int(last[2]),
        "corpus": int(last[3]),
        "peak_rss_mb": stats.get("peak_rss_mb", 0),
        "exit": proc.returncode,
        "findings": findings,
        "log": str(log),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=60, help="per target (default 60)")
    ap.add_argument("--jobs", type=int, default=2, help="targets run at once (default 2)")
    ap.add_argument("--targets", help="comma-separated (default: all)")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("STEPWISE_SHARED_DATA", ROOT.parent / "shared" / "data")))
    ap.add_argument("--stepwise", default=os.environ.get("STEPWISE", str(ROOT / "target" / "debug" / "stepwise")),
                    help="the binary that writes the demo seeds")
    ap.add_argument("--no-demo", action="store_true", help="no demo run for seeds")
    ap.add_argument("--work", type=Path, default=ROOT / "target" / "fuzz" / "work")
    ap.add_argument("--json", type=Path, help="also write the table as JSON here")
    args = ap.parse_args()
    if args.seconds < 1 or args.jobs < 1:
        sys.exit("fuzz.py: --seconds and --jobs must be at least 1")

    binary = build(ROOT / "target" / "fuzz")
    targets = targets_of(binary)
    if args.targets:
        wanted = args.targets.split(",")
        unknown = [t for t in wanted if t not in targets]
        if unknown:
            sys.exit(f"fuzz.py: unknown target(s) {', '.join(unknown)}; the targets: {', '.join(targets)}")
        targets = wanted
    seeds = args.work / "seeds"
    shutil.rmtree(seeds, ignore_errors=True)
    # Findings are per run: an earlier run's (kept for inspection) must not fail this one.
    if (args.work / "artifacts").is_dir():
        shutil.rmtree(args.work / "artifacts-previous", ignore_errors=True)
        (args.work / "artifacts").rename(args.work / "artifacts-previous")
    builtin_seeds(binary, targets, seeds)
    real_data_seeds(args.data, seeds)
    if not args.no_demo:
        demo_seeds(args.stepwise, args.work, seeds)
    for t in targets:
        (seeds / t).mkdir(parents=True, exist_ok=True)
        print(f"  {t}: {len(list((seeds / t).iterdir()))} seeds", flush=True)

    print(f"fuzzing {len(targets)} targets, {args.seconds} s each, {args.jobs} at a time", flush=True)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda t: run_target(binary, t, args.seconds, args.work, seeds), targets))

    header = f"{'target':<20}{'executions':>12}{'exec/s':>9}{'edges':>8}{'features':>10}{'corpus':>8}{'peak MB':>9}  findings"
    print("\n" + header + "\n" + "-" * len(header))
    for r in rows:
        found = ", ".join(r["findings"]) if r["findings"] else "0"
        print(f"{r['target']:<20}{r['executions']:>12,}{r['exec_per_s']:>9,}{r['coverage_edges']:>8,}"
              f"{r['features']:>10,}{r['corpus']:>8,}{r['peak_rss_mb']:>9,}  {found}")
    total = sum(r["executions"] for r in rows)
    bad = [r for r in rows if r["findings"] or r["exit"] != 0]
    print(f"\ntotal: {total:,} executions, {sum(len(r['findings']) for r in rows)} findings "
          f"({len(rows)} targets × {args.seconds} s)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    for r in bad:
        print(f"{r['target']}: exit {r['exit']}, findings in {args.work / 'artifacts' / r['target']}, log {r['log']}",
              file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
