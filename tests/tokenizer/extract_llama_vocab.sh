#!/usr/bin/env bash
# Writes llama.cpp's SentencePiece vocabulary test files (models/ggml-vocab-llama-spm.gguf, .inp, .out)
# from the llama.cpp source that node-llama-cpp bundles (a git bundle), into OUT_DIR. They are
# peers' files: read at test time, never committed. Exit 77 (skip) when the bundle is missing.
# Usage: extract_llama_vocab.sh OUT_DIR
set -euo pipefail
out=${1:?usage: extract_llama_vocab.sh OUT_DIR}
root="$(cd "$(dirname "$0")/../.." && pwd)"
bundle="$root/node_modules/node-llama-cpp/llama/gitRelease.bundle"
if [ ! -f "$bundle" ]; then
  echo "SKIP: $bundle missing; run scripts/setup (npm ci) first" >&2
  exit 77
fi
mkdir -p "$out"
files=(ggml-vocab-llama-spm.gguf ggml-vocab-llama-spm.gguf.inp ggml-vocab-llama-spm.gguf.out)
if [ -f "$out/.from" ] && [ "$(cat "$out/.from")" = "$(stat -c %Y "$bundle")" ]; then exit 0; fi
clone="$out/llama.cpp.git"
rm -rf "$clone"
git clone --quiet --bare "$bundle" "$clone"
for f in "${files[@]}"; do git --git-dir="$clone" show "HEAD:models/$f" > "$out/$f"; done
rm -rf "$clone"
stat -c %Y "$bundle" > "$out/.from"
echo "wrote ${files[*]} to $out"
