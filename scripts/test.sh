#!/usr/bin/env bash
# One command from a fresh Debian machine to every test: installs dependencies, builds, and
# runs ctest (unit tests without MPI, multi-rank tests under mpirun -n 1/3/4, failure-path
# tests, perf smoke runs, install check, and the Slurm tests against a local Slurm they
# start). Extra arguments go to ctest, e.g. -L unit.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "${BUILD_DIR:-build}"
exec ctest --output-on-failure --timeout 300 "$@"
