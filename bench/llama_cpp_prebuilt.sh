# Sourced by bench/build_llama_bench.sh, build_llama_server.sh and build_llama_perplexity.sh: the llama.cpp that the
# node-llama-cpp npm package ships — its source (gitRelease.bundle, the commit its prebuilt
# binaries were built from) and those prebuilt libraries (@node-llama-cpp/linux-x64). Nothing is
# downloaded. After `llama_cpp_prebuilt SCRIPT OUT`: LIBS (absolute), libllama, libggml (file
# names in LIBS), and OUT/src holds the source.
llama_cpp_prebuilt() {
  local script=$1 out=$2
  local bundle=node_modules/node-llama-cpp/llama/gitRelease.bundle
  LIBS=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
  if [ ! -f "$bundle" ] || [ ! -d "$LIBS" ]; then
    echo "$script: node-llama-cpp and @node-llama-cpp/linux-x64 are not installed (scripts/setup installs them)" >&2
    exit 1
  fi
  LIBS=$(cd "$LIBS" && pwd)
  libllama=$(cd "$LIBS" && ls libllama.v*.so | head -1)
  libggml=$(cd "$LIBS" && ls libggml.v*.so | head -1)
  mkdir -p "$out"
  if [ ! -d "$out/src/.git" ]; then
    echo "== llama.cpp source from $bundle"
    git clone -q "$bundle" "$out/src"
  fi
}
