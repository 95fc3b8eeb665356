#!/usr/bin/env bash
# storage_not_shared.sh train|tune|data <mpirun...> -- <app>
# A storage path that one rank does not see (as on a node-local disk on another host):
# rank 2 runs in its own mount namespace with an empty tmpfs over the directory. The
# library must stop with an error naming rank 2 and saying to use shared storage, before
# anything runs:
#   train  <app> is train_fashion_mnist: the trainer's probe says which rank cannot see the
#          driver's files, before any training starts (the test's pattern checks the text)
#   tune   <app> is prism_storage_helper: Tune's storage_path, before any trial runs or the
#          experiment's journal is written (issue 46)
#   data   <app> is prism_storage_helper: Data's output directory, before any part is
#          written (issue 46)
# Skips (77) where mount namespaces are not allowed.
set -uo pipefail
mode=$1
shift
mpirun=()
while [[ $# -gt 0 && $1 != -- ]]; do mpirun+=("$1"); shift; done
shift
app=$1
store=$(mktemp -d "${TMPDIR:-/tmp}/prism-not-shared-XXXXXX")
trap 'rm -rf "$store" "$store.out"' EXIT
if ! unshare -m sh -c "mount -t tmpfs tmpfs '$store'" 2>/dev/null; then
  echo "skip: cannot create a mount namespace here (needs root and unshare)"
  exit 77
fi
case $mode in
  train) args=(--workers=3 --epochs=1 --train-samples=600 --storage-path="$store" --name=probe) ;;
  *) args=("$mode" "$store") ;;
esac
# shellcheck disable=SC2016
timeout 120 "${mpirun[@]}" -n 2 "$app" "${args[@]}" : -n 1 \
  unshare -m sh -c 'mount -t tmpfs tmpfs "$0" && exec "$@"' "$store" "$app" "${args[@]}" \
  >"$store.out" 2>&1
rc=$?
cat "$store.out"
fail() { echo "FAIL: $*"; exit 1; }
[[ $rc == 124 ]] && fail "hung"
[[ $rc == 0 ]] && fail "$mode ran on a directory rank 2 cannot see"
case $mode in
  tune)
    grep -Eq 'prism::tune: storage_path is not shared: rank 2 \(host [^)]*\) cannot see the probe file rank 0 \(host [^)]*\) wrote in .*Put storage_path on a file system every node mounts.*RunConfig::storage_path or PRISM_STORAGE_PATH' "$store.out" ||
      fail "no clear error naming rank 2"
    grep -q 'trial ran' "$store.out" && fail "a trial ran before the error"
    [[ -e $store/probe/experiment_state.jsonl ]] && fail "the experiment's journal was written"
    ;;
  data)
    grep -Eq 'prism::data: Write[A-Za-z]*.*: the output directory is not shared: rank 2 \(host [^)]*\) cannot see the probe file rank 0 \(host [^)]*\) wrote in .*/out\. Put the output directory on a file system every node mounts' "$store.out" ||
      fail "no clear error naming rank 2"
    ls "$store/out" | grep -q part- && fail "parts were written before the error"
    ;;
esac
if ls -A "$store" "$store/out" 2>/dev/null | grep -q '^\.prism-probe-'; then fail "probe files left behind"; fi
echo "PASS: storage not shared ($mode), exit status $rc"
