#!/usr/bin/env bash
# corrupt_checkpoint.sh <mpirun...> -- <train_fashion_mnist>
# A real training run resumed after 64 KiB in the middle of its newest checkpoint's
# model.h5 were overwritten, size unchanged (as a bad disk or a stray dd would leave it):
# the run must name that checkpoint, resume from the newest intact one and finish. Then,
# with every checkpoint damaged, it must fail, naming each one, and train nothing.
set -uo pipefail
mpirun=()
while [[ $# -gt 0 && $1 != -- ]]; do mpirun+=("$1"); shift; done
shift
app=$1
store=$(mktemp -d "${TMPDIR:-/tmp}/prism-corrupt-checkpoint-XXXXXX")
trap 'rm -rf "$store"' EXIT
run_dir=$store/run
out=$store/out

train() {
  timeout 150 "${mpirun[@]}" -n 3 "$app" --workers=2 --train-samples=600 --test-samples=200 \
    --progress=lines --storage-path="$store" --name=run "$@" >"$out" 2>&1
  rc=$?
  cat "$out"
  [[ $rc == 124 ]] && fail "the run hung"
  return 0
}
fail() {
  echo "FAIL: $*"
  exit 1
}
expect() { grep -qF -- "$1" "$out" || fail "the output does not say: $1"; }
# Overwrites 64 KiB (less for a small file) in the middle of $1 without truncating it.
damage() {
  local size kib
  size=$(stat -c %s "$1")
  kib=$(( size >= 131072 ? 64 : size / 2048 ))
  dd if=/dev/urandom of="$1" bs=1024 seek=$(( size / 2048 - kib / 2 )) count="$kib" \
    conv=notrunc status=none || fail "dd on $1"
  [[ $(stat -c %s "$1") == "$size" ]] || fail "dd changed the size of $1"
}

echo "== 1. two epochs, a checkpoint after each"
train --epochs=2
[[ $rc == 0 ]] || fail "the first run exited with status $rc"
newest=$run_dir/checkpoint_000002
[[ -f $newest/model.h5 ]] || fail "no $newest/model.h5"
damage "$newest/model.h5"

echo "== 2. resumed for a third epoch, with $newest/model.h5 damaged"
train --epochs=3
[[ $rc == 0 ]] || fail "the resumed run exited with status $rc"
expect "checkpoint $newest is corrupt, not resuming from it: model.h5 has CRC-32"
expect "resuming run from $run_dir/checkpoint_000001 instead, the newest intact checkpoint"
expect "resuming after epoch 1 from $run_dir/checkpoint_000001/model.h5"
expect "epoch 2/3"
expect "OK: the restored model matches the reported accuracy"
grep -q "resuming after epoch 2" "$out" && fail "it trained on the damaged checkpoint"

echo "== 3. every checkpoint damaged"
checkpoints=("$run_dir"/checkpoint_*)
[[ ${#checkpoints[@]} -ge 2 ]] || fail "expected several checkpoints, found ${checkpoints[*]}"
for c in "${checkpoints[@]}"; do
  [[ $c == "$newest" ]] || damage "$c/model.h5"
done
train --epochs=5
[[ $rc != 0 ]] || fail "the run trained although no checkpoint is intact"
expect "run run has no intact checkpoint to resume from"
for c in "${checkpoints[@]}"; do expect "$c: model.h5 has CRC-32"; done
grep -q "epoch [0-9]/5" "$out" && fail "it trained with no intact checkpoint"
echo "PASS: corrupt checkpoint"
