#!/usr/bin/env bash
# Integration (issue #63): pcdino in its CPU container image, through NVIDIA's Pyxis and enroot, on the local
# two-node cluster, as on a ParallelCluster official image with Pyxis on. Pyxis 0.24.0 and enroot 4.1.2 are
# built from ../shared/third_party against this stack's Slurm (scripts/container-runtime, kept between runs);
# the image is scripts/container-image's, made from this build (its Debian 12 root kept between runs).
#  1. The same pipeline twice, at once: on the nodes' own pcdino, and with slurm.container_image (every stage
#     but the doctor in the image, training on both nodes through srun --mpi=pmix and enroot's PMIx hook).
#     Every contained stage's log names the image from its manifest, read inside; the native ones do not;
#     mean/std is byte-identical and kNN top-1 within a point of the native run's.
#  2. spank_pcdino.so's variables (its profile's and the rank variables) reach the container's ranks, two
#     tasks on one node each with its own.
#  3. Bad container settings are refused by `pcdino submit` before anything is submitted, naming the key.
# Skipped (77) where the third-party sources are missing or the test is not root (debootstrap, mounts).
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
source "$(dirname "$0")/../lib/container.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
PLUGIN="$PCDINO_BUILD_DIR/spank/spank_pcdino.so"
[ -f "$PLUGIN" ] || fatal "no $PLUGIN (libslurm-dev missing at configure time?)"
W="$PCDINO_BUILD_DIR/test-work/container"
rm -rf "$W" && mkdir -p "$W/jobs"
P=$PCDINO_BIN

# --- the runtime and the image -------------------------------------------------------------------------
container_setup

# --- two runs of one pipeline, native and contained ------------------------------------------------------
/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$W/data" u8x1 3 50 >/dev/null ||
  fatal "cannot write the synthetic dataset (python3-tifffile)"
downstream() {
  echo "downstream_analyses:
  compute_cls_features:
    resize: false
  kNN:
    global:
      n_neighbors: [5, 10]
  umap_eval:
    n_neighbors: 5
    epochs: 20
slurm:
  gpus: false
  exclusive: false
  cpus_per_task: 1$1"
}
pipeline() {  # pipeline NAME [SLURM-LINES]
  EPOCHS=2 DOWNSTREAM="$(downstream "${2:-}")" tiny_pipeline "$W/$1.yaml" "$1" "$W"
  sed -i 's/^train_scDINO:$/train_scDINO:\n  nnodes: 2\n  num_gpus: 1/' "$W/$1.yaml"
}
pipeline native
pipeline contained "
  container_image: $IMAGE
  container_mounts: [$W]
  environment: {PCDINO_CONTAINER_ENV: from-host}"

cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-19517}"
unset OMPI_MCA_btl OMPI_MCA_btl_tcp_if_include  # the plugin's profile gives the ranks what they need
cat >"$W/accel.yaml" <<'YAML'
profiles:
  cpu-test:
    env:
      - name: PCDINO_PROFILE_VAR
        value: "from-cpu-test"
      - name: OMPI_MCA_btl
        value: "tcp,self"
      - name: OMPI_MCA_btl_tcp_if_include
        value: "lo"
YAML
# pcdino's plugin before Pyxis's, as ParallelCluster's plugstack.conf.d (pcdino.conf, pyxis.conf) orders
# them; Slurm re-reads plugstack.conf at every launch: replaced by rename.
{
  echo "required $PLUGIN config=$W/accel.yaml default=cpu-test"
  grep spank_pyxis "$LOCAL_CLUSTER_DIR/etc/plugstack.conf"
} >"$LOCAL_CLUSTER_DIR/etc/plugstack.conf.new"
mv "$LOCAL_CLUSTER_DIR/etc/plugstack.conf.new" "$LOCAL_CLUSTER_DIR/etc/plugstack.conf"
run srun --help
assert_contains "$OUT" "--container-image" "srun --help lists Pyxis's options"
assert_contains "$OUT" "--accel-profile" "and pcdino's"

cd "$W" || fatal "no $W"
run "$P" submit contained.yaml --dry-run
assert_contains "$OUT" "srun --mpi=pmix --kill-on-bad-exit=1 --container-image=$IMAGE --container-mounts=$W --container-workdir=$W/out/contained --container-env=PCDINO_CONTAINER_ENV /opt/pcdino/bin/pcdino train" \
  "--dry-run shows the training step in the image, slurm.environment's names kept over the image's"
