#!/usr/bin/env bash
# Builds what a GPU machine runs, on this one (which has no GPU): the tools
# and the GPU tests with LLVM linked statically (-DKILN_STATIC_LLVM=ON) in
# build-device/, with the two shared libraries the GPU machine may lack
# copied beside them, and the shared fixtures and anchors copied into
# shared/ (which a device call takes along with the checkout; ../shared
# stays behind). Carry build-device to the GPU machine and run
# scripts/device-round.sh there (docs/cuda-target.md, "Running on a GPU
# machine").
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-device -G Ninja -DKILN_STATIC_LLVM=ON > /dev/null
cmake --build build-device --target kiln-compile kiln-run kiln-gpu-tests \
  kiln-runtime-tests
mkdir -p build-device/lib-extra
for library in libprotobuf.so.32 libonnx_proto.so.1; do
  cp -L "/lib/x86_64-linux-gnu/$library" build-device/lib-extra/
done
[ -d shared ] || cp -r ../shared shared
du -sh build-device/bin build-device/lib-extra shared
