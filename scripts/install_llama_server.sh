#!/usr/bin/env bash
# Install llama-cpp-python[server] (an OpenAI-compatible server) for the slow backend tests.
#
# llama-cpp-python ships only an sdist on PyPI, and compiling its vendored llama.cpp takes
# ~8 minutes on a 2-core machine. So the wheel is built once into a cache directory and every
# later install comes from there:
#
#   1. already installed at the pinned version with the server extras importable -> exit 0 now;
#   2. no cached wheel                        -> `pip wheel --no-deps` builds one into the cache;
#   3. install from the cache (`--find-links`), the server extras' own deps from PyPI.
#
# Environment:
#   LMAUDIT_WHEEL_CACHE  wheel cache dir (default: $HOME/.cache/lmaudit/wheels)
#   PYTHON               interpreter to install into (default: python)
#   CMAKE_ARGS           passed through to the llama.cpp build (default: CPU-only, no extras).
#                        The default build targets the host CPU (GGML_NATIVE), so a cached wheel
#                        belongs to this machine kind; set CMAKE_ARGS="-DGGML_NATIVE=OFF" for a
#                        portable (slower) wheel.
#   LLAMA_CFLAGS         C/C++ flags of the build (default: no AMX). Virtual machines may advertise
#                        Intel AMX without running it: seen here, a GGML_NATIVE build died with
#                        SIGILL at its first AMX instruction (tilezero, in ggml_backend_amx_mul_mat).
#                        GCC's explicit -mno-amx-* override what -march=native implies.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="0.3.36"
PYTHON="${PYTHON:-python}"
LLAMA_CFLAGS="${LLAMA_CFLAGS:--mno-amx-tile -mno-amx-int8 -mno-amx-bf16}"
# wheels built with other flags (an earlier AMX build) are never picked up from this cache
CACHE="${LMAUDIT_WHEEL_CACHE:-$HOME/.cache/lmaudit/wheels}/cflags-$(printf '%s' "$LLAMA_CFLAGS" | sha256sum | cut -c1-12)"

installed_ok() {
    "$PYTHON" - "$LLAMA_CPP_PYTHON_VERSION" <<'EOF' 2>/dev/null
import sys
import llama_cpp
import llama_cpp.server.app  # noqa: F401  (fails if the [server] extras are missing)
# a build with AMX kernels (see LLAMA_CFLAGS) does not count as installed
amx = "AMX_INT8 = 1" in llama_cpp.llama_print_system_info().decode()
sys.exit(0 if llama_cpp.__version__ == sys.argv[1] and not amx else 1)
EOF
}

if installed_ok; then
    echo "llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION} [server] already installed"
    exit 0
fi

mkdir -p "$CACHE"
shopt -s nullglob
wheels=("$CACHE"/llama_cpp_python-"${LLAMA_CPP_PYTHON_VERSION}"-*.whl)
shopt -u nullglob

if [ "${#wheels[@]}" -eq 0 ]; then
    echo "building llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION} wheel into $CACHE (slow: ~8 min on 2 cores)"
    start=$(date +%s)
    export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}"
    export CMAKE_ARGS="${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF}"
    export CFLAGS="$LLAMA_CFLAGS" CXXFLAGS="$LLAMA_CFLAGS"
    # Build in a scratch dir, then move into place, so an interrupted build leaves no half wheel.
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # --no-cache-dir: pip would otherwise reuse a wheel it built earlier with other flags
    "$PYTHON" -m pip wheel --no-cache-dir --no-deps --wheel-dir "$tmp" "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"
    mv "$tmp"/llama_cpp_python-"${LLAMA_CPP_PYTHON_VERSION}"-*.whl "$CACHE"/
    echo "wheel built in $(( $(date +%s) - start )) s"
fi

"$PYTHON" -m pip install --force-reinstall --no-deps --no-index --find-links "$CACHE" "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"
"$PYTHON" -m pip install --find-links "$CACHE" "llama-cpp-python[server]==${LLAMA_CPP_PYTHON_VERSION}"

if ! installed_ok; then
    echo "llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION} [server] did not install correctly" >&2
    exit 1
fi
echo "llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION} [server] installed"
