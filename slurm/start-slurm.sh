#!/usr/bin/env bash
# Project copy of the verified recipe in shared/reference/slurm (used by tests/slurm and CI).
# start-slurm.sh - bring up a single-node Slurm 22.05 cluster on localhost
# (Debian bookworm packages, no systemd, run as root, non-interactive).
#
# Prerequisite (once per machine):
#   DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y \
#       --no-install-recommends slurm-wlm munge libpmix-dev
#   # only for SLURM_ACCOUNTING=dbd (full sacct):  ... install -y --no-install-recommends slurmdbd mariadb-server
#
# Environment knobs:
#   SLURM_BASE          state/log/spool/pid directory          (default /tmp/slurm)
#   SLURM_CONF          slurm.conf written and used             (default /etc/slurm/slurm.conf)
#   SLURM_NODE_CPUS     CPUs advertised for the node            (default 4; > nproc = oversubscribe)
#   SLURM_MPI           MpiDefault: pmix | pmi2 | none          (default pmix)
#   SLURM_ACCOUNTING    none (jobcomp/filetxt only) | dbd       (default none)
#   SLURM_CRED_EXPIRE   AuthInfo cred_expire = requeue delay    (default 10 s; Slurm default 120)
#   SLURM_READY_TIMEOUT seconds to wait for the node to be idle (default 60)
set -euo pipefail

SLURM_BASE=${SLURM_BASE:-/tmp/slurm}
SLURM_CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}
NCPUS=${SLURM_NODE_CPUS:-4}
MPI=${SLURM_MPI:-pmix}
ACCT=${SLURM_ACCOUNTING:-none}
CRED_EXPIRE=${SLURM_CRED_EXPIRE:-10}
TIMEOUT=${SLURM_READY_TIMEOUT:-60}
HOST=$(hostname -s)
CONFDIR=$(dirname "$SLURM_CONF")
MUNGE_PID=/run/munge/munged.pid
MARIADB_PID=/run/mysqld/mariadb.pid
export SLURM_CONF

