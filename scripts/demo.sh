#!/usr/bin/env bash
# One command from a fresh Debian machine to the main demo: installs the packages the demo
# needs, builds only the demo and the libraries under it, and trains a small CNN on
# Fashion-MNIST with 2 workers on 3 MPI ranks (results under ./prism_results unless
# PRISM_STORAGE_PATH says otherwise). Extra arguments go to the app, e.g. --epochs=1 or
# --model=resnet18. ./scripts/test.sh installs and builds the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --demo
./scripts/build.sh train_fashion_mnist
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec timeout 1800 mpirun --oversubscribe -n 3 "${BUILD_DIR:-build}/apps/train_fashion_mnist" --workers=2 "$@"