start=$SECONDS
run "$P" submit native.yaml
assert_rc 0 "submit the native run"
run "$P" submit contained.yaml
assert_rc 0 "submit the contained run"
wait_all 900
echo "both runs ended in $((SECONDS - start)) s"
for name in native contained; do
  run "$P" status "$name.yaml"
  assert_rc 0 "$name: every stage completed"
  assert_eq "$(grep -cE '^(meanstd|train|extract|labels|knn|plots) .* COMPLETED' <<<"$OUT")" 6 "$name: six stages completed"
done
for stage in meanstd train extract labels knn plots; do
  assert_contains "$(cat "$W"/out/contained/logs/"${stage}"_err_*.err)" "in container image: name=pcdino-cpu" \
    "$stage ran in the image (its manifest read inside)"
done
assert_eq "$(cat "$W"/out/native/logs/*_err_*.err | grep -c "in container image")" 0 "the native run ran on the nodes"
train_log=$(cat "$W"/out/contained/logs/train_err_*.err)
assert_contains "$train_log" "rank 1 of 2 on node2" "the contained training ran on both nodes"
assert_contains "$train_log" "2 ranks (mpi)" "as one MPI world"
cmp -s "$W/out/native/mean_and_std_of_dataset.txt" "$W/out/contained/mean_and_std_of_dataset.txt" ||
  fail "mean/std differs: $(cat "$W"/out/*/mean_and_std_of_dataset.txt)"
top1() { /usr/bin/python3 -c 'import json,sys; print(max(r["top1"] for r in json.load(open(sys.argv[1]))["results"]))' "$1"; }
native_top1=$(top1 "$W/out/native/kNN/knn.json")
contained_top1=$(top1 "$W/out/contained/kNN/knn.json")
echo "kNN top-1: native $native_top1, contained $contained_top1"
/usr/bin/python3 -c "import sys; sys.exit(abs($native_top1 - $contained_top1) > 1.0)" ||
  fail "kNN top-1 $contained_top1 in the image, $native_top1 on the nodes: more than a point apart"

# --- the SPANK plugin's variables inside the container -----------------------------------------------------
report='echo rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE var=$PCDINO_PROFILE_VAR image=$(sed -n s/^name=//p /etc/pcdino/image.txt)'
job=$(sbatch --parsable -N2 -n2 -o "$W/jobs/spank_%j.out" \
  --wrap "srun --container-image=$IMAGE bash -c '$report'")
wait_job "$job" 300
out=$(cat "$W/jobs/spank_$job.out")
assert_contains "$out" "rank=0 local=0 world=2 var=from-cpu-test image=pcdino-cpu" "rank 0 in the image sees the profile"
assert_contains "$out" "rank=1 local=0 world=2 var=from-cpu-test image=pcdino-cpu" "rank 1 too"
# Two tasks on one node: Pyxis starts the node's container once, for the first task to get there, and copies
# the container's environment into every task (slurm_spank_task_init in pyxis_slurmstepd.c); each task still
# sees its own rank variables.
job=$(sbatch --parsable -N1 -n2 -o "$W/jobs/spank2_%j.out" --wrap "srun --container-image=$IMAGE bash -c '$report'")
wait_job "$job" 300
assert_eq "$(sort "$W/jobs/spank2_$job.out")" $'rank=0 local=0 world=2 var=from-cpu-test image=pcdino-cpu\nrank=1 local=1 world=2 var=from-cpu-test image=pcdino-cpu' \
  "two tasks on one node keep their own ranks in the container"

# --- bad settings, refused before anything is submitted -----------------------------------------------------
before=$(squeue -h | wc -l)
run "$P" submit contained.yaml --set slurm.container_image="$W/missing.sqsh" --set meta.name_of_run=bad1
assert_rc 78 "a missing image"
assert_contains "$ERR" "slurm.container_image: no image file '$W/missing.sqsh'" "names the key and the file"
run "$P" submit contained.yaml --set "slurm.container_mounts=[/nonexistent]" --set meta.name_of_run=bad2
assert_rc 78 "a mount whose source does not exist"
assert_contains "$ERR" "slurm.container_mounts[0]: '/nonexistent' does not exist here" "names the entry"
run "$P" submit contained.yaml --set "slurm.container_mounts=[$W/data]" --set meta.name_of_run=bad3
assert_rc 78 "the run folder not in the container"
assert_contains "$ERR" "meta.output_dir (the run folder) '$W/out/bad3' is not inside the container" "says which"
run "$P" submit contained.yaml --set slurm.launcher=mpirun --set meta.name_of_run=bad4
assert_rc 78 "mpirun with a container"
assert_eq "$(squeue -h | wc -l)" "$before" "nothing was submitted"
assert_eq "$(ls "$W/out")" $'contained\nnative' "and no run folder was made"
cluster_down
finish
