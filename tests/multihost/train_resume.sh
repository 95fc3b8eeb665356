#!/usr/bin/env bash
# train_resume.sh <train_fashion_mnist>
# Training with workers on both hosts of the test bed (3 workers of 1 CPU on 4 ranks of
# 1 CPU: at least one on prism-h2), its checkpoints on a directory both
# hosts share (as a cluster's parallel file system), then a second launch that resumes
# from the last checkpoint and trains one more epoch. Exits 77 where the bed cannot exist.
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
app=$1
shared=$("$here/hosts.sh" shared)
store=$(mktemp -d "$shared/train-resume-XXXXXX")
trap 'rm -rf "$store"' EXIT
out=$store/out
fail() { echo "FAIL: $*"; exit 1; }
train() {
  timeout 200 "$here/mpirun.sh" 2 2 -- "$app" --prism-num-cpus=1 --workers=3 --train-samples=600 \
    --test-samples=200 --progress=lines --storage-path="$store" --name=run "$@" \
    >"$out" 2>&1 </dev/null
  rc=$?
  cat "$out"
  [[ $rc == 77 ]] && exit 77
  [[ $rc == 124 ]] && fail "the run hung"
  [[ $rc == 0 ]] || fail "the run exited with status $rc"
}
expect() { grep -qF -- "$1" "$out" || fail "the output does not say: $1"; }

echo "== 1. one epoch across prism-h1 and prism-h2"
train --epochs=1
[[ -f $store/run/checkpoint_000001/model.h5 ]] || fail "no checkpoint in $store/run"
echo "== 2. a new launch resumes and trains the second epoch"
train --epochs=2
expect "resuming after epoch 1 from $store/run/checkpoint_000001/model.h5"
expect "epoch 2/2"
expect "OK: the restored model matches the reported accuracy"
echo "PASS: trained across two hosts and resumed from the shared checkpoint"
