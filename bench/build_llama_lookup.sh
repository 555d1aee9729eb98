#!/usr/bin/env bash
# Builds llama.cpp's own prompt-lookup decoding example, llama-lookup (examples/lookup), from the
# llama.cpp source that the node-llama-cpp npm package ships (node_modules/node-llama-cpp/llama/
# gitRelease.bundle, the commit its prebuilt binaries were built from), linked against those
# prebuilt libraries (@node-llama-cpp/linux-x64: libllama, libllama-common with its n-gram cache,
# libggml and the per-CPU libggml-cpu-*.so variants). Nothing is downloaded; one C++ file is
# compiled. Then: bench/speculative.py --llama-lookup build-llama-lookup/llama-lookup (docs/speculative.md)
#
#   bench/build_llama_lookup.sh [--out DIR]      (default build-llama-lookup)
set -euo pipefail
cd "$(dirname "$0")/.."

source bench/llama_cpp_prebuilt.sh
llama_cpp_out_option build_llama_lookup.sh build-llama-lookup 9 "$@"
llama_cpp_prebuilt build_llama_lookup.sh "$OUT"
llama_cpp_compile "$OUT" llama-lookup examples/lookup/lookup.cpp
