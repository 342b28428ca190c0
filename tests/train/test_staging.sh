#!/usr/bin/env bash
# Integration (issue #72): train_scDINO.stage_dataset on the local cluster. A two-node job (a rank per node)
# trains 3 epochs on a packed dataset of the workshop's cells; strace counts every byte each rank reads from
# the shared dataset folder. Staged, the shared folder is read once per node per job (each node's copier
# reads each file once; the ranks read pack.json); unstaged, each epoch reads the training split again. The
# staged run's weights equal the unstaged run's bit for bit, the copies are gone at the end, a job stopped
# for a requeue keeps them and its next start reuses them, and CLS features from a staged copy equal those
# read in place.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
source "$(dirname "$0")/../lib/python.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
W="$PCDINO_BUILD_DIR/test-work/staging"
rm -rf "$W" && mkdir -p "$W/jobs" "$W/trace" "$W/scratch"
EPOCHS=3

strace -f -o /dev/null true 2>/dev/null || { echo "skipped: strace cannot trace here (ptrace refused)"; exit 77; }
# 3 classes x 40 cells of 5 x 96 x 96 uint16 (92 KB each, 11 MB): a rank's share far more than HDF5's 1 MiB chunk cache, so
# that an epoch read in place reads its images from the files again.
/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_workshop_cells.py" "$W/cells" 3 40 96 >/dev/null ||
  fatal "cannot write the cells (python3-tifffile)"
