#!/usr/bin/env bash
# Installs every Debian package kiln needs to build and test on a fresh Debian 12 machine.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends \
  build-essential cmake ninja-build \
  llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools \
  libonnx-dev libprotobuf-dev protobuf-compiler \
  libgtest-dev \
  flatbuffers-compiler libflatbuffers-dev \
  libonnx-testdata \
  python3-onnx python3-numpy \
  pybind11-dev python3-dev zlib1g-dev libzstd-dev libedit-dev libcurl4-openssl-dev
