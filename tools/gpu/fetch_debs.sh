#!/usr/bin/env bash
# Downloads the Debian packages kiln builds and tests with into .gpu-debs/ (ignored by git), for a
# GPU machine that cannot reach a package registry: tools/gpu/run_checks.sh unpacks them there.
# Run here, on a machine with apt; the folder then travels with the working tree (about 28 MB).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
packages=(
  libshaderc-dev libshaderc1 glslang-dev glslang-tools glslc spirv-headers spirv-tools
  libvulkan-dev libvulkan1 vulkan-validationlayers
  libglvnd0 libegl1 libgl1 libglx0 libopengl0 libgles2  # the NVIDIA Vulkan driver loads through libglvnd
  libgtest-dev googletest nlohmann-json3-dev zlib1g-dev
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 libprotoc32 protobuf-compiler
  libonnx-dev libonnx1 libonnx-testdata
)
mkdir -p "$root/.gpu-debs"
cd "$root/.gpu-debs"
rm -f ./*.deb
apt-get download "${packages[@]}"
du -sh .