run "$PCDINO_BIN" dataset pack --dataset-dir "$W/cells" -o "$W/data" --images-per-shard 60 --threads 1
assert_rc 0 "pack the cells into 2 shards: $ERR"
EPOCHS=$EPOCHS tiny_pipeline "$W/pipeline.yaml" staging "$W"
run "$PCDINO_BIN" meanstd -c "$W/pipeline.yaml"
assert_rc 0 "meanstd"
data_bytes=$(du -b --apparent-size -c "$W"/data/* | tail -1 | cut -f1)
pixel_bytes=$((120 * 5 * 96 * 96 * 2))

cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-18617}"

# job NAME STAGED PCDINO-ARGS...: a two-node job whose ranks run under strace (reads only, filtered in the
# kernel; a file per thread, so that no call is split across lines), each writing $W/trace/NAME.RANK.TID;
# prints the job id.
job() {
  local name=$1 staged=$2
  shift 2
  local set=""
  [ "$staged" = staged ] && set="--set train_scDINO.stage_dataset=$W/scratch"
  sbatch --parsable -N2 -n2 -o "$W/jobs/$name.out" --wrap "srun --mpi=pmix bash -c 'exec strace -ff -qq \
--seccomp-bpf -y -e trace=read,pread64 -o $W/trace/$name.\$SLURM_PROCID $PCDINO_BIN $* -c $W/pipeline.yaml \
$set --threads 1 --device cpu'"
}
# read_bytes NAME FOLDER: the bytes the ranks of job NAME read from files under FOLDER.
read_bytes() {
  cat "$W/trace/$1".* | awk -v dir="$2/" '
    match($0, /(read|pread64)\([0-9]+<[^>]*>/) {
      call = substr($0, RSTART, RLENGTH); sub(/^[^<]*</, "", call); sub(/>$/, "", call)
      if (index(call, dir) == 1 && match($0, /= [0-9]+$/)) total += substr($0, RSTART + 2)
    }
    END { print total + 0 }'
}
copies() { find "$W/scratch" -mindepth 2 -maxdepth 2 -type d -name 'node*' -printf '%f\n' | sed 's/-.*//' | sort | xargs; }

id=$(job staged staged train --model-dir "$W/staged")
wait_job "$id" 600
out=$(cat "$W/jobs/staged.out")
assert_contains "$out" "[rank 0/2] [info] trained $EPOCHS epochs" "the staged job trains: $(tail -5 <<<"$out")"
assert_contains "$out" "dataset: staged $W/data on node1" "node1 copies the dataset"
assert_contains "$out" "dataset: staged $W/data on node2" "node2 copies it too, on its own"
assert_contains "$out" "SHA-256 verified" "each copy is verified"
staged_shared=$(read_bytes staged "$W/data")
staged_local=$(read_bytes staged "$W/scratch")
assert_eq "$(copies)" "" "the copies are removed when the job succeeds"

id=$(job inplace unstaged train --model-dir "$W/inplace")
wait_job "$id" 600
assert_contains "$(cat "$W/jobs/inplace.out")" "[rank 0/2] [info] trained $EPOCHS epochs" "the unstaged job trains"
inplace_shared=$(read_bytes inplace "$W/data")
echo "dataset files $data_bytes bytes (pixels $pixel_bytes); read from the shared folder over $EPOCHS epochs:" \
  "staged $staged_shared (and $staged_local from the copies), in place $inplace_shared"
# Staged: each of the 2 nodes reads each file once to copy it, and each rank pack.json to name the copy.
manifest=$(stat -c %s "$W/data/pack.json")
assert_eq "$([ "$staged_shared" -ge $((2 * data_bytes)) ] && [ "$staged_shared" -le $((2 * data_bytes + 4 * manifest)) ] && echo once)" \
  once "staged: the shared folder is read once per node ($staged_shared bytes, 2 x $data_bytes + pack.json)"
assert_eq "$([ "$staged_local" -ge $((EPOCHS * pixel_bytes * 7 / 10)) ] && echo yes)" yes \
  "staged: the epochs read the local copies ($staged_local bytes)"
# In place: each epoch reads the training split (80%) of the pixels again, less what HDF5's cache kept.
assert_eq "$([ "$inplace_shared" -ge $((EPOCHS * pixel_bytes * 6 / 10)) ] && echo yes)" yes \
  "in place: the shared folder is read every epoch ($inplace_shared bytes >= $EPOCHS x 60% of $pixel_bytes)"

run torch_py - "$W" <<'PY'
import sys, torch
w = sys.argv[1]
a, b = (torch.load(f"{w}/{d}/checkpoint.pth", map_location="cpu") for d in ("staged", "inplace"))
ok = a["epoch"] == b["epoch"] == 3
for key in ("student", "teacher"):
    same = all(torch.equal(a[key][k], b[key][k]) for k in a[key])
    print(f"{key}: bit-identical {same}")
    ok = ok and same
sys.exit(0 if ok and torch.equal(a["dino_loss"]["center"], b["dino_loss"]["center"]) else 1)
PY
assert_rc 0 "the staged run's weights equal the unstaged run's ($OUT)"

# A job stopped for a requeue keeps its copies; its next start reuses them and reads only pack.json there.
id=$(job stopped staged train --model-dir "$W/requeued" --stop-after-iterations 2)
wait_job "$id" 600
assert_contains "$(cat "$W/jobs/stopped.out")" "stopped at epoch 0 iteration 2" "the first start stops"
assert_eq "$(copies)" "node1 node2" "a job that stops for a requeue keeps each node's copy"
id=$(job resumed staged train --model-dir "$W/requeued")
wait_job "$id" 600
out=$(cat "$W/jobs/resumed.out")
assert_contains "$out" "dataset: the copy of $W/data on node1 is already here" "node1 reuses its copy"
assert_contains "$out" "dataset: the copy of $W/data on node2 is already here" "node2 reuses its copy"
assert_contains "$out" "[rank 0/2] [info] trained $EPOCHS epochs" "the next start finishes"
resumed_shared=$(read_bytes resumed "$W/data")
assert_eq "$([ "$resumed_shared" -le $((4 * manifest)) ] && echo yes)" yes \
  "the next start reads only pack.json from the shared folder ($resumed_shared bytes)"
assert_eq "$(copies)" "" "and removes the copies when it succeeds"

# CLS features of the held-out split: staged and kept (keep_staged_dataset), then in place; the same file.
id=$(job extract_staged staged extract --checkpoint "$W/staged/checkpoint.pth" --output "$W/staged.h5" --no-csv \
  --set train_scDINO.keep_staged_dataset=true)
wait_job "$id" 600
assert_eq "$(copies)" "node1 node2" "keep_staged_dataset keeps the copies"
id=$(job extract_inplace unstaged extract --checkpoint "$W/staged/checkpoint.pth" --output "$W/inplace.h5" --no-csv)
wait_job "$id" 600
run h5diff "$W/staged.h5" "$W/inplace.h5" /features
assert_rc 0 "the features from the staged copies equal those read in place: $OUT$(tail -3 "$W/jobs/extract_staged.out")"
cluster_down
finish
