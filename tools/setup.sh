#!/usr/bin/env bash
# Installs every Debian package kiln builds, tests and runs with. Safe to re-run.
# --with-torch also installs the Python packages that export the reference models and the digits
# training reference (tools/test.sh);
# --sanitize clang 16 with its sanitizer and libFuzzer runtimes and OpenMP, and the symbolizer the
# reports use (tools/sanitize/build.sh, for tools/test.sh --sanitize and tools/fuzz.sh).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config libgtest-dev
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
  glslc libshaderc-dev spirv-tools glslang-tools
  libglfw3-dev libimgui-dev xvfb xauth
  nlohmann-json3-dev
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  libdnnl-dev
)
for arg in "$@"; do
  case "$arg" in
    --with-torch) packages+=(python3-torch python3-torchvision python3-onnx python3-sklearn) ;;
    --sanitize) packages+=(llvm-14 clang-16 libclang-rt-16-dev libomp-16-dev) ;;  # llvm-symbolizer-14
    *) echo "setup: unknown option $arg (--with-torch, --sanitize)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
[[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
echo "setup: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
