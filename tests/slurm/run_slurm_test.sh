#!/usr/bin/env bash
# Slurm tests against a real local Slurm (slurm/start-slurm.sh): the core demo through
# sbatch + srun --mpi=pmix -n 3, and the misuse message for srun --mpi=pmi2.
# Usage: run_slurm_test.sh <build dir>. Every Slurm command runs under `timeout`.
# Exit 77 (ctest: skipped) when Slurm cannot be started here (not root, not installed).
set -uo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
export SLURM_BASE=${SLURM_BASE:-/tmp/prism-slurm-test}
export SLURM_CONF=${SLURM_CONF:-$SLURM_BASE/etc/slurm.conf}
work=$(mktemp -d /tmp/prism-slurm-XXXXXX)

[[ $(id -u) == 0 ]] || { echo "skip: starting a local Slurm needs root"; exit 77; }
command -v slurmctld >/dev/null || { echo "skip: slurm-wlm not installed"; exit 77; }

started=0
cleanup() {
  [[ $started == 1 ]] && timeout 60 "$root/slurm/stop-slurm.sh" --purge >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
if ! timeout 30 sinfo >/dev/null 2>&1; then
  timeout 120 "$root/slurm/start-slurm.sh" >"$work/start.log" 2>&1 || {
    cat "$work/start.log"; echo "FAIL: could not start Slurm"; exit 1; }
  started=1
fi

fail() { echo "FAIL: $*"; exit 1; }

# 1. sbatch the core demo on 3 ranks via srun --mpi=pmix.
cat >"$work/demo.sbatch" <<JOB
#!/usr/bin/env bash
#SBATCH --ntasks=3
#SBATCH --time=00:05:00
#SBATCH --output=$work/demo-%j.out
srun --mpi=pmix $build/apps/core_demo
JOB
jobid=$(timeout 30 sbatch --parsable "$work/demo.sbatch") || fail "sbatch refused the job"
for _ in $(seq 240); do
  [[ -z $(timeout 10 squeue -h -j "$jobid" 2>/dev/null) ]] && break
  sleep 0.5
done
[[ -n $(timeout 10 squeue -h -j "$jobid" 2>/dev/null) ]] && { timeout 10 scancel "$jobid"; fail "job $jobid still queued/running after 120 s"; }
out="$work/demo-$jobid.out"
cat "$out"
grep -q "Prism core demo on 3 rank(s), job $jobid" "$out" || fail "demo did not run on 3 ranks with the Slurm job id"
grep -q "task .* ran on rank 2" "$out" || fail "no task ran on rank 2"
grep -q "^done" "$out" || fail "demo did not finish"

# 2. srun --mpi=pmi2 cannot form an MPI world with Debian's Open MPI: say so, exit non-zero.
timeout 120 srun --mpi=pmi2 -n 2 "$build/apps/core_demo" >"$work/pmi2.out" 2>&1
rc=$?
cat "$work/pmi2.out"
[[ $rc != 0 && $rc != 124 ]] || fail "srun --mpi=pmi2 exited $rc (expected a clean non-zero exit)"
grep -q -- "--mpi=pmix" "$work/pmi2.out" || fail "no hint to use srun --mpi=pmix"
echo "PASS: slurm tests"
