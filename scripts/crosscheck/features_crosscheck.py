"""Cross-check the feature store, TF-IDF and exact k-NN against NumPy and scikit-learn.

Embeds an English corpus (../shared/data/procedures/based-cooking.jsonl when present, else a seeded synthetic
one) with `stepwise embed`, then checks:

- the store is plain NumPy: `vectors.npy` loads with numpy.load as C-order float32 of shape (len(ids), dim);
  `meta.json` agrees; w2v rows have unit (or zero) norm;
- TF-IDF rows equal sklearn's TfidfVectorizer fitted on the same texts with the store's vocabulary
  (token_pattern \\w+, lowercase, smooth idf, l2), to 1e-5;
- `stepwise neighbors --json` (cosine, inner product, L2; with and without --exclude-same-procedure) returns the
  same neighbours and distances as a NumPy brute force over vectors.npy (ties within 1e-6 may swap).

Exit status 1 on any disagreement.

    python scripts/crosscheck/features_crosscheck.py [--stepwise target/release/stepwise] [--corpus FILE.jsonl]

pip: numpy scikit-learn
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

ROOT = Path(__file__).resolve().parents[2]
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL:", msg)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(map(str, cmd))}")
    return r.stdout


def synthetic_corpus(path):
    rng = random.Random(7)
    verbs = ["chop", "whisk", "boil", "fry", "bake", "stir", "season", "drain", "serve", "slice"]
    things = ["onions", "eggs", "pasta", "garlic", "butter", "flour", "the sauce", "potatoes", "rice", "salt"]
    with open(path, "w") as f:
        for p in range(120):
            steps = []
            for s in range(rng.randint(3, 8)):
                words = [f"{rng.choice(verbs).capitalize()} the {rng.choice(things)}"]
                words += [f"with {rng.choice(things)}" for _ in range(rng.randint(0, 3))]
                steps.append({"title": None if s % 3 else f"Step {s}", "text": " ".join(words) + ".", "images": []})
            f.write(json.dumps({"id": f"syn/{p}", "title": f"Recipe {p}", "steps": steps}, sort_keys=True) + "\n")


def load_store(d):
    ids = (d / "ids").read_text(encoding="utf-8").split("\n")[:-1]
    x = np.load(d / "vectors.npy")
    meta = json.loads((d / "meta.json").read_text())
    if x.dtype != np.float32 or not x.flags["C_CONTIGUOUS"] or x.shape != (len(ids), meta["encoder"]["dim"]):
        fail(f"{d}: vectors.npy is {x.dtype} {x.shape}, C={x.flags['C_CONTIGUOUS']}; expected float32 "
             f"({len(ids)}, {meta['encoder']['dim']})")
    if meta["count"] != len(ids):
        fail(f"{d}: meta count {meta['count']} != {len(ids)} ids")
    return ids, x, meta


def corpus_texts(corpus):
    """text:/title: items and their texts, as stepwise defines them (full text = title + newline + text)."""
    items = {}
    for line in open(corpus, encoding="utf-8"):
        if not line.strip():
            continue
        p = json.loads(line)
        for i, s in enumerate(p["steps"]):
            parts = [t for t in (s.get("title"), s.get("text")) if t is not None]
            full = "\n".join(parts)
            if full.strip():
                items[f"text:{p['id']}#{i}"] = full
            if s.get("title") and s["title"].strip():
                items[f"title:{p['id']}#{i}"] = s["title"]
    return items


def check_tfidf(store, corpus):
    ids, x, _ = load_store(store)
    model = json.loads((store / "model" / "tfidf.json").read_text())
    texts = corpus_texts(corpus)
    fit_docs = [texts[i] for i in ids if i.startswith("text:")]
    vec = TfidfVectorizer(vocabulary=model["vocabulary"], token_pattern=r"(?u)\b\w+\b", lowercase=True,
                          norm="l2", smooth_idf=True, sublinear_tf=model["config"]["sublinear_tf"])
    vec.fit(fit_docs)
    ref = vec.transform([texts[i] for i in ids]).toarray()
    if not np.allclose(vec.idf_, np.array(model["idf"]), atol=1e-9):
        fail("tfidf: idf differs from sklearn")
    err = np.abs(ref - x).max()
    print(f"tfidf: {len(ids)} rows x {x.shape[1]} terms, max |stepwise - sklearn| = {err:.2e}")
    if err > 1e-5:
        worst = int(np.abs(ref - x).max(axis=1).argmax())
        fail(f"tfidf: row {ids[worst]} differs by {err}")


def brute(x, q, metric):
    if metric == "ip":
        return -(x @ q)
    if metric == "cosine":
        nx = np.linalg.norm(x, axis=1)
        nq = np.linalg.norm(q)
        with np.errstate(divide="ignore", invalid="ignore"):
            d = 1.0 - (x @ q) / (nx * nq)
        d[(nx == 0) | (nq == 0)] = 1.0
        return d
    return np.sqrt(((x - q) ** 2).sum(axis=1))


def check_neighbors(stepwise, store, corpus, n_queries=12, k=8):
    ids, x, _ = load_store(store)
    x64 = x.astype(np.float64)
    rng = random.Random(3)
    queries = rng.sample(range(len(ids)), min(n_queries, len(ids)))
    proc = lambda i: i.split(":", 1)[1].rsplit("#", 1)[0]
    for metric in ["cosine", "ip", "l2"]:
        for exclude in [False, True]:
            cmd = [stepwise, "neighbors", store, "-k", str(k), "--metric", metric, "--json"]
            cmd += [a for qi in queries for a in ("--id", ids[qi])]
            if exclude:
                cmd.append("--exclude-same-procedure")
            lines = [json.loads(l) for l in run(cmd).splitlines() if l.strip()]
            for qi, line in zip(queries, lines):
                d = brute(x64, x64[qi], metric)
                keep = np.ones(len(ids), bool)
                keep[qi] = False
                if exclude:
                    keep &= np.array([proc(i) != proc(ids[qi]) for i in ids])
                cand = np.flatnonzero(keep)
                order = cand[np.lexsort((cand, d[cand]))][:k]
                got = [ids.index(n["id"]) for n in line["neighbors"]]
                got_d = np.array([n["distance"] for n in line["neighbors"]])
                if len(got) != len(order):
                    fail(f"neighbors {metric} exclude={exclude} {ids[qi]}: {len(got)} results, expected {len(order)}")
                    continue
                if np.abs(got_d - d[order]).max() > 1e-5:
                    fail(f"neighbors {metric} {ids[qi]}: distances {got_d} vs {d[order]}")
                # Same set up to near-ties at the k-th distance.
                kth = d[order[-1]]
                if set(got) != set(order.tolist()):
                    diff = set(got) ^ set(order.tolist())
                    if any(abs(d[j] - kth) > 1e-6 for j in diff):
                        fail(f"neighbors {metric} exclude={exclude} {ids[qi]}: {got} vs {order.tolist()}")
    print(f"neighbors: {len(queries)} queries x 3 metrics x 2 filters agree with NumPy brute force")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stepwise", default=str(ROOT / "target" / "release" / "stepwise"))
    ap.add_argument("--corpus", help="procedure JSONL (English); default based-cooking from the shared data")
    args = ap.parse_args()
    data = Path(os.environ.get("STEPWISE_SHARED_DATA", ROOT.parent / "shared" / "data"))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = Path(args.corpus) if args.corpus else data / "procedures" / "based-cooking.jsonl"
        if not corpus.exists():
            corpus = tmp / "synthetic.jsonl"
            synthetic_corpus(corpus)
        print(f"corpus: {corpus}")
        for enc in ["tfidf", "w2v"]:
            run([args.stepwise, "-q", "embed", corpus, "--encoder", enc, "-o", tmp / enc])
        check_tfidf(tmp / "tfidf", corpus)
        ids, x, _ = load_store(tmp / "w2v")
        norms = np.linalg.norm(x, axis=1)
        if not np.all((np.abs(norms - 1) < 1e-5) | (norms == 0)):
            fail("w2v: rows are not unit length")
        print(f"w2v: {len(ids)} rows x {x.shape[1]}, unit norm")
        check_neighbors(args.stepwise, tmp / "tfidf", corpus)
        check_neighbors(args.stepwise, tmp / "w2v", corpus)
    if FAILURES:
        print(f"{len(FAILURES)} disagreement(s)")
        return 1
    print("features cross-check: all agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
