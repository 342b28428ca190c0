#!/usr/bin/env bash
# Integration (issue #70): a training whose checkpoint write hits a full filesystem ends with exit 73
# (EX_CANTCREAT) and a message naming the checkpoint's path and ENOSPC, keeps its last good checkpoint and no
# temporary, and once space is freed resumes from it and ends with the weights of an uninterrupted run,
# tensor for tensor. As root: the output folder is a tmpfs of 4 checkpoints that user A has filled with 2.5
# of them before the run starts, so that the first epoch's checkpoint.pth fits (checkpoint0000.pth is a
# second link to it) and the second epoch's, written as a temporary beside the first, cannot (a fixed
# amount, not a race with the training). Skipped (77) without root or a tmpfs. One rank on the CPU, ~25 s.
set -uo pipefail
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/python.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
source "$(dirname "$0")/../lib/users.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
test_users
W="$PCDINO_BUILD_DIR/test-work/full_filesystem"
FS="$W/fs"  # the small filesystem of the interrupted run
umount "$FS" 2>/dev/null
rm -rf "$W"
mkdir -p "$FS"
chmod 0755 "$W"

/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$W/data" u8x1 3 20 >/dev/null ||
  fatal "cannot write the synthetic dataset (python3-tifffile)"
EPOCHS=3 tiny_pipeline "$W/pipeline.yaml" ff "$W"
run "$PCDINO_BIN" meanstd -c "$W/pipeline.yaml"
assert_rc 0 "meanstd"
train() {  # train MODEL_DIR: three epochs, a checkpoint at each epoch's end (and checkpoint0000.pth)
  run "$PCDINO_BIN" train -c "$W/pipeline.yaml" --threads 1 --device cpu --model-dir "$1"
}
# check_checkpoint PATH EPOCH [REFERENCE]: PATH loads in PyTorch and is EPOCH's; with REFERENCE, its student,
# teacher and centre equal REFERENCE's tensor for tensor.
check_checkpoint() {
  run torch_py - "$@" <<'PY'
import sys, torch
a = torch.load(sys.argv[1], map_location="cpu")
same = a["epoch"] == int(sys.argv[2])
print(f"epoch {a['epoch']}", end="")
if len(sys.argv) > 3:
    b = torch.load(sys.argv[3], map_location="cpu")
    same = same and a["epoch"] == b["epoch"] and torch.equal(a["dino_loss"]["center"], b["dino_loss"]["center"])
    for key in ("student", "teacher"):
        equal = a[key].keys() == b[key].keys() and all(torch.equal(a[key][k], b[key][k]) for k in a[key])
        print(f", {key} {'identical' if equal else 'different'} ({len(a[key])} tensors)", end="")
        same = same and equal
print()
sys.exit(0 if same else 1)
PY
}

# 1. The reference: uninterrupted, on the ordinary disk.
train "$W/reference"
assert_rc 0 "the reference run trains 3 epochs"
checkpoint_bytes=$(stat -c %s "$W/reference/checkpoint.pth") || fatal "the reference run wrote no checkpoint.pth"
mib=$((1024 * 1024))
fs_mib=$(((4 * checkpoint_bytes + mib - 1) / mib))
filler_mib=$((5 * checkpoint_bytes / 2 / mib))

# 2. The same run with its output on a tmpfs that user A has filled but for 1.5 checkpoints.
mount -t tmpfs -o "size=${fs_mib}m,mode=1777" tmpfs "$FS" || { echo "skipped: cannot mount a tmpfs"; exit 77; }
trap 'umount "$FS" 2>/dev/null' EXIT
as "$USER_A" dd if=/dev/zero of="$FS/filler" bs=1M count="$filler_mib"
assert_rc 0 "user A fills ${filler_mib} of the ${fs_mib} MiB (a checkpoint: $((checkpoint_bytes / mib)) MiB)"
MODEL="$FS/ff"
train "$MODEL"
assert_rc 73 "the training whose second checkpoint meets a full filesystem ends with EX_CANTCREAT"
assert_contains "$ERR" "epoch 1/3: loss" "it trained the first epoch"
assert_not_contains "$ERR" "epoch 2/3: loss" "and ended at the second one's checkpoint"
assert_contains "$ERR" "cannot write '$MODEL/checkpoint.pth'" "the error names the checkpoint's path"
assert_contains "$ERR" "No space left on device" "and ENOSPC"
check_checkpoint "$MODEL/checkpoint.pth" 1
assert_rc 0 "checkpoint.pth is the last good one: it loads and is the first epoch's ($OUT)"
assert_eq "$(find "$MODEL" -name '*.tmp.*' | wc -l)" 0 "no temporary file left behind"
assert_eq "$(wc -l <"$MODEL/log.txt")" 1 "log.txt records the one finished epoch"

# 3. A frees the space; the same command resumes and ends where the reference ended.
as "$USER_A" rm "$FS/filler"
assert_rc 0 "user A frees the space"
train "$MODEL"
assert_rc 0 "the same command, run again, finishes"
assert_contains "$ERR" "resuming from $MODEL/checkpoint" "it resumes from the kept checkpoint"
assert_contains "$ERR" "at epoch 1 iteration 0" "after the first epoch"
check_checkpoint "$MODEL/checkpoint.pth" 3 "$W/reference/checkpoint.pth"
assert_rc 0 "the resumed run's weights equal the uninterrupted run's tensor for tensor ($OUT)"
assert_eq "$(cat "$MODEL/log.txt")" "$(cat "$W/reference/log.txt")" "its log.txt is the reference's, each epoch once"
finish
