#!/usr/bin/env bash
# mpirun-recovery.sh [mpirun options] program [args...]
#
# Runs a Prism program under `mpirun --enable-recovery` (recovery mode: a lost worker rank
# does not end the job) and exits with the job's real exit status. Open MPI 4.1's mpirun
# exits 0 in recovery mode whatever its ranks' statuses (even after MPI_Abort), so rank 0
# writes its status to $PRISM_EXIT_STATUS_FILE as it exits, and this script exits with it:
# 0, the program's own status, 75 after a preemption (requeue), or 1 if rank 0 ended
# without writing one (killed: the head was lost, and the job with it).
#
#   scripts/mpirun-recovery.sh -n 4 ./my_app --flag
#
# The file is made in the current directory ($PRISM_STATUS_DIR to choose another): rank 0
# must be able to write it, on a cluster where it runs on another node too. $MPIRUN names
# the launcher (default: mpirun).
set -u
dir=${PRISM_STATUS_DIR:-$PWD}
status_file=$(mktemp "$dir/.prism-exit-status.XXXXXX") || { echo "mpirun-recovery: cannot write in $dir" >&2; exit 1; }
trap 'rm -f "$status_file"' EXIT
PRISM_EXIT_STATUS_FILE=$status_file "${MPIRUN:-mpirun}" --enable-recovery -x PRISM_EXIT_STATUS_FILE "$@" &
launch=$!
for sig in TERM INT USR1 USR2 HUP; do trap "kill -$sig $launch 2>/dev/null" "$sig"; done  # passed on to mpirun
# In recovery mode Open MPI 4.1's mpirun never ends by itself when a host's daemon died
# before it reported its rank's end (its error manager marks the daemon gone but never its
# ranks): once rank 0 has recorded the job's status, mpirun gets 10 s to end, then SIGTERM.
recorded_at=""
while kill -0 "$launch" 2>/dev/null; do
  if [[ -s $status_file ]]; then
    recorded_at=${recorded_at:-$SECONDS}
    if ((SECONDS - recorded_at >= 10)); then
      echo "mpirun-recovery: the job ended (status $(<"$status_file")) but mpirun did not after 10 s; stopping it" >&2
      kill -TERM "$launch" 2>/dev/null
      break
    fi
  fi
  sleep 0.5 & wait $!  # traps run between commands
done
wait "$launch"
launcher=$?
while kill -0 "$launch" 2>/dev/null; do wait "$launch"; launcher=$?; done  # a trap interrupted the wait
if [[ -s $status_file ]]; then
  exit "$(<"$status_file")"
fi
if ((launcher != 0)); then
  exit "$launcher"
fi
echo "mpirun-recovery: rank 0 ended without recording its exit status (was it killed?); exit status 1" >&2
exit 1
