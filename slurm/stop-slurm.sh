#!/usr/bin/env bash
# Project copy of the verified recipe in shared/reference/slurm (used by tests/slurm and CI).
# stop-slurm.sh - stop what start-slurm.sh started, by PID (pid files) only.
#   --purge   also delete $SLURM_BASE (state, spool, logs) and, if present,
#             the slurm_acct_db database, so the next start is from scratch
set -uo pipefail

SLURM_BASE=${SLURM_BASE:-/tmp/slurm}
SLURM_CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}
export SLURM_CONF
MUNGE_PID=/run/munge/munged.pid
MARIADB_PID=/run/mysqld/mariadb.pid
PURGE=0; [ "${1:-}" = "--purge" ] && PURGE=1

alive_as() { # name pidfile -> true if the pid in pidfile is alive AND is that program
  [ -s "$2" ] && kill -0 "$(cat "$2")" 2>/dev/null && [ "$(cat /proc/"$(cat "$2")"/comm 2>/dev/null)" = "$1" ]
}

# 1. cancel jobs so no slurmstepd / job processes outlive the daemons
if alive_as slurmctld "$SLURM_BASE/run/slurmctld.pid"; then
  jobs=$(squeue -h -o '%A' 2>/dev/null || true)
  if [ -n "$jobs" ]; then
    echo "stop-slurm: cancelling jobs: $(echo $jobs)"
    scancel $jobs 2>/dev/null || true
    for _ in $(seq 30); do [ -z "$(squeue -h -o '%A' 2>/dev/null)" ] && break; sleep 1; done
  fi
fi

# 2. TERM, wait up to 15 s, then KILL.  /proc/PID/comm is checked so a stale
#    pid file can never make us signal an unrelated process.
stop_pid() { # name pidfile
  local name=$1 pf=$2 pid
  [ -s "$pf" ] || { echo "stop-slurm: $name: no pid file ($pf)"; return 0; }
  pid=$(cat "$pf")
  if ! alive_as "$name" "$pf"; then
    echo "stop-slurm: $name: pid $pid not running (stale $pf)"; rm -f "$pf"; return 0
  fi
  kill -TERM "$pid"
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then echo "stop-slurm: $name: pid $pid ignored TERM, sending KILL"; kill -KILL "$pid"; fi
  rm -f "$pf"
  echo "stop-slurm: $name (pid $pid) stopped"
}
stop_pid slurmd    "$SLURM_BASE/run/slurmd.pid"
stop_pid slurmctld "$SLURM_BASE/run/slurmctld.pid"
if [ -e "$SLURM_BASE/run/slurmdbd.pid" ] || [ -e "$MARIADB_PID" ]; then
  stop_pid slurmdbd "$SLURM_BASE/run/slurmdbd.pid"
  if [ $PURGE = 1 ] && alive_as mariadbd "$MARIADB_PID"; then
    mariadb -e 'DROP DATABASE IF EXISTS slurm_acct_db' && echo "stop-slurm: dropped slurm_acct_db"
  fi
  stop_pid mariadbd "$MARIADB_PID"
fi
stop_pid munged    "$MUNGE_PID"

if [ $PURGE = 1 ]; then
  rm -rf "$SLURM_BASE"
  echo "stop-slurm: removed $SLURM_BASE"
fi
