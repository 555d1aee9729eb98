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

OUT=build-llama-bench
while (($#)); do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "build_llama_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

source bench/llama_cpp_prebuilt.sh
llama_cpp_prebuilt build_llama_bench.sh "$OUT"
echo "== compiling llama-bench ($(git -C "$OUT/src" log -1 --format='%h %cs'))"
g++ -O2 -DNDEBUG -std=c++17 -I"$OUT/src/include" -I"$OUT/src/ggml/include" -I"$OUT/src/common" -I"$OUT/src/vendor" \
  "$OUT/src/tools/llama-bench/llama-bench.cpp" "$OUT/src/tools/llama-bench/main.cpp" -o "$OUT/llama-bench" \
  -L"$LIBS" -l:"$libllama" -l:libllama-common.so -l:"$libggml" -l:libggml-base.so -Wl,-rpath,"$LIBS" -pthread \
  2> >(grep -v "^/usr/bin/ld: warning" >&2)
# ggml picks the best libggml-cpu-<variant>.so from the executable's folder.
for lib in "$LIBS"/libggml-cpu-*.so; do ln -sf "$lib" "$OUT/"; done
echo "built $OUT/llama-bench"
