# Sourced by bench/build_llama_{bench,perplexity,lookup,server}.sh: the llama.cpp that the
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

# One llama.cpp program from the bundled source (SOURCES relative to OUT/src), linked against the
# prebuilt libraries: `llama_cpp_compile OUT NAME SOURCE...` writes OUT/NAME. Call after
# llama_cpp_prebuilt. ggml picks the best libggml-cpu-<variant>.so from the executable's folder,
# so those are linked in beside it.
llama_cpp_compile() {
  local out=$1 name=$2
  shift 2
  local sources=()
  for source in "$@"; do sources+=("$out/src/$source"); done
  echo "== compiling $name ($(git -C "$out/src" log -1 --format='%h %cs'))"
  g++ -O2 -DNDEBUG -std=c++17 -I"$out/src/include" -I"$out/src/ggml/include" -I"$out/src/common" -I"$out/src/vendor" \
    "${sources[@]}" -o "$out/$name" \
    -L"$LIBS" -l:"$libllama" -l:libllama-common.so -l:"$libggml" -l:libggml-base.so -Wl,-rpath,"$LIBS" -pthread \
    2> >(grep -v "^/usr/bin/ld: warning" >&2)
  for lib in "$LIBS"/libggml-cpu-*.so; do ln -sf "$lib" "$out/"; done
  echo "built $out/$name"
}

# The one option of the single-program build scripts: [--out DIR] (default DEFAULT), -h prints
# the caller's usage (lines 2..LAST of its file). Sets OUT.
llama_cpp_out_option() {
  local script=$1 default=$2 last=$3
  shift 3
  OUT=$default
  while (($#)); do
    case "$1" in
      --out) OUT=$2; shift 2 ;;
      -h|--help) sed -n "2,${last}p" "bench/$script"; exit 0 ;;
      *) echo "$script: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
  done
}
