#!/usr/bin/env bash
# Integration (issue #5): DINO training as a two-node Slurm job on the local cluster: `sbatch -N2 -n2` with
# `srun --mpi=pmix pcdino-train`, two epochs; both nodes take part, rank 0 alone writes the checkpoint and
# log, and a second submission resumes from it (nothing left to train) instead of starting over.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
W="$PCDINO_BUILD_DIR/test-work/two_nodes"
rm -rf "$W" && mkdir -p "$W/jobs"

/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$W/data" u8x1 3 20 >/dev/null ||
  fatal "cannot write the synthetic dataset (python3-tifffile)"
EPOCHS=2 tiny_pipeline "$W/pipeline.yaml" nodes "$W"
run "$PCDINO_BIN" meanstd -c "$W/pipeline.yaml"
assert_rc 0 "meanstd"

cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-18217}"
submit() {
  sbatch --parsable -N2 -n2 -o "$W/jobs/train_%j.out" \
    --wrap "srun --mpi=pmix '$PCDINO_BIN' train -c '$W/pipeline.yaml' --threads 1 --device cpu"
}
job=$(submit)
wait_job "$job" 300
out=$(cat "$W/jobs/train_$job.out")
assert_contains "$out" "rank 0 of 2 on node1" "rank 0 runs on node1"
assert_contains "$out" "rank 1 of 2 on node2" "rank 1 runs on node2"
assert_contains "$out" "2 ranks (mpi)" "the ranks train together"
assert_contains "$out" "[rank 0/2] [info] trained 2 epochs" "rank 0 finishes"
assert_contains "$out" "[rank 1/2] [info] trained 2 epochs" "rank 1 finishes"
model="$W/out/nodes/scDINO_ViTs/dino_vit"
[ -f "$model/checkpoint.pth" ] || fail "no checkpoint.pth"
assert_eq "$(wc -l <"$model/log.txt")" 2 "log.txt: two epochs, written by rank 0 alone"
assert_eq "$(find "$model" -name '*tmp*' | wc -l)" 0 "no temporary files left"

job=$(submit)
wait_job "$job" 300
assert_contains "$(cat "$W/jobs/train_$job.out")" "resuming from $model/checkpoint.pth at epoch 2" \
  "a resubmitted job resumes from the checkpoint"
assert_eq "$(wc -l <"$model/log.txt")" 2 "nothing trained twice"
cluster_down
finish
