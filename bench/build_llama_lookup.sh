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

OUT=build-llama-lookup
while (($#)); do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "build_llama_lookup.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

source bench/llama_cpp_prebuilt.sh
llama_cpp_prebuilt build_llama_lookup.sh "$OUT"
echo "== compiling llama-lookup ($(git -C "$OUT/src" log -1 --format='%h %cs'))"
g++ -O2 -DNDEBUG -std=c++17 -I"$OUT/src/include" -I"$OUT/src/ggml/include" -I"$OUT/src/common" -I"$OUT/src/vendor" \
  "$OUT/src/examples/lookup/lookup.cpp" -o "$OUT/llama-lookup" \
  -L"$LIBS" -l:"$libllama" -l:libllama-common.so -l:"$libggml" -l:libggml-base.so -Wl,-rpath,"$LIBS" -pthread \
  2> >(grep -v "^/usr/bin/ld: warning" >&2)
# ggml picks the best libggml-cpu-<variant>.so from the executable's folder.
for lib in "$LIBS"/libggml-cpu-*.so; do ln -sf "$lib" "$OUT/"; done
echo "built $OUT/llama-lookup"
