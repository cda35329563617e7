#!/usr/bin/env bash
# Reproduce the step-sequencing results table (laid out like Table 2 of Wu et al., ACL 2022) on three datasets:
#   world       the built-in world (multimodal; multi-reference exact from the step DAG), train/val/test split
#   recipeqa    ../shared/data/recipeqa/recipes-dev.json (text only: its images are not distributed), 5-fold CV
#   procedures  ../shared/data/procedures, the procedures with >= 4 image steps (multimodal), 5-fold CV
# Every method (random, text-position, image-chain, pairwise + topological sort) with every feature view
# (text, image, multimodal) the dataset has. Output: OUT/table/results.md (+ results.json), and per dataset
# OUT/results/<name>/ with predictions and per-dataset tables.
#
# Usage: scripts/sequencing_table.sh [OUT]      (default OUT=sequencing-table)
# Environment: STEPWISE (binary; default target/debug/stepwise, built if missing), SHARED (default
# ../shared/data next to the workspace), MODELS (default models/), TEXT_ENCODER (default minilm, or tfidf /
# w2v without downloads), IMAGE_ENCODER (default effnet-lite0, or descriptor), WORLD_N (default 1000), SEED
# (default 1).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-sequencing-table}"
S="${STEPWISE:-$ROOT/target/debug/stepwise}"
SHARED="${SHARED:-$ROOT/../shared/data}"
MODELS="${MODELS:-$ROOT/models}"
TEXT_ENCODER="${TEXT_ENCODER:-minilm}"
IMAGE_ENCODER="${IMAGE_ENCODER:-effnet-lite0}"
WORLD_N="${WORLD_N:-1000}"
SEED="${SEED:-1}"

if [[ ! -x "$S" ]]; then
  (cd "$ROOT" && cargo build -p stepwise-cli)
fi
[[ -d "$SHARED" ]] || { echo "shared data not found at $SHARED (set SHARED)" >&2; exit 2; }
mkdir -p "$OUT"/{corpora,seq,features,results}

step() { echo "== $*" >&2; }

step "corpora"
"$S" world generate -n "$WORLD_N" --seed "$SEED" -o "$OUT/corpora/world" --force
"$S" ingest --format recipeqa-recipes "$SHARED/recipeqa/recipes-dev.json" -o "$OUT/corpora/recipeqa" --force
"$S" ingest "$SHARED"/procedures/*.jsonl -o "$OUT/corpora/procedures" --force

step "sequencing instances (5 steps; the paper's caps of 5 sentences / 60 tokens per step)"
"$S" generate "$OUT/corpora/world" --task sequencing --modality multimodal --seed "$SEED" -o "$OUT/seq/world" --force
"$S" generate "$OUT/corpora/recipeqa" --task sequencing --modality text --seq-min-steps 4 --seed "$SEED" \
  -o "$OUT/seq/recipeqa" --force
"$S" generate "$OUT/corpora/procedures" --task sequencing --modality multimodal --seq-min-steps 4 --windows all \
  --seed "$SEED" -o "$OUT/seq/procedures" --force

step "features ($TEXT_ENCODER text, $IMAGE_ENCODER images)"
for d in world recipeqa procedures; do
  "$S" embed "$OUT/corpora/$d" --encoder "$TEXT_ENCODER" --models "$MODELS" -o "$OUT/features/$d-text"
done
for d in world procedures; do
  "$S" embed "$OUT/corpora/$d" --encoder "$IMAGE_ENCODER" --models "$MODELS" -o "$OUT/features/$d-image"
done

step "baselines"
"$S" baseline "$OUT/seq/world" --table world --seed "$SEED" \
  --features "$OUT/features/world-text" --features "$OUT/features/world-image" -o "$OUT/results/world" --force
"$S" baseline "$OUT/seq/recipeqa" --table recipeqa --cv 5 --seed "$SEED" \
  --features "$OUT/features/recipeqa-text" -o "$OUT/results/recipeqa" --force
"$S" baseline "$OUT/seq/procedures" --table procedures --cv 5 --seed "$SEED" \
  --features "$OUT/features/procedures-text" --features "$OUT/features/procedures-image" \
  -o "$OUT/results/procedures" --force

step "table"
"$S" baseline --merge "$OUT/results/world" --merge "$OUT/results/recipeqa" --merge "$OUT/results/procedures" \
  -o "$OUT/table" --force
echo "wrote $OUT/table/results.md" >&2
