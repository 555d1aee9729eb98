#!/usr/bin/env bash
# Builds llama.cpp's own llama-bench from the llama.cpp source that the node-llama-cpp npm package
# ships (node_modules/node-llama-cpp/llama/gitRelease.bundle, the commit its prebuilt binaries were
# built from), linked against those prebuilt libraries (@node-llama-cpp/linux-x64: libllama,
# libggml, the per-CPU libggml-cpu-*.so variants). Nothing is downloaded; one C++ file is compiled
# (~30 s). Then: bench/speed.sh --llama-bench build-llama-bench/llama-bench
#
#   bench/build_llama_bench.sh [--out DIR]      (default build-llama-bench)
set -euo pipefail
cd "$(dirname "$0")/.."

source bench/llama_cpp_prebuilt.sh
llama_cpp_out_option build_llama_bench.sh build-llama-bench 9 "$@"
llama_cpp_prebuilt build_llama_bench.sh "$OUT"
llama_cpp_compile "$OUT" llama-bench tools/llama-bench/llama-bench.cpp tools/llama-bench/main.cpp
