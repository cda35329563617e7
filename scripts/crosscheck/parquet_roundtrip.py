"""Check that stepwise's Parquet copies load in pyarrow with the same rows as the JSON(L) they mirror.

Ingests the four procedure sets of ../shared/data/procedures and RecipeQA's val-dev.json with `stepwise ingest`
(or checks the corpus folders given as arguments), then compares, row by row:

- procedures.parquet with procedures.jsonl: every column (id, title, source, license, lang, category, steps with
  title/text/images/annotations, ingredients, gallery, annotations, extra as canonical JSON);
- taskset/questions.parquet with taskset/questions.json: qid, recipe_id, task, split, question, choices, answer.

Exit status 1 on any difference.

    python scripts/crosscheck/parquet_roundtrip.py [--stepwise target/release/stepwise] [CORPUS ...]

pip: pyarrow
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from common import find_stepwise, shared_data as shared_data_dir  # noqa: E402
PROCEDURE_KEYS = {"id", "title", "source", "license", "lang", "category", "steps", "ingredients", "gallery", "annotations"}


def canonical(v):
    return json.dumps(v, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def expected_procedure(p):
    """A procedure-JSONL record as the Parquet row should hold it."""
    extra = {k: v for k, v in p.items() if k not in PROCEDURE_KEYS}
    steps = []
    for s in p["steps"]:
        # Unknown step keys are not Parquet columns (the JSONL keeps them), so only the schema's keys compare.
        ann = s.get("annotations")
        steps.append({
            "title": s.get("title"),
            "text": s.get("text"),
            "images": s.get("images", []),
            "annotations": canonical(ann) if ann is not None else None,
        })
    ann = p.get("annotations")
    return {
        "id": p["id"],
        "title": p.get("title"),
        "source": p.get("source"),
        "license": p.get("license"),
        "lang": p.get("lang"),
        "category": p.get("category"),
        "steps": steps,
        "ingredients": p.get("ingredients"),
        "gallery": p.get("gallery"),
        "annotations": canonical(ann) if ann is not None else None,
        "extra": canonical(extra) if extra else None,
    }


def normalize_row(row):
    """Make JSON-string columns comparable regardless of how stepwise serialised nested annotation objects."""
    for key in ("annotations", "extra"):
        if row.get(key) is not None:
            row[key] = canonical(json.loads(row[key]))
    for s in row["steps"]:
        if s.get("annotations") is not None:
            s["annotations"] = canonical(json.loads(s["annotations"]))
    return row


def check_procedures(corpus, problems):
    rows = pq.read_table(corpus / "procedures.parquet").to_pylist()
    with open(corpus / "procedures.jsonl", encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    if len(rows) != len(records):
        problems.append(f"{corpus}: {len(rows)} Parquet rows, {len(records)} JSONL records")
        return 0
    for i, (row, rec) in enumerate(zip(rows, records)):
        want = normalize_row(expected_procedure(rec))
        got = normalize_row({k: row.get(k) for k in want})
        if got != want:
            diff = [k for k in want if got.get(k) != want[k]]
            problems.append(f"{corpus}: row {i} ({rec['id']}) differs in {diff}")
            if len(problems) > 20:
                return i
    return len(rows)


def check_questions(corpus, problems):
    ts = corpus / "taskset"
    if not (ts / "questions.json").is_file():
        return 0
    rows = pq.read_table(ts / "questions.parquet").to_pylist()
    data = json.loads((ts / "questions.json").read_text(encoding="utf-8"))["data"]
    if len(rows) != len(data):
        problems.append(f"{ts}: {len(rows)} Parquet rows, {len(data)} questions")
        return 0
    for i, (row, q) in enumerate(zip(rows, data)):
        choices = [c if isinstance(c, list) else [c] for c in q["choice_list"]]
        want = {"qid": q["qid"], "recipe_id": q["recipe_id"], "task": q["task"], "split": q.get("split"),
                "question": q["question"], "choices": choices, "answer": q["answer"],
                "context": canonical(q.get("context", []))}
        got = {k: row.get(k) for k in want}
        got["context"] = canonical(json.loads(got["context"])) if got["context"] is not None else None
        if got != want:
            problems.append(f"{ts}: question {i} ({q['qid']}) differs in {[k for k in want if got[k] != want[k]]}")
    return len(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stepwise")
    ap.add_argument("corpora", nargs="*", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpora = list(args.corpora)
        if not corpora:
            stepwise = find_stepwise(args.stepwise)
            data = shared_data_dir()
            if not (data / "procedures").is_dir():
                sys.exit(f"shared data not found at {data} (set STEPWISE_SHARED_DATA)")
            jobs = [("procedures", sorted((data / "procedures").glob("*.jsonl"))),
                    ("recipeqa", [data / "recipeqa" / "val-dev.json"])]
            for name, inputs in jobs:
                out = Path(tmp) / name
                r = subprocess.run([stepwise, "-q", "ingest", *map(str, inputs), "-o", str(out)],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"stepwise ingest failed ({r.returncode}):\n{r.stderr}")
                corpora.append(out)
        problems = []
        for c in corpora:
            n = check_procedures(c, problems)
            q = check_questions(c, problems)
            print(f"{c.name}: {n} procedure rows" + (f", {q} question rows" if q else "") + " compared")
    if problems:
        print("FAIL:")
        for p in problems[:20]:
            print("  " + p)
        sys.exit(1)
    print("OK: Parquet rows equal the JSON(L) records")


if __name__ == "__main__":
    main()
