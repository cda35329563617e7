"""Cross-check `stepwise eval` on sequencing instances whose references are a sample of the valid orders.

When a window has more valid orders than a generator keeps, the instance stores a uniform sample of them
(`references`, the authored order first) plus `constraints`: the transitively closed precedence pairs [a, b]
(item a before item b) that every valid order keeps. eval then adds the prediction repaired to the constraints
(a stable topological sort; the prediction itself when it is valid) as one more candidate reference, index =
len(references), chosen by the same rule as among references (the largest tuple of metrics_crosscheck.py's
metric_tuple; ties keep the earlier candidate).

Generates seeded random cases (default 2,000; 3 to 8 items): a random DAG over the items (random edge
probability, transitively closed), every linear extension enumerated in Python, the authored order one of them,
the references = authored + a uniform sample of the others, `constraints` written only when the sample is
incomplete (an empty list for a sampled DAG without pairs: every order is valid); about 15% of the cases (and
every DAG with a single extension) keep the complete set and write no constraints. Each case gives up to four instances, one per kind of prediction: a sampled reference,
a valid order outside the sample, a valid order with one constrained pair swapped, a random permutation. Runs

    stepwise eval INSTANCES -p PREDICTIONS --bootstrap 0 -o OUT

and checks, against full enumeration (no code shared with stepwise):
1. PMR is 1 exactly when the prediction is a linear extension of the DAG, sampled or not;
2. a valid prediction gets every metric's perfect value (accuracy 1, PMR 1, distance 0, L_q = L_r = n, tau 1);
3. for an invalid prediction PMR is 0, and the scores lie between the best over the stored sample alone and the
   best over all linear extensions, lexicographically in the selection rule's keys (accuracy, PMR, L_r, L_q,
   tau); only accuracy, the leading key, is bounded metric by metric (the rule may trade the other metrics
   for it), which is checked too;
4. the chosen `reference` is len(references) exactly when the repaired candidate (a Python stable topological
   sort) beats the best stored reference strictly (ties keep the earlier candidate, so a sampled prediction
   keeps its own reference), and every per-instance value equals metric_tuple against the chosen candidate;
5. the averages of results.json (group `all`) equal the per-instance means;
6. bad constraints are refused (exit status != 0, stderr naming the file's line and the field `constraints` or
   `references`): a pair [a, a], an item out of range, a reference breaking a constraint, a cycle.

Also prints how often the sample + repair score equals the best over all linear extensions (informative).
Exits with status 1 on any disagreement. Usage:

    python scripts/crosscheck/sequencing_constraints.py [--cases 2000] [--seed 0] [--stepwise target/debug/stepwise]

pip: numpy scipy scikit-learn (through metrics_crosscheck)
"""

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from common import exit_with, find_stepwise
from metrics_crosscheck import best_reference, metric_tuple

TOL = 1e-12
# Redraw a DAG with more linear extensions than this (keeps full enumeration cheap).
MAX_EXTENSIONS = 2000
# The per-instance metrics and their index in metric_tuple (the selection keys are indices 0..4).
METRICS = {"position_accuracy": 0, "pmr": 1, "lr": 2, "lq": 3, "kendall_tau": 4, "distance": 7}
KINDS = ("sampled", "unsampled", "broken", "random")


# ---------------------------------------------------------------------------------------------------------------
# Random DAGs and their linear extensions


def closure_of(n, edges):
    """Transitive closure (Floyd-Warshall) as a boolean matrix."""
    c = [[False] * n for _ in range(n)]
    for a, b in edges:
        c[a][b] = True
    for k in range(n):
        for i in range(n):
            if c[i][k]:
                for j in range(n):
                    if c[k][j]:
                        c[i][j] = True
    return c


