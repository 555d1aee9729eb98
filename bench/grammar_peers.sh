#!/usr/bin/env bash
# inferlab's grammar engine beside xgrammar and llguidance (bench/grammar_peers.py): coverage on the
# JSON Schema Test Suite and tests/grammar's schemas, and (--speed) compile and mask times, on the
# Qwen tokenizer. The peers live in their own virtual environment, out/venv-grammar-peers, made here
# from bench/grammar_peers_requirements.txt (pinned; remade when that file changes). They are
# measured against, never linked into inferlab.
#
#   bench/grammar_peers.sh [--setup-only] [--no-setup] [grammar_peers.py options...]
#     --markdown docs/grammar-peers.md   write the tables
#     --speed                            also time compiles and masks (quote figures from a quiet machine only)
#     --files minimum,maximum --check    a subset; exit 1 when ours is wrong where both peers agree (the CTest)
#   --no-setup: never install; exit 77 when the environment is missing (CTest must not download).
#   INFERLAB_BIN: the inferlab binary (default build/bin/inferlab).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${GRAMMAR_PEERS_VENV:-$root/out/venv-grammar-peers}"
requirements="$root/bench/grammar_peers_requirements.txt"
setup=1
setup_only=0
args=()
for a in "$@"; do
  case "$a" in
    --no-setup) setup=0 ;;
    --setup-only) setup_only=1 ;;
    *) args+=("$a") ;;
  esac
done

stamp="$venv/.requirements"
if ! cmp -s "$requirements" "$stamp" 2>/dev/null; then
  if [ "$setup" = 0 ]; then
    echo "SKIP: the peers' environment $venv is missing or stale; make it with bench/grammar_peers.sh --setup-only"
    exit 77
  fi
  echo "making $venv from $(basename "$requirements") (about 5.6 GB and minutes: xgrammar imports torch, and PyPI's torch brings CUDA libraries)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$stamp"
fi
[ "$setup_only" = 1 ] && exit 0
exec "$venv/bin/python" "$root/bench/grammar_peers.py" --inferlab "${INFERLAB_BIN:-$root/build/bin/inferlab}" "${args[@]}"
