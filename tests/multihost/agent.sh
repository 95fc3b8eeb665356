#!/usr/bin/env bash
# Open MPI's remote-start agent for the two-host test bed (--mca plm_rsh_agent): what ssh
# does on a cluster, here entering the host's namespaces. Called as
#   agent.sh [ssh options...] <host> <command...>
# Like ssh, the command gets a fresh environment, not the caller's: a setting reaches the
# other host only if mpirun forwards it (-x VAR), as on a real cluster.
set -euo pipefail
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
host=$1; shift
here=$(dirname "$(readlink -f "$0")")
case $host in
  prism-h1|10.213.0.1) h=h1 ;;
  prism-h2|10.213.0.2) h=h2 ;;
  *) echo "agent.sh: $host is not a host of the test bed (prism-h1, prism-h2)" >&2; exit 255 ;;
esac
exec "$here/hosts.sh" exec "$h" env -i PATH="$PATH" HOME="${HOME:-/root}" LANG=C.UTF-8 \
  /bin/sh -c "$*"
