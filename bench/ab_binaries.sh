#!/usr/bin/env bash
# Decode (or, with --pp N, prefill) speed of two or more inferlab binaries (a commit against another,
# a kernel variant), each run in its own process, alternated for N rounds: per binary the median
# t/s, and the median of
# its per-round ratio to the first binary with the lowest and highest, so a drift of the host's
# memory bandwidth over minutes (2x seen on shared machines) falls on every binary alike.
#
#   bench/ab_binaries.sh [-n ROUNDS] [-m MODEL] [-t THREADS] [--tg N | --pp N] [-r REPS] BINARY BINARY [...]
#
# Separate processes, not variants switched inside one: on a Zen 5 a variant that prefetched with
# prefetcht0, mixed per call or per token into the same process, slowed the prefetchnta variant's
# tokens after it (8.55-8.71 ms/token alone, 9.2 mixed), so in-process alternation favoured the
# wrong one (docs/speed.md, "Separate processes").
# MODEL: a GGUF loads in ~1 s (default: the Q4_0 conversion speed.sh makes, models/*.q4_0.gguf).
set -euo pipefail
rounds=10 model="" threads=1 tg=64 pp=0 reps=3
bins=()
while [[ $# -gt 0 ]]; do
  if [[ "$1" =~ ^(-n|-m|-t|--tg|--pp|-r)$ && $# -lt 2 ]]; then echo "ab_binaries.sh: $1 needs a value" >&2; exit 2; fi
  case "$1" in
    -n) rounds="$2"; shift 2 ;;
    -m) model="$2"; shift 2 ;;
    -t) threads="$2"; shift 2 ;;
    --tg) tg="$2"; shift 2 ;;
    --pp) pp="$2"; shift 2 ;;
    -r) reps="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "ab_binaries.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) bins+=("$1"); shift ;;
  esac
done
[[ "$pp" =~ ^[0-9]+$ ]] || { echo "ab_binaries.sh: --pp takes a whole number, not '$pp'" >&2; exit 2; }
for pair in "-n:$rounds" "-t:$threads" "--tg:$tg" "-r:$reps"; do
  [[ "${pair#*:}" =~ ^[1-9][0-9]*$ ]] || { echo "ab_binaries.sh: ${pair%%:*} takes a positive whole number, not '${pair#*:}'" >&2; exit 2; }
done
[[ ${#bins[@]} -ge 2 ]] || { echo "ab_binaries.sh: give two binaries or more (see --help)" >&2; exit 2; }
for b in "${bins[@]}"; do [[ -x "$b" ]] || { echo "ab_binaries.sh: $b is not an executable" >&2; exit 2; }; done
# Paths are the caller's; only the default model is looked up beside the script.
if [[ -z "$model" ]]; then
  model=$(ls "$(dirname "$0")"/../models/*.q4_0.gguf 2>/dev/null | head -1 || true)
  [[ -n "$model" ]] || { echo "ab_binaries.sh: no -m MODEL and no models/*.q4_0.gguf (bench/speed.sh makes one)" >&2; exit 2; }
fi
[[ -e "$model" ]] || { echo "ab_binaries.sh: model $model does not exist" >&2; exit 2; }

# What each process runs and the column of bench engine's table it reads: tgN (decode) or ppN (prefill).
if ((pp > 0)); then shape=(-p "$pp" -n 0) test="pp$pp"; else shape=(-p 0 -n "$tg") test="tg$tg"; fi
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $threads thread(s), $model, $test x $reps per process, $rounds rounds"
runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
for ((i = 1; i <= rounds; ++i)); do
  line=""
  for b in "${bins[@]}"; do
    out=$("$b" bench engine "$model" -t "$threads" "${shape[@]}" -r "$reps" 2>&1) || { echo "$out" >&2; echo "ab_binaries.sh: $b failed" >&2; exit 1; }
    tps=$(grep -o "| $test | [0-9.]*" <<<"$out" | awk '{print $4}')
    [[ -n "$tps" ]] || { echo "$out" >&2; echo "ab_binaries.sh: no $test line from $b" >&2; exit 1; }
    line+=" $tps"
  done
  echo "round $i:$line"
  echo "$line" >>"$runs"
done
# median of the numbers on stdin (one per line)
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
for ((j = 1; j <= ${#bins[@]}; ++j)); do
  ratios=$(awk -v j="$j" '{ printf "%.4f\n", $j / $1 }' "$runs" | sort -g)
  printf "%s: $test median %.1f t/s, ratio to the first: median %.3f (%.3f-%.3f)\n" "${bins[j - 1]}" \
    "$(awk -v j="$j" '{ print $j }' "$runs" | median)" "$(median <<<"$ratios")" "$(head -1 <<<"$ratios")" "$(tail -1 <<<"$ratios")"
done
