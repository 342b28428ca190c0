#!/usr/bin/env bash
# Integration (issue #35): the workshop's 5-channel cells as Python writes them by default
# (tifffile.imwrite(path, hwc): H pages of W x 5 each, tifffile's shaped series), never read as their
# first page.
#  1. `pcdino dataset check` sees 5 channels of [H, W] in every file, and names a file that disagrees.
#  2. The mean/std stage equals numpy over tifffile.imread's arrays indexed channels last.
#  3. sbatch/examples/workshop.yaml, CPU-sized with --set, runs end to end on the local two-node cluster.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
HERE="$(cd "$(dirname "$0")" && pwd)"
W="$PCDINO_BUILD_DIR/test-work/workshop_tiffs"
rm -rf "$W" && mkdir -p "$W"
P=$PCDINO_BIN

/usr/bin/python3 "$HERE/make_workshop_cells.py" "$W/cells" 8 12 24 ||
  fatal "cannot write the synthetic cells (python3-tifffile)"
assert_eq "$(/usr/bin/python3 -c "import tifffile; print(len(tifffile.TiffFile('$W/cells/celltype0/cell000.tif').pages))")" \
  24 "tifffile's default write made 24 pages of 24x5 per cell"

# --- 1. dataset check -------------------------------------------------------------------------------
run "$P" dataset check "$W/cells"
assert_rc 0 "dataset check"
assert_contains "$OUT" "96 images in 8 classes" "every image found"
assert_contains "$OUT" "      96        24x24         5  uint16" "all 96 are 24x24 with 5 channels of uint16"
assert_contains "$OUT" "tifffile shaped series [24, 24, 5], channels last" "read as the workshop reads them"
assert_contains "$OUT" "ok: every image decodes, all with 5 channel(s)" "the verdict"

/usr/bin/python3 -c "import numpy, tifffile; tifffile.imwrite('$W/cells/celltype3/cell100.tif', numpy.ones((24, 24), numpy.uint16))"
run "$P" dataset check "$W/cells"
assert_rc 65 "dataset check of a set with a one-channel image"
assert_contains "$OUT$ERR" "celltype3/cell100.tif has 1 channel(s), the first image celltype0/cell000.tif 5" \
  "names the first file that disagrees"

# --- 2. mean/std against numpy ---------------------------------------------------------------------
cat >"$W/meanstd.yaml" <<YAML
meta:
  name_of_run: cells
  output_dir: "$W/out"
  dataset_dir: "$W/cells"
train_scDINO:
  fraction_for_mean_std_calc: 1.0
YAML
run "$P" meanstd -c "$W/meanstd.yaml" --threads 1
assert_rc 65 "meanstd over a set with a one-channel image"
assert_contains "$ERR" "celltype3/cell100.tif has 1" "names the file"
rm "$W/cells/celltype3/cell100.tif"

run "$P" meanstd -c "$W/meanstd.yaml" --threads 1
assert_rc 0 "meanstd"
/usr/bin/python3 "$HERE/numpy_mean_std.py" "$W/cells" >"$W/numpy.json" || fatal "numpy reference failed"
run /usr/bin/python3 "$HERE/compare_mean_std.py" 1e-9 "$W/numpy.json" "$W/out/cells/mean_and_std_of_dataset.txt"
assert_rc 0 "5 channels, each equal to numpy over tifffile.imread(path)[:, :, c] ($OUT)"

# --- 3. the workshop's pipeline, CPU-sized, on the local cluster -------------------------------------
cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-18717}"
cd "$W" || fatal "no $W"
sizes=(
  --dataset-dir "$W/cells" --output-dir "$W/out"
  --set train_scDINO.fraction_for_mean_std_calc=1.0 --set train_scDINO.epochs=2 --set train_scDINO.saveckp_freq=1
  --set train_scDINO.batch_size_per_gpu=8 --set train_scDINO.num_workers=1
  --set train_scDINO.hyperparameters.arch=vit_tiny --set train_scDINO.hyperparameters.patch_size=4
  --set train_scDINO.hyperparameters.out_dim=64 --set train_scDINO.hyperparameters.use_fp16=false
  --set train_scDINO.hyperparameters.global_crops_size=16 --set train_scDINO.hyperparameters.local_crops_size=8
  --set train_scDINO.hyperparameters.local_crops_number=2 --set train_scDINO.hyperparameters.warmup_epochs=0
  --set train_scDINO.hyperparameters.warmup_teacher_temp_epochs=0
  --set downstream_analyses.compute_cls_features.resize=false
  --set "downstream_analyses.kNN.global.n_neighbors=[2, 5]"
  --set downstream_analyses.umap_eval.n_neighbors=5 --set downstream_analyses.umap_eval.epochs=20
  --set slurm.partition=local --set slurm.gpus=false --set slurm.exclusive=false --set slurm.cpus_per_task=1
)
run "$P" submit "$PCDINO_SOURCE_DIR/sbatch/examples/workshop.yaml" "${sizes[@]}"
assert_rc 0 "submit the workshop's pipeline ($ERR)"
RUN="$W/out/workshop"
wait_all 900
run "$P" status "$PCDINO_SOURCE_DIR/sbatch/examples/workshop.yaml" "${sizes[@]}"
assert_rc 0 "every stage completed ($OUT)"
assert_eq "$(grep -cE '^(meanstd|train|extract|labels|knn|plots) .* COMPLETED' <<<"$OUT")" 6 "six stages COMPLETED"
assert_eq "$(/usr/bin/python3 -c "import json; print(len(json.load(open('$RUN/mean_and_std_of_dataset.txt'))['mean']))")" \
  5 "the run's mean/std has the 5 channels"
assert_contains "$(cat "$RUN/logs/train_err_$(job_of train).err")" "rank 1 of 2 on node2" "training ran on both nodes"
assert_contains "$(h5dump -H "$RUN/CLS_features/features.h5")" "DATASPACE" "CLS features written"
assert_contains "$(cat "$RUN/kNN/global_kNN.txt")" "k" "kNN table written"
[ -s "$RUN/plots/index.html" ] && pass "plots written" || fail "no plots/index.html"
cluster_down

finish
