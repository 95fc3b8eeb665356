#!/usr/bin/env bash
# One command from a fresh Debian machine to the tests: installs the dependencies, builds
# everything, and runs a tier of the tests through ctest.
#   ./scripts/test.sh          every test (CI's command): unit, multi-rank, failure-path,
#                              Python, apps, perf smoke runs, the install check and the
#                              Slurm tests against a local Slurm they start
#   ./scripts/test.sh fast     the unit tests: fakes and in-process clusters, no MPI launcher
#   ./scripts/test.sh ranks    the multi-rank and failure-path tests (labels mpi, failure)
#   ./scripts/test.sh multihost  the tests across two namespace hosts (tests/multihost)
# Further arguments go to ctest, e.g. ./scripts/test.sh fast -R Scheduler. ctest runs
# tests side by side up to PRISM_TEST_JOBS processes (default 4: a test counts its MPI
# ranks; the Slurm tests share one local Slurm, two at a time; -j 6 timed out 3 tests on
# 2 cores). After a whole run of every test, docs/TEST_TIMES.md and tests/ctest_costs.txt
# (each test's seconds, for the first run of a new build) are written again from it
# (scripts/test_times.py).
set -euo pipefail
cd "$(dirname "$0")/.."
tier=all
case "${1:-}" in
  fast|ranks|multihost|all) tier=$1; shift ;;
esac
./scripts/install-deps.sh
./scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build_dir=$(cd "${BUILD_DIR:-build}" && pwd)
selection=()
case $tier in
  fast) selection=(-L '^unit$') ;;
  ranks) selection=(-L '^(mpi|failure)$') ;;
  multihost) selection=(-L '^multihost$') ;;
esac
# A build that has never run its tests gets the test times of the last whole run
# (tests/ctest_costs.txt): ctest -j then starts the longest first, as on a second run.
costs="$build_dir/Testing/Temporary/CTestCostData.txt"
if [[ ! -s $costs && -s tests/ctest_costs.txt ]]; then
  mkdir -p "$(dirname "$costs")" && cp tests/ctest_costs.txt "$costs"
fi
start=$(date +%s)
status=0
(cd "$build_dir" && ctest --output-on-failure --timeout 300 -j "${PRISM_TEST_JOBS:-4}" \
   --output-junit "$build_dir/ctest-junit.xml" "${selection[@]}" "$@") || status=$?
if [[ $tier == all && $# == 0 ]]; then
  /usr/bin/python3 scripts/test_times.py "$build_dir" --wall=$(( $(date +%s) - start )) \
    --out=docs/TEST_TIMES.md --costs=tests/ctest_costs.txt || true
fi
exit $status
