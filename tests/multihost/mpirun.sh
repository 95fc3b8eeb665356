#!/usr/bin/env bash
# mpirun across the two-host test bed:
#   mpirun.sh <ranks on prism-h1> <ranks on prism-h2> [mpirun options...] -- <program> [args...]
# Rank 0 and the first ranks are on prism-h1, where mpirun itself runs; the rest start on
# prism-h2 through agent.sh. MPI's own TCP and Prism's network (PRISM_NETWORK) use pmh0,
# the link between the hosts. Exits 77 (ctest's skip) where the test bed cannot exist.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
[[ $# -ge 3 ]] || { sed -n '2,6p' "$0"; exit 2; }
n1=$1 n2=$2; shift 2
opts=()
while [[ $# -gt 0 && $1 != -- ]]; do opts+=("$1"); shift; done
[[ ${1:-} == -- ]] || { echo "mpirun.sh: no -- before the program"; exit 2; }
shift
"$here/hosts.sh" check
# A directory both hosts see, for tests whose tasks write files the driver reads (TempDir).
shared=$("$here/hosts.sh" shared)
forward=(-x PRISM_NETWORK=pmh0 -x PRISM_TEST_SHARED_DIR="$shared")
for var in PATH LD_LIBRARY_PATH PYTHONPATH; do [[ -n ${!var:-} ]] && forward+=(-x "$var"); done
hosts=prism-h1:$n1
[[ $n2 -gt 0 ]] && hosts+=,prism-h2:$n2
exec "$here/hosts.sh" exec h1 mpirun --allow-run-as-root --oversubscribe \
  --host "$hosts" -n $((n1 + n2)) \
  --mca plm_rsh_agent "$here/agent.sh" --mca plm_rsh_no_tree_spawn 1 \
  --mca oob_tcp_if_include pmh0 --mca btl_tcp_if_include pmh0 \
  "${forward[@]}" \
  "${opts[@]}" "$@"
