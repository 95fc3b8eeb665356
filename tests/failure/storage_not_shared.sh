#!/usr/bin/env bash
# storage_not_shared.sh <mpirun...> -- <train_fashion_mnist>
# A storage path that one worker's rank does not see (as on a node-local disk): rank 2
# runs in its own mount namespace with an empty tmpfs over the storage directory. The
# trainer's probe must say which rank cannot see the driver's files and what to do,
# before any training starts. Skips (77) where mount namespaces are not allowed.
set -uo pipefail
mpirun=()
while [[ $# -gt 0 && $1 != -- ]]; do mpirun+=("$1"); shift; done
shift
app=$1
store=$(mktemp -d "${TMPDIR:-/tmp}/prism-not-shared-XXXXXX")
trap 'rm -rf "$store"' EXIT
if ! unshare -m sh -c "mount -t tmpfs tmpfs '$store'" 2>/dev/null; then
  echo "skip: cannot create a mount namespace here (needs root and unshare)"
  exit 77
fi
args=(--workers=3 --epochs=1 --train-samples=600 --storage-path="$store" --name=probe)
# shellcheck disable=SC2016
timeout 120 "${mpirun[@]}" -n 2 "$app" "${args[@]}" : -n 1 \
  unshare -m sh -c 'mount -t tmpfs tmpfs "$0" && exec "$@"' "$store" "$app" "${args[@]}" \
  >"$store.out" 2>&1
rc=$?
cat "$store.out"
rm -f "$store.out"
[[ $rc == 124 ]] && { echo "FAIL: hung"; exit 1; }
[[ $rc == 0 ]] && { echo "FAIL: trained on a storage path rank 2 cannot see"; exit 1; }
echo "exit status $rc"
