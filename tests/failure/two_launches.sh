#!/usr/bin/env bash
# two_launches.sh <mpirun...> -- <failure_helper>
# Two launches in one Slurm job at once, as a job script running two mpiruns with `&`: the
# same SLURM_JOB_ID, no step id (mpirun's ranks have none), the same $TMPDIR. Each spills
# objects to disk and reads them back; each must get its own bytes (they once read each
# other's spill files and exited 0), and each must leave nothing behind.
set -uo pipefail
mpirun=()
while [[ $# -gt 0 && $1 != -- ]]; do mpirun+=("$1"); shift; done
shift
app=$1
shared=$(mktemp -d "${TMPDIR:-/tmp}/prism-two-launches-XXXXXX")
trap 'rm -rf "$shared"' EXIT
pids=()
for seed in 1 2; do
  TMPDIR=$shared timeout 120 "${mpirun[@]}" -n 2 -x SLURM_JOB_ID=4242 -x TMPDIR \
    "$app" spill_check "$seed" --prism-object-store-memory=64M >"$shared.out$seed" 2>&1 &
  pids+=($!)
done
fail=0
for i in 0 1; do
  seed=$((i + 1))
  wait "${pids[$i]}"
  rc=$?
  echo "---- launch $seed (exit status $rc)"
  cat "$shared.out$seed"
  rm -f "$shared.out$seed"
  [[ $rc == 0 ]] || fail=1
done
left=$(find "$shared" -mindepth 1 -path '*spill*' -type f | wc -l)
echo "spill files left behind: $left"
[[ $left == 0 ]] || fail=1
[[ $fail == 0 ]] && echo "two launches ok"
exit $fail