t0=$(date +%s)
die() {
  echo "start-slurm: ERROR: $*" >&2
  for f in "$SLURM_BASE"/log/*.log /var/log/munge/munged.log /run/mysqld/mariadb.log; do
    [ -f "$f" ] && { echo "---- tail $f" >&2; tail -n 30 "$f" >&2; }
  done
  exit 1
}
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
waitfor() { # seconds command...   (polls every 0.25 s)
  local n=$(( $1 * 4 )); shift
  for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  return 1
}

PIDFILES=("$MUNGE_PID" "$SLURM_BASE/run/slurmctld.pid" "$SLURM_BASE/run/slurmd.pid")
[ "$ACCT" = dbd ] && PIDFILES+=("$MARIADB_PID" "$SLURM_BASE/run/slurmdbd.pid")
for p in "${PIDFILES[@]}"; do
  alive "$p" && die "daemon from $p (pid $(cat "$p")) already running; run stop-slurm.sh first"
done
for b in munged slurmctld slurmd sinfo; do command -v "$b" >/dev/null || die "$b not installed"; done

# ------------------------------------------------------------------ munge
install -d -m 0700 -o munge -g munge /etc/munge /var/log/munge
install -d -m 0711 -o munge -g munge /var/lib/munge
install -d -m 0755 -o munge -g munge /run/munge
[ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
chown munge:munge /etc/munge/munge.key
chmod 0600 /etc/munge/munge.key
rm -f "$MUNGE_PID" /run/munge/munge.socket.2*
# munged forks itself and writes /run/munge/munged.pid; it must run as user munge.
runuser -u munge -- /usr/sbin/munged </dev/null >/dev/null 2>&1 || die "munged failed to start"
waitfor 10 sh -c 'munge -n </dev/null | unmunge' || die "munge round trip failed"

mkdir -p "$SLURM_BASE"/{run,log,state,spool} "$CONFDIR"
rm -f "$SLURM_BASE"/run/*.pid

# ------------------------------------------------------------------ optional slurmdbd + MariaDB
ACCT_CONF="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none"
if [ "$ACCT" = dbd ]; then
  command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null || die "SLURM_ACCOUNTING=dbd needs slurmdbd mariadb-server"
  install -d -m 0755 -o mysql -g root /run/mysqld
  rm -f "$MARIADB_PID"
  # mariadbd does not fork: background it ourselves; it writes its own pid file.
  setsid /usr/sbin/mariadbd --user=mysql --skip-networking --socket=/run/mysqld/mysqld.sock \
      --pid-file="$MARIADB_PID" --log-error=/run/mysqld/mariadb.log </dev/null >/dev/null 2>&1 &
  waitfor 60 mariadb -e 'select 1' || die "mariadbd did not come up"
  mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmci';
              GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  cat > "$CONFDIR/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
LogFile=${SLURM_BASE}/log/slurmdbd.log
PidFile=${SLURM_BASE}/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=slurmci
EOF
  chmod 0600 "$CONFDIR/slurmdbd.conf"       # slurmdbd refuses a world-readable file
  # slurmdbd has no -f: it reads slurmdbd.conf next to $SLURM_CONF
  slurmdbd </dev/null >>"$SLURM_BASE/log/slurmdbd.stdout" 2>&1 || die "slurmdbd failed"
  waitfor 30 bash -c "exec 3<>/dev/tcp/127.0.0.1/6819" || die "slurmdbd not listening on 6819"
  ACCT_CONF="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
JobAcctGatherType=jobacct_gather/linux"
fi

# ------------------------------------------------------------------ slurm.conf
cat > "$SLURM_CONF" <<EOF
# single-node CI cluster, generated by start-slurm.sh
ClusterName=ci
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire also sets how long a requeued job waits before it may restart (default 120 s)
AuthInfo=cred_expire=${CRED_EXPIRE}
MailProg=/bin/true
MpiDefault=${MPI}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SlurmctldPort=6817
SlurmdPort=6818
SlurmctldPidFile=${SLURM_BASE}/run/slurmctld.pid
SlurmdPidFile=${SLURM_BASE}/run/slurmd.pid
SlurmctldLogFile=${SLURM_BASE}/log/slurmctld.log
SlurmdLogFile=${SLURM_BASE}/log/slurmd.log
StateSaveLocation=${SLURM_BASE}/state
SlurmdSpoolDir=${SLURM_BASE}/spool
ReturnToService=2
SchedulerType=sched/backfill
# run the scheduler every 5 s (defaults 60 s / 30 s) so requeued jobs restart promptly
SchedulerParameters=bf_interval=5,sched_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# trust CPUs= below although the VM has fewer cores (else node is DRAINED "Low CPUs")
SlurmdParameters=config_overrides
${ACCT_CONF}
JobCompType=jobcomp/filetxt
JobCompLoc=${SLURM_BASE}/log/jobcomp.txt
# Slurm's default: a cancelled or timed-out job's steps get 30 s between SIGTERM and SIGKILL
# to stop at a checkpoint (an epoch took 10 s on a slow CI run; 5 s killed it mid-epoch)
KillWait=30
MinJobAge=600
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
MessageTimeout=20
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${NCPUS} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF

# ------------------------------------------------------------------ slurmctld + slurmd
# Without -D both daemons fork, detach and write their PidFile.
slurmctld -f "$SLURM_CONF" </dev/null >>"$SLURM_BASE/log/slurmctld.stdout" 2>&1 || die "slurmctld failed"
slurmd    -f "$SLURM_CONF" </dev/null >>"$SLURM_BASE/log/slurmd.stdout"    2>&1 || die "slurmd failed"

node_idle() { case "$(sinfo -h -n "$HOST" -o '%T' 2>/dev/null)" in idle*) return 0 ;; esac; return 1; }
waitfor "$TIMEOUT" node_idle || die "node $HOST not idle after ${TIMEOUT}s (state '$(sinfo -h -n "$HOST" -o '%T' 2>&1)')"
for p in "${PIDFILES[@]}"; do alive "$p" || die "no live pid in $p"; done

echo "start-slurm: cluster ready in $(( $(date +%s) - t0 ))s (SLURM_CONF=$SLURM_CONF, accounting=$ACCT)"
echo "munged    pid $(cat "$MUNGE_PID")"
if [ "$ACCT" = dbd ]; then
  echo "mariadbd  pid $(cat "$MARIADB_PID")"
  echo "slurmdbd  pid $(cat "$SLURM_BASE/run/slurmdbd.pid")"
fi
echo "slurmctld pid $(cat "$SLURM_BASE/run/slurmctld.pid")"
echo "slurmd    pid $(cat "$SLURM_BASE/run/slurmd.pid")"
sinfo
