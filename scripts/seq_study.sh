#!/usr/bin/env bash
# The sequencing paper's model grid (Wu et al., ACL 2022, Tables 2-4: image-only / text-only / multimodal
# without and with sequence-aware pretraining, and the pretraining ablation) on three datasets:
#   world       the built-in world (multimodal; exact multi-references from the step DAG), train/val/test split
#   recipeqa    ../shared/data/recipeqa/recipes-dev.json (text only: its images are not distributed), 5-fold CV
#   procedures  ../shared/data/procedures, every window of 4-5 image steps (multimodal), 5-fold CV
#   recipeqa-extra  RecipeQA dev as `recipeqa`, with extra training recipes in every fold (--train-only; never
#               scored): R2VQ's 800 train and 100 test recipes (text of its inline-tagged files, ids r2vq/...),
#               based-cooking and gnome-recipes (../shared/data/procedures); not in the default DATASETS
# Text: token-level features with vocabulary ids (MLM's classes), the paper's cap of 5 sentences / 60 tokens per
# step. Images: a patch grid per photo (PISP/SMRM work on patches). The baselines (random, text-position,
# image-chain, pairwise + topological sort) run on the same instances, features and folds. Output:
# OUT/<name>/results.md, breakdown.md (+ json, predictions), OUT/<name>-baselines/, and OUT/table.md with every
# dataset's baselines and models in one table.
#
# Usage: scripts/seq_study.sh [OUT]      (default OUT=seq-study)
# Environment: STEPWISE (binary; default target/debug/stepwise, built if missing), SHARED (default ../shared/data
# next to the workspace), MODELS (default models/), TEXT_ENCODER (default w2v; minilm or glove-50d with
# MODELS), IMAGE_ENCODER (default effnet-lite0 with a 3x3 grid; descriptor without downloads), GRID (default 3),
# WORLD_N (default 300), SEED (default 1), SIZE (model options; default 1 layer x 64 wide x 4 heads, at most 20
# epochs, patience 5, 5 pretraining epochs), DATASETS (default "world recipeqa procedures").
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-seq-study}"
S="${STEPWISE:-$ROOT/target/debug/stepwise}"
SHARED="${SHARED:-$ROOT/../shared/data}"
MODELS="${MODELS:-$ROOT/models}"
TEXT_ENCODER="${TEXT_ENCODER:-w2v}"
IMAGE_ENCODER="${IMAGE_ENCODER:-effnet-lite0}"
GRID="${GRID:-3}"
WORLD_N="${WORLD_N:-300}"
SEED="${SEED:-1}"
SIZE="${SIZE:---dim 64 --layers 1 --heads 4 --epochs 20 --patience 5 --pretrain-epochs 5}"
DATASETS="${DATASETS:-world recipeqa procedures}"

if [[ ! -x "$S" ]]; then
  (cd "$ROOT" && cargo build -p stepwise-cli)
fi
mkdir -p "$OUT"/{corpora,seq,features}
step() { echo "== $*" >&2; }
text_features() { # dataset name
  "$S" embed "$OUT/corpora/$1" --encoder "$TEXT_ENCODER" --models "$MODELS" --seed "$SEED" --tokens \
    --max-tokens 60 --max-sentences 5 -o "$OUT/features/$1-text" -q
}
image_features() {
  "$S" embed "$OUT/corpora/$1" --encoder "$IMAGE_ENCODER" --models "$MODELS" --patches --grid "$GRID" \
    -o "$OUT/features/$1-image" -q
}
merge=()
for d in $DATASETS; do
  step "$d"
  case "$d" in
    world)
      "$S" world generate -n "$WORLD_N" --seed "$SEED" -o "$OUT/corpora/world" --force -q
      "$S" generate "$OUT/corpora/world" --task sequencing --modality multimodal --seed "$SEED" \
        -o "$OUT/seq/world" --force -q
      text_features world; image_features world
      cv=() ; feats=(--features "$OUT/features/world-text" --features "$OUT/features/world-image") ;;
    recipeqa)
      [[ -d "$SHARED" ]] || { echo "shared data not found at $SHARED (set SHARED)" >&2; exit 2; }
      "$S" ingest --format recipeqa-recipes "$SHARED/recipeqa/recipes-dev.json" -o "$OUT/corpora/recipeqa" --force -q
      "$S" generate "$OUT/corpora/recipeqa" --task sequencing --modality text --seq-min-steps 4 --seed "$SEED" \
        -o "$OUT/seq/recipeqa" --force -q
      text_features recipeqa
      cv=(--cv 5) ; feats=(--features "$OUT/features/recipeqa-text") ;;
    recipeqa-extra)
      [[ -d "$SHARED" ]] || { echo "shared data not found at $SHARED (set SHARED)" >&2; exit 2; }
      inline="$SHARED/r2vq/semeval2022_task9/hitqmul_derived/inline_tagged"
      "$S" ingest "$inline/data_train3.json" "$inline/data_test3.json" --id-prefix r2vq/ \
        -o "$OUT/corpora/r2vq-inline" --force -q
      "$S" ingest --on-missing-image drop "$SHARED/recipeqa/recipes-dev.json" "$OUT/corpora/r2vq-inline/procedures.jsonl" \
        "$SHARED/procedures/based-cooking.jsonl" "$SHARED/procedures/gnome-recipes.jsonl" \
        -o "$OUT/corpora/recipeqa-extra" --force -q
      "$S" generate "$OUT/corpora/recipeqa-extra" --task sequencing --modality text --seq-min-steps 4 \
        --seed "$SEED" -o "$OUT/seq/recipeqa-extra" --force -q
      text_features recipeqa-extra
      cv=(--cv 5 --train-only r2vq/ --train-only based-cooking/ --train-only gnome-recipes/)
      feats=(--features "$OUT/features/recipeqa-extra-text") ;;
    procedures)
      [[ -d "$SHARED" ]] || { echo "shared data not found at $SHARED (set SHARED)" >&2; exit 2; }
      "$S" ingest "$SHARED"/procedures/*.jsonl -o "$OUT/corpora/procedures" --force -q
      "$S" generate "$OUT/corpora/procedures" --task sequencing --modality multimodal --seq-min-steps 4 \
        --windows all --seed "$SEED" -o "$OUT/seq/procedures" --force -q
      text_features procedures; image_features procedures
      cv=(--cv 5) ; feats=(--features "$OUT/features/procedures-text" --features "$OUT/features/procedures-image") ;;
    *) echo "unknown dataset $d" >&2; exit 2 ;;
  esac
  # shellcheck disable=SC2086
  "$S" seq-study "$OUT/seq/$d" "${feats[@]}" "${cv[@]}" --name "$d" --seed "$SEED" $SIZE -o "$OUT/$d" --force \
    > /dev/null
  "$S" baseline "$OUT/seq/$d" --table "$d" "${feats[@]}" "${cv[@]}" --seed "$SEED" -o "$OUT/$d-baselines" \
    --force > /dev/null
  merge+=(--merge "$OUT/$d-baselines" --merge "$OUT/$d")
done
"$S" baseline "${merge[@]}" -o "$OUT/table" --force > /dev/null
cp "$OUT/table/results.md" "$OUT/table.md"
echo "wrote $OUT/table.md" >&2
