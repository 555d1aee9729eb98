#!/usr/bin/env bash
# Builds llama.cpp's own llama-server from the llama.cpp source that the node-llama-cpp npm package
# ships (node_modules/node-llama-cpp/llama/gitRelease.bundle, the commit its prebuilt binaries were
# built from), linked against those prebuilt libraries (@node-llama-cpp/linux-x64: libllama,
# libllama-common, libggml, the per-CPU libggml-cpu-*.so variants). Nothing is downloaded.
# Compiled here: the 13 tools/server/*.cpp, tools/mtmd (mtmd, clip, models/*.cpp), vendor/hash,
# vendor/cpp-httplib (the prebuilt common library does not export it) and an empty web-UI asset
# table from tools/ui/embed.cpp (llama.cpp's own fallback when no UI is built). About 6 minutes
# on 2 cores; run it with nice. Then the conformance run of docs/conformance.md:
#   build-llama-server/llama-server -m models/demo.gguf --port 8080 &
#   inferlab conform --base-url http://127.0.0.1:8080
#
#   bench/build_llama_server.sh [--out DIR] [-j N]      (default build-llama-server, -j 2)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=build-llama-server
JOBS=2
while (($#)); do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    -j) JOBS=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "build_llama_server.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

source bench/llama_cpp_prebuilt.sh
llama_cpp_prebuilt build_llama_server.sh "$OUT"
OUT=$(cd "$OUT" && pwd)
SRC=$OUT/src
OBJ=$OUT/obj
mkdir -p "$OBJ"
echo "== llama-server ($(git -C "$SRC" log -1 --format='%h %cs'))"

# The empty asset table: embed.cpp without an asset folder writes ui.cpp / ui.h with no files.
if [ ! -f "$OBJ/ui.cpp" ]; then
  g++ -O1 -std=c++17 "$SRC/tools/ui/embed.cpp" -o "$OBJ/llama-ui-embed"
  "$OBJ/llama-ui-embed" "$OBJ/ui.cpp" "$OBJ/ui.h"
fi

# -DLLAMA_SUBPROCESS -DLLAMA_SHARED: the prebuilt libllama-common.so was built with them, and they
# change the layout of structs the server shares with it.
DEFS="-DNDEBUG -DLLAMA_SUBPROCESS -DLLAMA_SHARED -DLLAMA_BUILD_NUMBER=0"
INCS="-I$SRC/include -I$SRC/ggml/include -I$SRC/common -I$SRC/vendor -I$SRC/vendor/hash -I$SRC/tools/mtmd \
-I$SRC/tools/server -I$SRC -I$OBJ"
sources=("$SRC"/tools/server/*.cpp "$SRC"/tools/mtmd/{mtmd,mtmd-audio,mtmd-image,mtmd-helper,mtmd-helper-gen,clip}.cpp
         "$SRC"/tools/mtmd/models/*.cpp "$SRC"/vendor/hash/hash.cpp "$SRC"/vendor/cpp-httplib/httplib.cpp "$OBJ/ui.cpp")
c_sources=("$SRC"/vendor/hash/xxhash/xxhash.c "$SRC"/vendor/hash/sha256/sha256.c)

CCACHE=$(command -v ccache || true)  # reruns (and other checkouts) hit the cache when there is one
# One make rule per object, so -j runs them in parallel and a rerun compiles only what is missing.
{
  echo "all: $OUT/llama-server"
  objs=()
  for s in "${sources[@]}" "${c_sources[@]}" "$SRC/vendor/hash/sha1/sha1.c"; do
    o="$OBJ/$(echo "${s#"$SRC"/}" | tr '/' '_').o"
    objs+=("$o")
    case "$s" in
      */sha1.c) cmd="$CCACHE g++ -x c++ -O2 -std=c++17 -w -I$SRC/vendor/hash" ;;  # llama.cpp compiles it as C++ (a namespace)
      *.c) cmd="$CCACHE gcc -O2 -w -I$SRC/vendor/hash" ;;
      *) cmd="$CCACHE g++ -O2 -std=c++17 -w" ;;
    esac
    printf '%s: %s\n\t%s %s %s -c %s -o %s\n' "$o" "$s" "$cmd" "$DEFS" "$INCS" "$s" "$o"
  done
  printf '%s/llama-server: %s\n\tg++ -o $@ $^ -L%s -l:%s -l:libllama-common.so -l:%s -l:libggml-base.so -Wl,-rpath,%s -pthread 2> >(grep -v "^/usr/bin/ld: warning" >&2 || true)\n' \
    "$OUT" "${objs[*]}" "$LIBS" "$libllama" "$libggml" "$LIBS"
} > "$OBJ/Makefile"
make -s -f "$OBJ/Makefile" -j "$JOBS" SHELL=/bin/bash

# ggml picks the best libggml-cpu-<variant>.so from the executable's folder.
for lib in "$LIBS"/libggml-cpu-*.so; do ln -sf "$lib" "$OUT/"; done
echo "built $OUT/llama-server ($("$OUT/llama-server" --version 2>&1 | grep -m1 version || true))"
