#!/usr/bin/env bash
# Builds llama.cpp's own llama-perplexity from the llama.cpp source that the node-llama-cpp npm package
# ships (node_modules/node-llama-cpp/llama/gitRelease.bundle, the commit its prebuilt binaries were
# built from), linked against those prebuilt libraries (@node-llama-cpp/linux-x64: libllama,
# libggml, the per-CPU libggml-cpu-*.so variants). Nothing is downloaded; one C++ file is compiled
# (a minute or two; run it under nice on a shared machine). Then: bench/quality.sh (docs/quality.md)
#
#   bench/build_llama_perplexity.sh [--out DIR]      (default build-llama-perplexity)
set -euo pipefail
cd "$(dirname "$0")/.."

source bench/llama_cpp_prebuilt.sh
llama_cpp_out_option build_llama_perplexity.sh build-llama-perplexity 9 "$@"
llama_cpp_prebuilt build_llama_perplexity.sh "$OUT"
llama_cpp_compile "$OUT" llama-perplexity tools/perplexity/perplexity.cpp tools/perplexity/main.cpp
