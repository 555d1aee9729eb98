#!/usr/bin/env bash
# Our typical_p, XTC, DRY (and the top-k / typical / top-p / min-p / XTC order) against llama.cpp's
# own samplers: compiles tests/generation/llama_cpp_samplers.cpp against the llama.cpp that the
# node-llama-cpp npm package ships (its source bundle's headers, its prebuilt libraries; nothing is
# downloaded), runs it on the cases of sampler_reference_cases.h and checks ours on the same cases.
# Exit 77 (skip) without node-llama-cpp or the model.
#
#   tests/generation/sampler_vs_llama_cpp.sh CHECKER OUT_DIR MODEL.gguf [CASES]
set -euo pipefail
checker=$1 out=$2 model=$3 cases=${4:-800}
cd "$(dirname "$0")/../.."
if [ ! -f node_modules/node-llama-cpp/llama/gitRelease.bundle ] || [ ! -d node_modules/@node-llama-cpp/linux-x64/bins/linux-x64 ]; then
  echo "node-llama-cpp is not installed: skipped"; exit 77
fi
if [ ! -f "$model" ]; then echo "$model is missing: skipped"; exit 77; fi
source bench/llama_cpp_prebuilt.sh
llama_cpp_prebuilt sampler_vs_llama_cpp.sh "$out" >&2
reference=$out/llama_cpp_samplers
if [ ! -x "$reference" ] || [ tests/generation/llama_cpp_samplers.cpp -nt "$reference" ] \
   || [ tests/generation/sampler_reference_cases.h -nt "$reference" ]; then
  echo "== compiling llama_cpp_samplers ($(git -C "$out/src" log -1 --format='%h %cs'))"
  g++ -O2 -std=c++17 -I"$out/src/include" -I"$out/src/ggml/include" -Itests/generation \
    tests/generation/llama_cpp_samplers.cpp -o "$reference" \
    -L"$LIBS" -l:"$libllama" -l:"$libggml" -l:libggml-base.so -Wl,-rpath,"$LIBS" -pthread \
    2> >(grep -v "^/usr/bin/ld: warning" >&2)
  for lib in "$LIBS"/libggml-cpu-*.so; do ln -sf "$lib" "$out/"; done
fi
"$reference" "$model" "$cases" > "$out/llama_cpp_samplers.txt"
"$checker" llama "$out/llama_cpp_samplers.txt" "$model"
