"""Load `stepwise export` output back with the tools it is for, and check it against the suite it came from.

Makes a small world suite (or takes --suite), exports it three ways and checks:

- hf: every config of the card's YAML header loads with `datasets.load_dataset(OUT, name=CONFIG)`; per split the
  rows are the suite's questions of that (setting, task) in file order (qid, answer, number of options); every
  `<image N>` placeholder names an image of the row; one image per config decodes to a PIL image of the corpus
  file's size;
- vlmevalkit: every TSV reads with `pandas.read_csv(sep="\\t")`; rows are the test questions (qid, answer letter,
  option columns filled for the question's choices), images decode from base64 (one, or a list literal);
- lmms-eval: when the `lmms_eval` package imports, its TaskManager loads the exported task folder and every task
  builds its test docs, renders the first doc's visuals and text, and scores the right letter 1 and a wrong one 0.
  Without the package the check says it skipped (exit status unaffected unless --require-lmms-eval).

Exit status 1 on any difference.

    python scripts/crosscheck/export_check.py [--stepwise BIN] [--suite SUITE] [--require-lmms-eval]

pip: datasets pandas pillow (and lmms-eval for the third check)
"""

import argparse
import ast
import base64
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from common import find_stepwise

FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL:", msg)


def run(cmd):
    subprocess.run([str(c) for c in cmd], check=True)


def split_name(s):
    return {"val": "validation", "dev": "validation", "validation": "validation", "train": "train", None: "test",
            "test": "test"}.get(s, s)


def suite_questions(suite):
    """{config: {split: [question, ...]}} from the suite's task-set folders."""
    manifest = json.loads((suite / "manifest.json").read_text())
    same_as = manifest["params"].get("same_as", {})
    out = {}
    for setting in manifest["params"]["settings"]:
        for task in manifest["params"]["tasks"]:
            if f"{setting}/{task}" in same_as:
                continue
            data = json.loads((suite / setting / task / "questions.json").read_text())["data"]
            by_split = defaultdict(list)
            for q in data:
                by_split[split_name(q.get("split"))].append(q)
            if data:
                out[f"{setting}-{task}"] = dict(by_split)
    return out


def card_configs(readme):
    """Config names and their splits from the card's YAML header."""
    import yaml
    header = readme.read_text().split("---\n")[1]
    return {c["config_name"]: [f["split"] for f in c["data_files"]] for c in yaml.safe_load(header)["configs"]}


def check_hf(out, expected, corpus_images, cache):
    import datasets
    import pyarrow.parquet as pq
    from PIL import Image
    datasets.disable_progress_bars()
    configs = card_configs(out / "README.md")
    if set(configs) != set(expected):
        fail(f"hf: configs {sorted(set(configs) ^ set(expected))} differ between the card and the suite")
    rows = 0
    for config, splits in configs.items():
        ds = datasets.load_dataset(str(out), name=config, cache_dir=str(cache))
        for split in splits:
            got, want = ds[split], expected.get(config, {}).get(split, [])
            if len(got) != len(want):
                fail(f"hf {config}/{split}: {len(got)} rows, suite has {len(want)}")
                continue
            rows += len(got)
            for i, (row, q) in enumerate(zip(got, want)):
                if row["qid"] != q["qid"] or row["answer"] != q["answer"] or len(row["options"]) != len(q["choice_list"]):
                    fail(f"hf {config}/{split}[{i}]: qid/answer/options {row['qid']} {row['answer']} "
                         f"{len(row['options'])} vs {q['qid']} {q['answer']} {len(q['choice_list'])}")
                    break
                named = {int(n) for n in re.findall(r"<image (\d+)>", row["prompt"] + " ".join(row["options"]))}
                if named != set(range(1, len(row["images"]) + 1)):
                    fail(f"hf {config}/{split}[{i}]: placeholders {sorted(named)} vs {len(row['images'])} images")
                    break
        # One image per config decodes to a PIL image of its corpus file's size (the path read from the Parquet
        # file itself, undecoded).
        split = next((s for s in splits if len(ds[s]) and ds[s][0]["images"]), None)
        if split is not None:
            img = ds[split][0]["images"][0]
            table = pq.read_table(out / "data" / config / f"{split}-00000-of-00001.parquet", columns=["images"])
            path = table.column("images")[0].as_py()[0]["path"]
            if not isinstance(img, Image.Image):
                fail(f"hf {config}: images decode to {type(img)}, not PIL images")
            elif Image.open(corpus_images / path).size != img.size:
                fail(f"hf {config}: decoded image {img.size} vs corpus file {path}")
    print(f"hf: {len(configs)} configs, {rows} rows loaded with datasets {datasets.__version__}")


