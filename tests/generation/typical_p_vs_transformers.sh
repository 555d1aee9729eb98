#!/usr/bin/env bash
# Our typical_p against transformers' TypicalLogitsWarper (after its TemperatureLogitsWarper) on
# seeded random rows: typical_p_transformers.py writes the rows and transformers' probabilities,
# sampler_reference_check compares. Exit 77 (skip) without the venv's torch + transformers.
#
#   tests/generation/typical_p_vs_transformers.sh PYTHON CHECKER OUT_DIR
set -euo pipefail
python=$1 checker=$2 out=$3
cd "$(dirname "$0")/../.."
if ! "$python" -c "import torch, transformers" 2>/dev/null; then echo "torch/transformers missing: skipped"; exit 77; fi
mkdir -p "$out"
"$python" tests/generation/typical_p_transformers.py > "$out/typical_p_transformers.txt"
"$checker" transformers "$out/typical_p_transformers.txt"