def linear_extensions(n, closure, limit):
    """Every order of 0..n-1 keeping all closure pairs, or None when there are more than `limit`."""
    preds = [sum(1 << a for a in range(n) if closure[a][b]) for b in range(n)]
    full = (1 << n) - 1
    out, cur = [], []

    def rec(mask):
        if len(out) > limit:
            return
        if mask == full:
            out.append(list(cur))
            return
        for i in range(n):
            if not mask >> i & 1 and preds[i] & ~mask == 0:
                cur.append(i)
                rec(mask | 1 << i)
                cur.pop()

    rec(0)
    return None if len(out) > limit else out


def keeps(order, pairs):
    pos = {x: k for k, x in enumerate(order)}
    return all(pos[a] < pos[b] for a, b in pairs)


def stable_topological_sort(order, pairs):
    """At each position the item earliest in `order` whose constrained predecessors are all placed."""
    before = {b: {a for a, b2 in pairs if b2 == b} for b in order}
    out, placed = [], set()
    while len(out) < len(order):
        nxt = next(i for i in order if i not in placed and before[i] <= placed)
        out.append(nxt)
        placed.add(nxt)
    return out


def make_cases(count, seed):
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        n = rng.randint(3, 8)
        p = rng.uniform(0.05, 0.75)
        topo = list(range(n))
        rng.shuffle(topo)
        edges = [(topo[i], topo[j]) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
        closure = closure_of(n, edges)
        ext = linear_extensions(n, closure, MAX_EXTENSIONS)
        if ext is None:
            continue
        pairs = sorted([a, b] for a in range(n) for b in range(n) if closure[a][b])
        authored = ext[rng.randrange(len(ext))]
        others = [o for o in ext if o != authored]
        # None: the references are complete. An empty list marks a sample of a DAG without pairs.
        if not others or rng.random() < 0.15:
            sample = list(others)
            rng.shuffle(sample)
            constraints = None
        else:
            sample = rng.sample(others, rng.randint(0, min(len(others) - 1, 9)))
            constraints = pairs
        refs = [authored] + sample
        c = len(cases)
        preds = {"sampled": list(refs[rng.randrange(len(refs))])}
        unsampled = [o for o in others if o not in sample]
        if unsampled:
            preds["unsampled"] = list(unsampled[rng.randrange(len(unsampled))])
        if pairs:
            a, b = pairs[rng.randrange(len(pairs))]
            broken = list(ext[rng.randrange(len(ext))])
            i, j = broken.index(a), broken.index(b)
            broken[i], broken[j] = b, a
            preds["broken"] = broken
        perm = list(range(n))
        rng.shuffle(perm)
        preds["random"] = perm
        cases.append({"id": f"case-{c}", "n": n, "ext": ext, "pairs": pairs, "refs": refs,
                      "constraints": constraints, "preds": preds})
    return cases


def instance(iid, n, refs, constraints):
    inst = {"id": iid, "procedure": "p" + iid, "split": "test", "modality": "text",
            "items": [{"step": k} for k in range(n)], "references": refs}
    if constraints is not None:
        inst["constraints"] = constraints
    return inst


def run_eval(exe, instances, predictions, folder):
    """Write instances and predictions, run eval; the CompletedProcess (stdout discarded, stderr kept)."""
    folder.mkdir()
    with open(folder / "instances.jsonl", "w") as f:
        for inst in instances:
            f.write(json.dumps(inst) + "\n")
    with open(folder / "predictions.jsonl", "w") as f:
        for iid, order in predictions:
            f.write(json.dumps({"id": iid, "order": order}) + "\n")
    return subprocess.run(
        [exe, "-q", "eval", str(folder / "instances.jsonl"), "-p", str(folder / "predictions.jsonl"),
         "--bootstrap", "0", "-o", str(folder / "out")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )


# ---------------------------------------------------------------------------------------------------------------


def best_of(pred, orders):
    """best_reference(pred, orders) -> (index, tuple), computing the full tuple only for the orders with the most
    fixed points (accuracy is the leading key, so no other order can win)."""
    fixed = [sum(x == y for x, y in zip(pred, o)) for o in orders]
    top = max(fixed)
    keep = [k for k, f in enumerate(fixed) if f == top]
    i, best = best_reference(pred, [orders[k] for k in keep])
    return keep[i], best


def reported(row):
    return {k: float(row[k]) for k in METRICS}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stepwise", default=None)
    args = ap.parse_args()
    exe = find_stepwise(args.stepwise)

    failures = []

    def fail(msg):
        failures.append(msg)

    cases = make_cases(args.cases, args.seed)
    instances, predictions, expect = [], [], []
    for c in cases:
        for kind, pred in c["preds"].items():
            iid = f"{c['id']}/{kind}"
            instances.append(instance(iid, c["n"], c["refs"], c["constraints"]))
            predictions.append((iid, pred))
            expect.append((iid, kind, pred, c))

    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        proc = run_eval(exe, instances, predictions, td / "main")
        if proc.returncode != 0:
            sys.exit(f"stepwise eval failed (exit {proc.returncode}): {proc.stderr.strip()}")
        rows = {}
        with open(td / "main" / "out" / "per_instance.jsonl") as f:
            for line in f:
                r = json.loads(line)
                rows[r["id"]] = r
        results = json.load(open(td / "main" / "out" / "results.json"))

        # 6. Bad constraints, on line 2 of the file (line 1 is a good instance with constraints).
        good = instance("good", 3, [[0, 1, 2], [0, 2, 1]], [[0, 1], [0, 2]])
        bad_cases = [
            ("pair [a, a]", [[0, 1, 2, 3]], [[0, 1], [2, 2]], "constraints"),
            ("item out of range", [[0, 1, 2, 3]], [[0, 1], [1, 4]], "constraints"),
            ("reference breaks a constraint", [[0, 1, 2, 3], [1, 0, 2, 3]], [[0, 1], [0, 2]], "references"),
            ("cycle", [[0, 1, 2, 3]], [[0, 1], [1, 2], [2, 0]], "references"),
        ]
        for k, (what, refs, cons, field) in enumerate(bad_cases):
            insts = [good, instance("bad", 4, refs, cons)]
            proc = run_eval(exe, insts, [("good", [0, 1, 2]), ("bad", [0, 1, 2, 3])], td / f"bad{k}")
            err = proc.stderr
            if proc.returncode == 0:
                fail(f"bad input ({what}): accepted")
            elif "instances.jsonl:2:" not in err or f"`{field}[" not in err:
                fail(f"bad input ({what}): stderr does not name line 2 and field `{field}[..]`: {err.strip()!r}")

    if len(rows) != len(instances):
        fail(f"stepwise scored {len(rows)} of {len(instances)} instances")

    stats = {k: 0 for k in KINDS}
    valid_n = invalid_n = repaired_won = 0
    invalid_sampled = equal_full = equal_full_sample = 0
    per_metric_outside = 0
    sums = {k: [] for k in METRICS}
    for iid, kind, pred, c in expect:
        r = rows.get(iid)
        if r is None:
            fail(f"{iid}: missing from stepwise's output")
            continue
        stats[kind] += 1
        got = reported(r)
        for k in METRICS:
            sums[k].append(got[k])
        refs, n = c["refs"], c["n"]
        valid = pred in c["ext"]
        where = f"{iid}: pred {pred}, refs {refs}, pairs {c['pairs']}"

        # 1. PMR exact.
        if (got["pmr"] == 1.0) != valid:
            fail(f"{where}: pmr {got['pmr']} but the prediction is {'' if valid else 'not '}a linear extension")

        # 4. The documented rule, re-implemented: references + the repaired prediction when constraints exist.
        repaired = stable_topological_sort(pred, c["pairs"]) if c["constraints"] is not None else None
        if repaired is not None and not (repaired in c["ext"] and (not valid or repaired == pred)):
            fail(f"{where}: Python's repair {repaired} is not a valid order (or changed a valid one)")
        sample_idx, sample_best = best_of(pred, refs)
        wins = repaired is not None and metric_tuple(pred, repaired) > sample_best
        idx, want = (len(refs), metric_tuple(pred, repaired)) if wins else (sample_idx, sample_best)
        if r["reference"] != idx:
            fail(f"{where}: chosen reference {r['reference']} != {idx} (repaired {repaired} "
                 f"{'beats' if wins else 'does not beat'} the sample)")
        for k, t in METRICS.items():
            if abs(got[k] - float(want[t])) > TOL:
                fail(f"{where}: {k} stepwise {got[k]} != reference {want[t]}")
        repaired_won += r["reference"] == len(refs)

        if valid:
            # 2. Perfect values, against the prediction's own reference (or the repaired one when not sampled).
            valid_n += 1
            perfect = {"position_accuracy": 1.0, "pmr": 1.0, "lr": n, "lq": n, "kendall_tau": 1.0, "distance": 0}
            for k, v in perfect.items():
                if abs(got[k] - v) > TOL:
                    fail(f"{where}: valid prediction has {k} {got[k]} (perfect: {v})")
            own = refs.index(pred) if pred in refs else len(refs)
            if r["reference"] != own:
                fail(f"{where}: valid prediction scored against candidate {r['reference']}, expected {own}")
        else:
            # 3. Between the sample's best and the best over every linear extension.
            invalid_n += 1
            best_all = best_of(pred, c["ext"])[1]
            keys = tuple(got[k] for k in ("position_accuracy", "pmr", "lr", "lq", "kendall_tau"))
            low, high = sample_best[:5], best_all[:5]
            if got["pmr"] != 0.0:
                fail(f"{where}: invalid prediction has pmr {got['pmr']}")
            if not (tuple(float(x) for x in low) <= keys <= tuple(float(x) for x in high)):
                fail(f"{where}: selection keys {keys} outside [sample best {low}, full best {high}]")
            if not (sample_best[0] <= got["position_accuracy"] <= best_all[0]):
                fail(f"{where}: position accuracy {got['position_accuracy']} outside "
                     f"[{sample_best[0]}, {best_all[0]}]")
            same = all(abs(got[k] - float(best_all[t])) <= TOL for k, t in METRICS.items())
            if c["constraints"] is not None:
                invalid_sampled += 1
                equal_full += same
                equal_full_sample += sample_best == best_all
            per_metric_outside += any(
                not (min(sample_best[t], best_all[t]) - TOL <= got[k] <= max(sample_best[t], best_all[t]) + TOL)
                for k, t in METRICS.items())

    # 5. Averages.
    allg = next(g for g in results["groups"] if g["group"] == "all")
    if allg["sequences"] != len(rows):
        fail(f"results.json group all: {allg['sequences']} sequences, per_instance.jsonl has {len(rows)}")
    for k, vals in sums.items():
        want = math.fsum(vals) / len(vals)
        g = allg["metrics"][k]["value"]
        if abs(g - want) > TOL:
            fail(f"mean {k}: results.json {g} != per-instance mean {want}")

    constrained = sum(1 for c in cases if c["constraints"] is not None)
    free = sum(1 for c in cases if c["constraints"] == [])
    print(f"cases: {len(cases)} DAGs ({constrained} with a sampled subset and constraints ({free} with no pairs), "
          f"{len(cases) - constrained} complete), {len(rows)} instances "
          f"({', '.join(f'{stats[k]} {k}' for k in KINDS)}); {valid_n} valid and {invalid_n} invalid predictions")
    print(f"repaired candidate chosen in {repaired_won} instances; invalid predictions on sampled instances scored "
          f"equal to the best over all linear extensions: {equal_full} of {invalid_sampled} with sample + repair, "
          f"{equal_full_sample} with the sample alone; invalid predictions with a metric outside its "
          f"[sample best, full best] range (the rule is lexicographic): {per_metric_outside}")
    print("checked: PMR exact by full enumeration, perfect scores for valid orders, sample best <= score <= full "
          "best, the repaired candidate's index and the documented rule, results.json means, refusal of 4 bad "
          "inputs")
    exit_with(failures, f"OK: all values agree within {TOL}")


if __name__ == "__main__":
    main()
