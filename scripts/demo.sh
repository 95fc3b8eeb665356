#!/usr/bin/env bash
# One command from a fresh Debian machine to the main demo: installs dependencies, builds,
# and runs the core demo on 3 MPI ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec timeout 300 mpirun --oversubscribe -n 3 "${BUILD_DIR:-build}/apps/core_demo" "$@"
