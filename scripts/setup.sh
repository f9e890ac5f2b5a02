#!/usr/bin/env bash
# setup.sh - installs everything kern needs on a fresh Debian 12 (bookworm) machine and
# builds it into build/ (or $KERN_BUILD_DIR).
#
#   bash scripts/setup.sh
#
# - Runs as root (CI) or as a user with sudo; never asks a question.
# - Idempotent: packages that are already installed are not fetched again (apt-get runs only
#   when something is missing, or always with KERN_SETUP_APT=always), and an existing build
#   directory is reconfigured instead of set up again.
# - KERN_SETUP_APT=never skips the package step (for machines managed some other way).
# - Then installs the Python package with pip (docs/python.md), where /usr/bin/python3
#   finds it from any directory: as root into /usr/local/lib/python3.X/dist-packages, as a
#   user into ~/.local/lib/python3.X/site-packages; its build directory is build-pip/
#   (incremental on a second run). KERN_SETUP_PIP=never skips it.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR=${KERN_BUILD_DIR:-build}
NATIVE_FILE=native/llvm19.ini

# Every package comes from Debian 12's own main archive (LLVM 19 is in bookworm).
#   meson ninja-build pkg-config   the build
#   gcc g++                        the default C compiler; meson also enables C++ (LLVM's link)
#   clang-19 lld-19                the fuzz harnesses (libFuzzer) and the LLVM backends' tools
#   libclang-rt-19-dev             libFuzzer and the sanitizer runtimes of clang-19
#   llvm-19-dev libzstd-dev        llvm-c and llvm-config-19 (native/llvm19.ini), zstd it links
#   libcriterion-dev               the test framework
#   python3-numpy                  a test reads and writes .npy files with NumPy itself
#                                  (interoperability of runtime/npy.c; docs/building.md)
#   libomp-19-dev                  OpenMP for clang-19: the hand-written C of bench/cpu-bench
#   spirv-headers spirv-tools      the SPIR-V emitter's opcodes; spvValidate in the tests
#   libvulkan-dev                  Vulkan headers (the loader itself is dlopen()ed at run time)
#   mesa-vulkan-drivers            lavapipe: a Vulkan device on the CPU, for the tests
#   vulkan-validationlayers        the Khronos validation layer, on in the Vulkan tests
#   glslang-tools                  glslangValidator: the Vulkan device tests' GLSL shaders
#   libspirv-cross-c-shared-dev    SPIRV-Cross's C API: --emit=msl (Metal)
#   libdlpack-dev                  dlpack.h: zero-copy exchange with NumPy, PyTorch, JAX, CuPy
#   python3-pytest python3-torch   the Python package's tests (python/, docs/python.md): pytest,
#                                  and PyTorch as a reference (autograd) and a DLPack producer
#   python3-pip python3-mesonpy    `pip install .` of the Python package, offline: pip, and
#                                  meson-python, the build backend pyproject.toml names
#   python3-matplotlib             the PNG pictures of python/examples (bounce_opt.py, fit.py)
#                                  and tests/python/test_examples.py, which runs them
PACKAGES=(
    meson ninja-build pkg-config
    gcc g++
    clang-19 lld-19 libclang-rt-19-dev
    llvm-19-dev libzstd-dev
    libcriterion-dev
    python3-numpy
    libomp-19-dev
    spirv-headers spirv-tools
    libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers
    glslang-tools
    libspirv-cross-c-shared-dev
    libdlpack-dev python3-pytest python3-torch
    python3-pip python3-mesonpy
    python3-matplotlib
)

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
else
    SUDO=(sudo)
fi

missing=()
for p in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [ "$status" != "install ok installed" ]; then
        missing+=("$p")
    fi
done

apt_mode=${KERN_SETUP_APT:-auto}
if [ "$apt_mode" = always ] || { [ "$apt_mode" = auto ] && [ ${#missing[@]} -gt 0 ]; }; then
    echo "setup: installing ${missing[*]:-${PACKAGES[*]}}" >&2
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${PACKAGES[@]}"
elif [ ${#missing[@]} -gt 0 ]; then
    echo "setup: KERN_SETUP_APT=never, but missing: ${missing[*]}" >&2
else
    echo "setup: all packages present" >&2
fi

if [ -f "$BUILD_DIR/meson-private/coredata.dat" ]; then
    meson setup --reconfigure "$BUILD_DIR" --native-file "$NATIVE_FILE"
else
    meson setup "$BUILD_DIR" --native-file "$NATIVE_FILE"
fi
ninja -C "$BUILD_DIR"

# The Python package (pyproject.toml): meson-python builds it in ${BUILD_DIR}-pip with the
# libraries inside the package. Offline: --no-build-isolation uses Debian's
# python3-mesonpy, --no-index never asks an index (NumPy, its one dependency, is Debian's).
# Debian 12 marks its python3 externally managed (PEP 668), which refuses any pip install
# into it without --break-system-packages; pip still leaves Debian's own directory
# (/usr/lib/python3/dist-packages) alone.
pip_mode=${KERN_SETUP_PIP:-auto}
if [ "$pip_mode" = never ]; then
    echo "setup: KERN_SETUP_PIP=never: the Python package is not installed" >&2
elif ! /usr/bin/python3 -c 'import pip, mesonpy' 2>/dev/null; then
    echo "setup: no pip or meson-python for /usr/bin/python3: the Python package" \
        "is not installed" >&2
else
    # meson-python 0.12 reconfigures the build directory whenever its native file from an
    # earlier run is there, which fails where the directory is gone: start both afresh
    [ -f "${BUILD_DIR}-pip/meson-private/coredata.dat" ] || rm -f .mesonpy-native-file.ini
    if [ "$(id -u)" -eq 0 ]; then
        pip_where=(--root-user-action=ignore)
    else
        pip_where=(--user)
    fi
    /usr/bin/python3 -m pip install --no-build-isolation --no-index --no-cache-dir \
        --break-system-packages "${pip_where[@]}" --config-settings=builddir="${BUILD_DIR}-pip" .
fi
