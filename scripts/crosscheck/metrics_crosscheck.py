"""Cross-check `stepwise eval`'s sequencing metrics and agreement statistics against independent implementations.

Generates seeded random cases (default 10,000; 2 to 10 items; about a third with several references), writes
them as sequencing instances + predictions + annotators' orders, runs

    stepwise eval INSTANCES -p PREDICTIONS --pooled --bootstrap 0 -o OUT
    stepwise eval INSTANCES --agreement ANNOTATIONS --bootstrap 0 -o OUT

and compares every per-instance value and every average with:
- a Python re-implementation of the multimodal sequencing paper's released metrics code (telin0411/
  multimodal_sequencing, trainers/metrics.py: per-reference tuples (partial_match, exact_match, lcs_substr, lcs,
  tau, ms, wms, distance_based), best reference = the largest tuple), written from the formulas with plain
  dynamic programming and sets of ordered pairs;
- scipy.stats.kendalltau for Kendall's tau against the chosen reference;
- sklearn.metrics.cohen_kappa_score for both agreement statistics (pair one-hot encoding; alternative orders over
  the positions differing from the gold, greedy best-match pairing, candidates ordered by exact fractions);
- the topological-sort paper's pooled ratios (sums over all sequences).

Agreement is exact to 1e-12, or the script exits with status 1. Usage:

    python scripts/crosscheck/metrics_crosscheck.py [--cases 10000] [--seed 0] [--stepwise target/release/stepwise]

pip: numpy scipy scikit-learn
"""

import argparse
import itertools
import json
import math
import random
import subprocess
import tempfile
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau
from sklearn.metrics import cohen_kappa_score

TOL = 1e-12
from common import exit_with, find_stepwise  # noqa: E402


# ---------------------------------------------------------------------------------------------------------------
# Random cases


def random_perm(rng, n):
    p = list(range(n))
    rng.shuffle(p)
    return p


def make_cases(count, seed):
    rng = random.Random(seed)
    cases = []
    for c in range(count):
        n = rng.randint(2, 10)
        refs = [random_perm(rng, n)]
        if rng.random() < 0.35:
            for _ in range(rng.randint(1, 3)):
                alt = list(refs[0])
                # Alternatives close to the authored order (a few adjacent swaps), like real interchangeable steps;
                # sometimes fully random.
                if rng.random() < 0.7:
                    for _ in range(rng.randint(1, 2)):
                        i = rng.randrange(n - 1)
                        alt[i], alt[i + 1] = alt[i + 1], alt[i]
                else:
                    alt = random_perm(rng, n)
                if alt not in refs:
                    refs.append(alt)
        kind = rng.random()
        base = refs[rng.randrange(len(refs))]
        if kind < 0.1:
            pred = list(base)
        elif kind < 0.2:
            pred = list(reversed(base))
        elif kind < 0.35:
            pred = list(base)
            i = rng.randrange(n - 1)
            pred[i], pred[i + 1] = pred[i + 1], pred[i]
        else:
            pred = random_perm(rng, n)
        # Annotators: 1 to 3 orders near the gold; some give alternatives.
        annotators = []
        for a in range(rng.randint(1, 3)):
            order = list(refs[0])
            for _ in range(rng.randint(0, 2)):
                i = rng.randrange(n - 1)
                order[i], order[i + 1] = order[i + 1], order[i]
            alts = []
            for _ in range(rng.choice([0, 0, 1, 2, 3])):
                alt = list(refs[0])
                for _ in range(rng.randint(1, 3)):
                    i = rng.randrange(n - 1)
                    alt[i], alt[i + 1] = alt[i + 1], alt[i]
                if alt != refs[0]:
                    alts.append(alt)
            annotators.append({"annotator": f"w{a}", "order": order, "alternatives": alts})
        cases.append({"id": f"case-{c}", "n": n, "refs": refs, "pred": pred, "annotators": annotators})
    return cases


def write_inputs(cases, folder):
    with open(folder / "instances.jsonl", "w") as f:
        for c in cases:
            inst = {
                "id": c["id"],
                "procedure": "p" + c["id"],
                "split": "test",
                "modality": "text",
                "items": [{"step": k} for k in range(c["n"])],
                "references": c["refs"],
            }
            f.write(json.dumps(inst) + "\n")
    with open(folder / "predictions.jsonl", "w") as f:
        for c in cases:
            f.write(json.dumps({"id": c["id"], "order": c["pred"]}) + "\n")
    with open(folder / "annotations.jsonl", "w") as f:
        for c in cases:
            for a in c["annotators"]:
                f.write(json.dumps({"id": c["id"], **a}) + "\n")


# ---------------------------------------------------------------------------------------------------------------
# Reference implementation of the released code's metrics (from the formulas; no code shared with stepwise)