def check_vlmevalkit(out, expected):
    import pandas as pd
    from PIL import Image
    files = sorted(out.glob("*.tsv"))
    want_configs = {c for c, s in expected.items() if "test" in s}
    if {f.stem for f in files} != want_configs:
        fail(f"vlmevalkit: TSVs {sorted({f.stem for f in files} ^ want_configs)} differ from the suite's test configs")
    rows = 0
    for f in files:
        df = pd.read_csv(f, sep="\t", keep_default_na=False, dtype=str)
        want = expected[f.stem]["test"]
        if len(df) != len(want):
            fail(f"vlmevalkit {f.name}: {len(df)} rows, suite has {len(want)} test questions")
            continue
        rows += len(df)
        letters = [c for c in df.columns if len(c) == 1 and c.isupper()]
        for i, (row, q) in enumerate(zip(df.to_dict("records"), want)):
            filled = [c for c in letters if row[c] != ""]
            if row["qid"] != q["qid"] or row["answer"] != chr(ord("A") + q["answer"]) or len(filled) != len(q["choice_list"]):
                fail(f"vlmevalkit {f.name}[{i}]: qid/answer/options differ from {q['qid']}")
                break
            image, names = row["image"], row["image_path"]
            blobs = ast.literal_eval(image) if image.startswith("[") else ([image] if image else [])
            paths = ast.literal_eval(names) if names.startswith("[") else ([names] if names else [])
            if len(blobs) != len(paths) or (len(blobs) > 1) != names.startswith("["):
                fail(f"vlmevalkit {f.name}[{i}]: {len(blobs)} images but image_path {names[:60]!r}")
                break
            if i == 0 and blobs:
                Image.open(io.BytesIO(base64.b64decode(blobs[0]))).load()
    print(f"vlmevalkit: {len(files)} TSVs, {rows} rows read with pandas {pd.__version__}")


def check_lmms_eval(out, expected, require):
    try:
        import lmms_eval  # noqa: F401
        from lmms_eval.tasks import TaskManager, get_task_dict
    except Exception as e:  # noqa: BLE001 (any import failure means the package is not usable here)
        msg = f"lmms-eval: not importable ({type(e).__name__}: {e})"
        if require:
            fail(msg)
        else:
            print(msg, "- check skipped")
        return
    names = sorted(p.stem for p in (out / "tasks" / "stepwise").glob("*.yaml") if p.stem != "stepwise")
    tm = TaskManager(include_path=str(out / "tasks"), include_defaults=False)
    flat = {}

    def leaves(d):
        for k, v in d.items():
            if isinstance(v, dict):
                leaves(v)
            else:
                flat[k] = v
    leaves(get_task_dict(["stepwise"], tm))
    if len(flat) != len(names):
        fail(f"lmms-eval: the group loads {len(flat)} tasks, the folder has {len(names)}")
    for name, task in sorted(flat.items()):
        docs = task.test_docs()
        want = expected[task.config.dataset_name]["test"]
        if len(docs) != len(want):
            fail(f"lmms-eval {name}: {len(docs)} test docs, suite has {len(want)}")
            continue
        doc = docs[0]
        visuals = task.doc_to_visual(doc)
        text = task.doc_to_text(doc)
        right = chr(ord("A") + want[0]["answer"])
        wrong = "A" if right != "A" else "B"
        scores = [task.process_results(doc, [r])["accuracy"]
                  for r in (right, f"({right})", f"The answer is {right}.", f"{right}. because", wrong)]
        if scores != [1.0, 1.0, 1.0, 1.0, 0.0] or not text.endswith("directly.") or not visuals:
            fail(f"lmms-eval {name}: scores {scores}, {len(visuals)} visuals, text ends {text[-20:]!r}")
        if task.doc_to_target(doc) != right:
            fail(f"lmms-eval {name}: target {task.doc_to_target(doc)!r}, expected {right}")
    version = getattr(lmms_eval, "__version__", "")
    print(f"lmms-eval {version}: {len(flat)} tasks loaded by its TaskManager, test docs and scoring checked")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stepwise")
    ap.add_argument("--suite", type=Path, help="an existing suite (default: a 120-procedure world suite)")
    ap.add_argument("--procedures", type=int, default=120)
    ap.add_argument("--require-lmms-eval", action="store_true")
    a = ap.parse_args()
    sw = find_stepwise(a.stepwise)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        suite = a.suite
        if suite is None:
            run([sw, "-q", "world", "generate", "-n", a.procedures, "--seed", "3", "-o", tmp / "world"])
            run([sw, "-q", "embed", tmp / "world", "--encoder", "descriptor", "-o", tmp / "f-img"])
            run([sw, "-q", "embed", tmp / "world", "--encoder", "w2v", "-o", tmp / "f-txt"])
            run([sw, "-q", "sweep", tmp / "world", "--features", tmp / "f-txt", "--features", tmp / "f-img",
                 "-o", tmp / "suite"])
            suite = tmp / "suite"
        corpus_images = Path(json.loads((suite / "manifest.json").read_text())["inputs"][0]["path"]).parent
        expected = suite_questions(suite)
        for fmt in ("hf", "vlmevalkit", "lmms-eval"):
            run([sw, "-q", "export", suite, "--to", fmt, "-o", tmp / fmt])
        check_hf(tmp / "hf", expected, corpus_images, tmp / "hf-cache")
        check_vlmevalkit(tmp / "vlmevalkit", expected)
        # Offline, with a throwaway Hugging Face cache: the task loader reads the exported folder only.
        os.environ.update(HF_HOME=str(tmp / "hf-home"), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
        check_lmms_eval(tmp / "lmms-eval", expected, a.require_lmms_eval)
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        sys.exit(1)
    print("export check: OK")


if __name__ == "__main__":
    main()
