#!/usr/bin/env bash
# Integration: the mean/std stage on synthetic 5-channel 16-bit and 1-channel 8-bit TIFFs (written by
# tifffile) equals the closed-form values with 1, 2 and 3 MPI ranks (mpirun), over the packed form of
# the dataset too, and over two nodes of the local Slurm cluster with srun --mpi=pmix.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
HERE="$(cd "$(dirname "$0")" && pwd)"
W="$PCDINO_BUILD_DIR/test-work/meanstd_ranks"
rm -rf "$W" && mkdir -p "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=tcp,self

for kind in u16x5 u8x1; do
  /usr/bin/python3 "$HERE/make_synthetic.py" "$W/$kind" "$kind" 3 20 >"$W/$kind.expected.json" ||
    fatal "cannot write the synthetic dataset (python3-tifffile)"
  cat >"$W/$kind.yaml" <<YAML
meta:
  name_of_run: "$kind"
  output_dir: "$W/out"
  dataset_dir: "$W/$kind"
  seed: 40
train_scDINO:
  fraction_for_mean_std_calc: 0.7
YAML
  outputs=()
  for np in 1 2 3; do
    run mpirun --oversubscribe -np "$np" "$PCDINO_BIN" meanstd -c "$W/$kind.yaml" --name-of-run "$kind-np$np" --threads 1
    assert_rc 0 "$kind: meanstd with $np rank(s)"
    assert_contains "$ERR" "from $np rank(s)" "$kind: $np rank(s) took part"
    outputs+=("$W/out/$kind-np$np/mean_and_std_of_dataset.txt")
  done
  run /usr/bin/python3 "$HERE/compare_mean_std.py" 1e-7 "$W/$kind.expected.json" "${outputs[@]}"
  assert_rc 0 "$kind: 1, 2 and 3 ranks equal the closed form ($OUT)"
  run /usr/bin/python3 "$HERE/compare_mean_std.py" 1e-12 "${outputs[0]}" "${outputs[@]:1}"
  assert_rc 0 "$kind: 2 and 3 ranks equal 1 rank up to rounding ($OUT)"

  run "$PCDINO_BIN" dataset pack -c "$W/$kind.yaml" --out "$W/$kind.packed" --images-per-shard 25
  assert_rc 0 "$kind: pack"
  assert_contains "$ERR" "into 3 shard(s)" "$kind: 60 images in shards of 25"
  run mpirun --oversubscribe -np 2 "$PCDINO_BIN" meanstd -c "$W/$kind.yaml" --dataset-dir "$W/$kind.packed" \
    --name-of-run "$kind-packed" --threads 1
  assert_rc 0 "$kind: meanstd over the packed dataset"
  assert_eq "$(cat "$W/out/$kind-packed/mean_and_std_of_dataset.txt")" "$(cat "$W/out/$kind-np2/mean_and_std_of_dataset.txt")" \
    "$kind: packed and folder layouts give identical results"
done

# Two nodes of a real Slurm cluster, srun --mpi=pmix inside sbatch.
cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-18017}"
job=$(sbatch --parsable -N2 -n2 -o "$W/srun_%j.out" \
  --wrap "srun --mpi=pmix '$PCDINO_BIN' meanstd -c '$W/u16x5.yaml' --name-of-run u16x5-srun --threads 1")
wait_job "$job"
assert_contains "$(scontrol show job "$job")" "ExitCode=0:0" "srun --mpi=pmix job succeeded"
log=$(cat "$W/srun_$job.out")
assert_contains "$log" "[rank 1/2]" "both ranks ran"
assert_contains "$log" "from 2 rank(s)" "rank 0 combined two ranks"
run /usr/bin/python3 "$HERE/compare_mean_std.py" 1e-7 "$W/u16x5.expected.json" "$W/out/u16x5-srun/mean_and_std_of_dataset.txt"
assert_rc 0 "srun over two nodes equals the closed form ($OUT)"
cluster_down

finish