def lcs_len(x, y):
    m, n = len(x), len(y)
    t = [[0] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            t[i][j] = t[i - 1][j - 1] + 1 if x[i - 1] == y[j - 1] else max(t[i - 1][j], t[i][j - 1])
    return t[m][n]


def lcsubstr_len(x, y):
    m, n = len(x), len(y)
    t = [[0] * (n + 1) for _ in range(m + 1)]
    best = 0
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            if x[i - 1] == y[j - 1]:
                t[i][j] = t[i - 1][j - 1] + 1
                best = max(best, t[i][j])
    return best


def tau_sets(pred, label):
    s_t = set(itertools.combinations(label, 2))
    s_p = set(itertools.combinations(pred, 2))
    cn2 = len(pred) * (len(pred) - 1) / 2
    return 1 - 2 * (len(s_p) - len(s_p & s_t)) / cn2


def min_swaps(pred, label, weighted=False):
    n = len(pred)
    pos = [pred.index(x) for x in label]
    seen = [False] * n
    total = 0
    for i in range(n):
        if seen[i] or pos[i] == i:
            continue
        size, j = 0, i
        while not seen[j]:
            seen[j] = True
            j = pos[j]
            size += 1
        total += (size - 1) * (abs(pos[i] - i) if weighted else 1)
    return total


def distance(pred, label):
    return sum(abs(j - pred.index(x)) for j, x in enumerate(label))


def metric_tuple(pred, label):
    p, l = np.asarray(pred), np.asarray(label)
    return (
        float((p == l).mean()),
        float(np.sum(p == l) == len(p)),
        lcsubstr_len(pred, label),
        lcs_len(pred, label),
        tau_sets(pred, label),
        min_swaps(pred, label),
        min_swaps(pred, label, weighted=True),
        distance(pred, label),
    )


def best_reference(pred, refs):
    tuples = [metric_tuple(pred, r) for r in refs]
    best = max(tuples)
    return tuples.index(best), best


# ---------------------------------------------------------------------------------------------------------------
# Agreement with scikit-learn


def onehot(order):
    n = len(order)
    pos = {x: k for k, x in enumerate(order)}
    v = []
    for i in range(n):
        for j in range(i + 1, n):
            v += [int(pos[i] < pos[j]), int(pos[j] < pos[i])]
    return v


def kappa(a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = cohen_kappa_score(a, b)
    return None if (k is None or math.isnan(k)) else float(k)


def alt_kappa(gold, a, b):
    ks = [k for k in range(len(gold)) if a[k] != gold[k] or b[k] != gold[k]]
    if not ks:
        return None
    return kappa([a[k] for k in ks], [b[k] for k in ks])


def exact_kappa(a, b):
    """Cohen's kappa as an exact fraction, only to order candidate pairs (mathematically equal kappas must tie;
    floats from different label counts can differ in the last bits)."""
    n = len(a)
    labels = set(a) | set(b)
    p_o = Fraction(sum(x == y for x, y in zip(a, b)), n)
    p_e = sum(Fraction(a.count(c) * b.count(c), n * n) for c in labels)
    return (p_o - p_e) / (1 - p_e)


def best_match(gold, alts_a, alts_b):
    cands = []
    for i, a in enumerate(alts_a):
        for j, b in enumerate(alts_b):
            k = alt_kappa(gold, a, b)
            if k is not None:
                ks = [p for p in range(len(gold)) if a[p] != gold[p] or b[p] != gold[p]]
                exact = exact_kappa([a[p] for p in ks], [b[p] for p in ks])
                cands.append((-exact, i, j, k))
    cands.sort()
    used_a, used_b, out = set(), set(), []
    for _, i, j, k in cands:
        if i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            out.append(k)
    return out


def mean_or_none(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def instance_agreement(case):
    anns = case["annotators"]
    order_k = mean_or_none([kappa(onehot(a["order"]), onehot(b["order"])) for a, b in itertools.combinations(anns, 2)])
    with_alts = [a for a in anns if a["alternatives"]]
    alt_k = mean_or_none(
        [mean_or_none(best_match(case["refs"][0], a["alternatives"], b["alternatives"]))
         for a, b in itertools.combinations(with_alts, 2)]
    )
    return order_k, alt_k


# ---------------------------------------------------------------------------------------------------------------


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= TOL


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stepwise", default=None)
    args = ap.parse_args()
    exe = find_stepwise(args.stepwise)

    cases = make_cases(args.cases, args.seed)
    failures = []

    def fail(msg):
        failures.append(msg)

    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        write_inputs(cases, td)
        subprocess.run(
            [exe, "-q", "eval", str(td / "instances.jsonl"), "-p", str(td / "predictions.jsonl"), "--pooled",
             "--bootstrap", "0", "-o", str(td / "metrics")],
            check=True, stdout=subprocess.DEVNULL,
        )
        subprocess.run(
            [exe, "-q", "eval", str(td / "instances.jsonl"), "--agreement", str(td / "annotations.jsonl"),
             "--bootstrap", "0", "-o", str(td / "agreement")],
            check=True, stdout=subprocess.DEVNULL,
        )
        ours = {}
        with open(td / "metrics" / "per_instance.jsonl") as f:
            for line in f:
                r = json.loads(line)
                ours[r["id"]] = r
        results = json.load(open(td / "metrics" / "results.json"))
        agreement = {}
        with open(td / "agreement" / "per_instance.jsonl") as f:
            for line in f:
                r = json.loads(line)
                agreement[r["id"]] = r
        agreement_summary = json.load(open(td / "agreement" / "results.json"))

    if len(ours) != len(cases):
        fail(f"stepwise scored {len(ours)} of {len(cases)} cases")

    names = ["position_accuracy", "pmr", "lr", "lq", "kendall_tau"]
    sums = {k: 0.0 for k in names + ["distance"]}
    pooled = {"correct": 0, "items": 0, "lcs": 0, "concordant": 0, "pairs": 0, "w1": 0, "w2": 0, "w3": 0}
    multi = 0
    for c in cases:
        idx, t = best_reference(c["pred"], c["refs"])
        r = ours.get(c["id"])
        if r is None:
            fail(f"{c['id']}: missing from stepwise's output")
            continue
        multi += len(c["refs"]) > 1
        if r["reference"] != idx:
            fail(f"{c['id']}: chosen reference {r['reference']} != {idx} (pred {c['pred']}, refs {c['refs']})")
        want = dict(zip(names, t[:5]))
        want["distance"] = t[7]
        for k, v in want.items():
            if not close(float(r[k]), float(v)):
                fail(f"{c['id']}: {k} stepwise {r[k]} != reference {v} (pred {c['pred']}, refs {c['refs']})")
            sums[k] += v
        # scipy's Kendall tau: gold positions vs predicted positions of each item, against the chosen reference.
        ref = c["refs"][idx]
        items = range(c["n"])
        sp = kendalltau([ref.index(x) for x in items], [c["pred"].index(x) for x in items]).statistic
        if not close(float(r["kendall_tau"]), float(sp)):
            fail(f"{c['id']}: kendall_tau stepwise {r['kendall_tau']} != scipy {sp}")
        # Pooled sums.
        n = c["n"]
        p = c["pred"]
        pooled["correct"] += sum(1 for k in range(n) if p[k] == ref[k])
        pooled["items"] += n
        pooled["lcs"] += t[3]
        pairs = n * (n - 1) // 2
        pooled["pairs"] += pairs
        pooled["concordant"] += len(set(itertools.combinations(p, 2)) & set(itertools.combinations(ref, 2)))
        for w in (1, 2, 3):
            pooled[f"w{w}"] += sum(1 for j, x in enumerate(ref) if abs(j - p.index(x)) <= w)

    # Averages and pooled ratios against results.json.
    groups = {g["group"]: g for g in results["groups"]}
    allg = groups["all"]
    for k in names + ["distance"]:
        want = sums[k] / len(cases)
        got = allg["metrics"][k]["value"]
        if not close(got, want):
            fail(f"mean {k}: stepwise {got} != reference {want}")
    want_pooled = {
        "pooled_position_accuracy": pooled["correct"] / pooled["items"],
        "pooled_lcs": pooled["lcs"] / pooled["items"],
        "pooled_rouge_s": pooled["concordant"] / pooled["pairs"],
        "pooled_within_1": pooled["w1"] / pooled["items"],
        "pooled_within_2": pooled["w2"] / pooled["items"],
        "pooled_within_3": pooled["w3"] / pooled["items"],
    }
    for k, want in want_pooled.items():
        got = allg["pooled"][k]["value"]
        if not close(got, want):
            fail(f"{k}: stepwise {got} != reference {want}")

    # Agreement.
    order_vals, alt_vals = [], []
    for c in cases:
        ok, ak = instance_agreement(c)
        r = agreement.get(c["id"])
        if r is None:
            fail(f"{c['id']}: missing from the agreement output")
            continue
        if not close(r["order_kappa"], ok):
            fail(f"{c['id']}: order kappa stepwise {r['order_kappa']} != sklearn {ok}")
        if not close(r["alternative_kappa"], ak):
            fail(f"{c['id']}: alternative kappa stepwise {r['alternative_kappa']} != sklearn {ak}")
        if ok is not None:
            order_vals.append(ok)
        if ak is not None:
            alt_vals.append(ak)
    for key, vals in (("order_kappa", order_vals), ("alternative_kappa", alt_vals)):
        got = agreement_summary[key]["value"]
        want = sum(vals) / len(vals)
        if not close(got, want):
            fail(f"mean {key}: stepwise {got} != sklearn {want}")

    print(f"cases: {len(cases)} ({multi} with several references); instances with order agreement: "
          f"{len(order_vals)}, with alternative-order agreement: {len(alt_vals)}")
    print("checked per instance: reference choice, position accuracy, PMR, distance, L_q, L_r, tau (also vs "
          "scipy.stats.kendalltau), order kappa and alternative kappa (sklearn.metrics.cohen_kappa_score); "
          "and all averages and pooled ratios")
    exit_with(failures, f"OK: all values agree within {TOL}")


if __name__ == "__main__":
    main()
