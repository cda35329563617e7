#!/usr/bin/env bash
# The Meta-RecipeQA model study (Hasty Student, Impatient Reader, BiDAF, HTRN on RecipeQA mode and the 8 knob
# settings) on real data:
#   procedures  ../shared/data/procedures (real step photos) with the grocery photos as extra distractors:
#               visual cloze, visual coherence, visual ordering
#   recipeqa    textual cloze in RecipeQA mode on the RecipeQA dev recipes (text only; their images are not
#               distributed), split by recipe — next to RecipeQA's Table 2
# Both are small (a few dozen procedures with step photos; 413 dev recipes), so the study runs 5-fold
# cross-validation by procedure instead of a fixed split. Output: OUT/<name>/study/study.md (+ study.json,
# figures, predictions) for each dataset.
#
# Usage: scripts/model_study.sh [OUT]       (default OUT=model-study)
# Environment: STEPWISE (binary; default target/debug/stepwise, built if missing), SHARED (default ../shared/data
# next to the workspace), MODELS (default models/), TEXT_ENCODER (default minilm), IMAGE_ENCODER (default
# effnet-lite0), SEED (default 1), SIZE (extra `stepwise study` options; default a small model for these small
# datasets: hidden 64, HTRN 2 x 128 x 4 heads, at most 40 epochs, patience 10).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-model-study}"
S="${STEPWISE:-$ROOT/target/debug/stepwise}"
SHARED="${SHARED:-$ROOT/../shared/data}"
MODELS="${MODELS:-$ROOT/models}"
TEXT_ENCODER="${TEXT_ENCODER:-minilm}"
IMAGE_ENCODER="${IMAGE_ENCODER:-effnet-lite0}"
SEED="${SEED:-1}"
SIZE="${SIZE:---hidden 64 --attention 64 --htrn-layers 2 --htrn-dim 128 --htrn-heads 4 --epochs 40 --patience 10}"

if [[ ! -x "$S" ]]; then
  (cd "$ROOT" && cargo build -p stepwise-cli)
fi
[[ -d "$SHARED" ]] || { echo "shared data not found at $SHARED (set SHARED)" >&2; exit 2; }
mkdir -p "$OUT"
step() { echo "== $*" >&2; }

step "procedures: corpus, $TEXT_ENCODER text and $IMAGE_ENCODER image features, grocery pool"
P="$OUT/procedures"
"$S" ingest "$SHARED"/procedures/*.jsonl -o "$P/corpus" --force
"$S" embed "$P/corpus" --encoder "$TEXT_ENCODER" --models "$MODELS" -o "$P/text"
"$S" embed "$P/corpus" --encoder "$IMAGE_ENCODER" --models "$MODELS" -o "$P/image"
POOL=(--distractor-pool "$SHARED/distractors/grocery" --pool-features "$P/grocery" --models "$MODELS")
step "procedures: suite (visual tasks, 9 settings)"
"$S" sweep "$P/corpus" --task visual_cloze,visual_coherence,visual_ordering --seed "$SEED" \
  --features "$P/text" --features "$P/image" "${POOL[@]}" -o "$P/suite" --force
step "procedures: study (5-fold cross-validation by procedure: the suite has few procedures with step photos)"
# shellcheck disable=SC2086
"$S" study "$P/suite" --features "$P/text" --features "$P/image" "${POOL[@]}" --seed "$SEED" --cv 5 $SIZE \
  -o "$P/study" --force

step "recipeqa: dev recipes, $TEXT_ENCODER features, textual cloze in RecipeQA mode"
R="$OUT/recipeqa"
"$S" ingest --format recipeqa-recipes "$SHARED/recipeqa/recipes-dev.json" -o "$R/corpus" --force
"$S" embed "$R/corpus" --encoder "$TEXT_ENCODER" --models "$MODELS" -o "$R/text"
"$S" sweep "$R/corpus" --task textual_cloze --settings recipeqa --seed "$SEED" --features "$R/text" \
  -o "$R/suite" --force
# shellcheck disable=SC2086
"$S" study "$R/suite" --features "$R/text" --models "$MODELS" --seed "$SEED" --cv 5 $SIZE -o "$R/study" --force

echo "wrote $P/study/study.md and $R/study/study.md" >&2
