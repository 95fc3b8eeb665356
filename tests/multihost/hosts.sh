#!/usr/bin/env bash
# The two-host test bed: two "hosts" on this machine, each a set of Linux namespaces
# (network, hostname, mounts) with its own /tmp and /dev/shm, joined by a veth pair.
#
#   hosts.sh up [path...]   make prism-h1 (10.213.0.1) and prism-h2 (10.213.0.2); each
#                           path under /tmp (the build directory) stays visible in both
#   hosts.sh down           kill every process inside them and remove them
#   hosts.sh check          exit 0 if both are up, 77 (ctest's skip) if this machine cannot
#                           make them, 1 if they are down
#   hosts.sh exec <h1|h2> <command...>   run a command inside a host
#   hosts.sh pids <h1|h2>   the processes running inside a host
#   hosts.sh shared         the directory both hosts see, for files every rank must read
#                           ($PRISM_MULTIHOST_SHARED, default /var/tmp/prism-multihost)
#
# Everything outside /tmp and /dev/shm (the source tree, /var/tmp, home) is the same file
# system on both hosts, like a cluster's shared file system. The addresses exist only inside
# the two network namespaces: nothing here sends to any other address. The state (holder
# pids, the hosts file the two hosts use as /etc/hosts) is in $PRISM_MULTIHOST_STATE
# (default /run/prism-multihost).
set -euo pipefail
state=${PRISM_MULTIHOST_STATE:-/run/prism-multihost}
subnet=10.213.0
skip=77

holder() { cat "$state/$1.pid" 2>/dev/null; }

# Ends with ctest's skip status, and leaves the reason for check (the tests that need the
# hosts then skip with it too).
skip_because() {
  echo "skip: $*"
  mkdir -p "$state" && echo "$*" >"$state/skipped"
  exit $skip
}

alive() {
  local pid
  pid=$(holder "$1") || return 1
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

# Runs inside the new namespaces: the host's name, its private /tmp and /dev/shm, the
# shared paths under /tmp bound back in, its own /sys and loopback up. Then holds the namespaces.
inside() {
  local name=$1; shift
  hostname "prism-$name"
  local old=$state/$name.oldtmp
  mkdir -p "$old"
  mount --bind /tmp "$old"
  mount -t tmpfs -o mode=1777 tmpfs /tmp
  mount -t tmpfs -o mode=1777 tmpfs /dev/shm
  local path
  for path in "$@"; do
    [[ $path == /tmp/* ]] || continue
    mkdir -p "$path"
    mount --bind "$old/${path#/tmp/}" "$path"
  done
  umount -l "$old"
  mount --bind "$state/hosts" /etc/hosts
  # A boot id of its own, as another machine has: UCX and Prism take processes with the
  # same boot id for one machine, whose shared memory they could map.
  cat /proc/sys/kernel/random/uuid >"$state/$name.boot_id"
  mount --bind "$state/$name.boot_id" /proc/sys/kernel/random/boot_id
  # sysfs shows the network namespace of whoever mounted it: UCX finds interfaces there.
  mount -t sysfs sysfs /sys
  ip link set lo up
  : >"$state/$name.ready"
  exec sleep infinity
}

up() {
  if alive h1 && alive h2; then echo "hosts.sh: prism-h1 and prism-h2 are already up"; return 0; fi
  down >/dev/null 2>&1 || true
  rm -f "$state/skipped"
  if ! unshare --net --uts --mount true 2>/dev/null || ! command -v ip >/dev/null; then
    skip_because "this machine cannot make network, UTS and mount namespaces (needs root," \
                 "unshare and iproute2): the multihost tests do not run here"
  fi
  mkdir -p "$state"
  printf '127.0.0.1 localhost\n%s.1 prism-h1\n%s.2 prism-h2\n' "$subnet" "$subnet" >"$state/hosts"
  local h keep=()
  for path in "$@"; do keep+=("$(realpath -m "$path")"); done
  for h in 1 2; do
    rm -f "$state/h$h.ready"
    setsid unshare --net --uts --mount --propagation private \
      "$0" inside "h$h" "${keep[@]}" </dev/null >"$state/h$h.log" 2>&1 &
    echo $! >"$state/h$h.pid"
  done
  for _ in $(seq 100); do
    [[ -e $state/h1.ready && -e $state/h2.ready ]] && break
    sleep 0.05
  done
  [[ -e $state/h1.ready && -e $state/h2.ready ]] || {
    cat "$state"/h*.log; down
    skip_because "this machine would not set up the hosts' mounts (tmpfs, bind mounts, sysfs)"; }
  local tmp=pmh$$
  ip link add "${tmp}a" type veth peer name "${tmp}b" || {
    down; skip_because "this machine cannot make a veth pair (no veth support in its kernel)"; }
  ip link set "${tmp}a" netns "$(holder h1)"
  ip link set "${tmp}b" netns "$(holder h2)"
  for h in 1 2; do
    local end=${tmp}a; [[ $h == 2 ]] && end=${tmp}b
    nsenter -t "$(holder h$h)" -n sh -c \
      "ip link set $end name pmh0 && ip addr add $subnet.$h/24 dev pmh0 && ip link set pmh0 up"
  done
  for _ in $(seq 100); do
    nsenter -t "$(holder h1)" -n ip link show pmh0 | grep -q LOWER_UP && break
    sleep 0.05
  done
  nsenter -t "$(holder h1)" -n ip link show pmh0 | grep -q LOWER_UP ||
    { echo "hosts.sh: the link between prism-h1 and prism-h2 did not come up"; down; exit 1; }
  echo "hosts.sh: prism-h1 ($subnet.1) and prism-h2 ($subnet.2) are up, joined by pmh0"
}

# Every process in a host's network namespace (the holder, and whatever a test left).
members() {
  local ns pid
  ns=$(readlink "/proc/$(holder "$1")/ns/net" 2>/dev/null) || return 0
  for pid in /proc/[0-9]*; do
    if [[ $(readlink "$pid/ns/net" 2>/dev/null) == "$ns" ]]; then echo "${pid#/proc/}"; fi
  done
}

down() {
  local h pids
  for h in h1 h2; do
    alive "$h" || continue
    pids=$(members "$h" | tr '\n' ' ')
    # shellcheck disable=SC2086
    [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
  done
  rm -f "$state"/h?.pid "$state"/h?.ready
  echo "hosts.sh: the hosts are down"
}

check() {
  if alive h1 && alive h2; then return 0; fi
  if [[ -s $state/skipped ]]; then echo "skip: $(cat "$state/skipped")"; exit $skip; fi
  unshare --net --uts --mount true 2>/dev/null || exit $skip
  echo "hosts.sh: the hosts are not up (run hosts.sh up)"; exit 1
}

run_in() {
  local h=$1; shift
  alive "$h" || { echo "hosts.sh: $h is not up (run hosts.sh up)"; exit 1; }
  exec nsenter -t "$(holder "$h")" -n -u -m -- "$@"
}

cmd=${1:-}; shift || true
case $cmd in
  up) up "$@" ;;
  down) down ;;
  check) check ;;
  exec) run_in "$@" ;;
  pids) members "$1" ;;
  shared) shared=${PRISM_MULTIHOST_SHARED:-/var/tmp/prism-multihost}; mkdir -p "$shared"; echo "$shared" ;;
  inside) inside "$@" ;;
  *) sed -n '2,20p' "$0"; exit 2 ;;
esac
