#!/usr/bin/env bash
# Issue 51's world comparison at a test size that can resolve half a point of PMR: the learned sequencer
# (`train-seq`, BERSON decoder, its defaults) against the pairwise + topological-sort baseline (3 seeds) on
# whole procedures of the built-in world (4 to 20 steps, every valid order known from the step DAG).
#   - The world has N procedures (default 14,000); the split keeps 4,000 for training and 500 for validation, as
#     on the 5,000-procedure world of earlier runs, and tests on the rest (9,500 by default).
#   - Both methods read the same stores: w2v token vectors (pooled for the baseline) and pooled descriptors.
#   - The paired comparison is `stepwise eval --versus`; a difference is outside noise when its 95% bootstrap
#     interval over sequences excludes 0.
# Output: OUT/eval-seed<S>/ (results.json, per_item.jsonl), OUT/eval-seed<S>.txt (the table), OUT/times.log.
#
# Usage: scripts/seq_world_target.sh [OUT]     (default OUT=seq-world-target)
# Environment: STEPWISE (binary; default target/release/stepwise, built if missing), N (default 14000), WORLD_SEED
# (default 21), SEEDS (the learned sequencer's seeds; default "1"), TRAIN_OPTS (extra `train-seq` options).
# Wall time on 2 cores (release build, Xeon family 6 model 207): world and stores 11 min, each pairwise seed 4-7 min,
# each learned sequencer seed about 6 min an epoch (early stopping after 20-30 epochs: 2-3 h; a killed `train-seq`
# resumes from its checkpoint when the script is run again).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-seq-world-target}"
S="${STEPWISE:-$ROOT/target/release/stepwise}"
N="${N:-14000}"
WORLD_SEED="${WORLD_SEED:-21}"
SEEDS="${SEEDS:-1}"
TRAIN_OPTS="${TRAIN_OPTS:-}"

if [[ ! -x "$S" ]]; then
  (cd "$ROOT" && cargo build --release -p stepwise-cli)
fi
mkdir -p "$OUT"
cd "$OUT"
timed() {
  local start
  start=$(date +%s)
  "$@"
  echo "$(($(date +%s) - start)) s: $*" >> times.log
}
split=$(awk -v n="$N" 'BEGIN { printf "%.6f,%.6f,%.6f", 4000 / n, 500 / n, 1 - 4500 / n }')
[[ -d world ]] || timed "$S" -q world generate -n "$N" --seed "$WORLD_SEED" --styles 8 -o world
[[ -d clean ]] || timed "$S" -q clean world -o clean
[[ -d w2v ]] || timed "$S" -q embed clean --encoder w2v --seed 1 --tokens -o w2v
[[ -d descp ]] || timed "$S" -q embed clean --encoder descriptor -o descp
[[ -d seq ]] || timed "$S" -q generate clean --task sequencing --modality multimodal --seq-steps 20 \
  --seq-min-steps 4 --seq-split "$split" -o seq
feats=(--features w2v --features descp)
versus=()
for p in 1 2 3; do
  [[ -f pairwise$p.jsonl ]] || timed "$S" -q baseline seq --model pairwise "${feats[@]}" --seed "$p" \
    -o pairwise$p.jsonl
  versus+=(--versus pairwise$p.jsonl)
done
for s in $SEEDS; do
  # shellcheck disable=SC2086
  [[ -d sequencer$s ]] || timed "$S" -q train-seq seq "${feats[@]}" --seed "$s" $TRAIN_OPTS -o sequencer$s
  [[ -f sequencer$s.jsonl ]] || timed "$S" -q predict sequencer$s seq "${feats[@]}" --split test \
    -o sequencer$s.jsonl
  "$S" eval seq -p sequencer$s.jsonl "${versus[@]}" --split test -o eval-seed$s --force > eval-seed$s.txt
done
if [[ $(wc -w <<< "$SEEDS") -gt 1 ]]; then
  all=()
  for s in $SEEDS; do all+=(-p sequencer$s.jsonl); done
  "$S" eval seq "${all[@]}" "${versus[@]}" --split test -o eval-seeds --force > eval-seeds.txt
fi
cat eval-seed*.txt
