#!/usr/bin/env bash
# Configures and builds Prism into ${BUILD_DIR:-build} (Release with debug info), with Ninja
# when it is installed (a build directory made earlier keeps its generator).
#   ./scripts/build.sh                       everything: libraries, apps, tests, benchmarks
#   ./scripts/build.sh train_fashion_mnist   only these targets and what they need
# CMake options go in PRISM_CMAKE_ARGS, e.g. PRISM_CMAKE_ARGS="-DPRISM_PCH=OFF".
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
generator=()
if [[ ! -f $BUILD_DIR/CMakeCache.txt ]] && command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi
# shellcheck disable=SC2086  # PRISM_CMAKE_ARGS is a list of options
cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" \
  ${PRISM_CMAKE_ARGS:-} >/dev/null
targets=()
for target in "$@"; do targets+=(--target "$target"); done
cmake --build "$BUILD_DIR" -j "$(nproc)" "${targets[@]}"
