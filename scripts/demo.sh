#!/usr/bin/env bash
# One command from a fresh Debian machine to the main demo: installs dependencies, builds,
# and trains a small CNN on Fashion-MNIST with 2 workers on 3 MPI ranks (results under
# ./prism_results unless PRISM_STORAGE_PATH says otherwise). Extra arguments go to the app,
# e.g. --epochs=1 or --model=resnet18.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec timeout 1800 mpirun --oversubscribe -n 3 "${BUILD_DIR:-build}/apps/train_fashion_mnist" --workers=2 "$@"
