#!/usr/bin/env bash
# Integration, real data: Fashion-MNIST from Debian's dataset-fashion-mnist, imported to class-folder TIFFs,
# through the mean/std stage on 2 ranks, equals an independent numpy computation from the IDX files to 1e-6.
source "$(dirname "$0")/../lib/assert.sh"
own_mpi_session_dir
: "${PCDINO_BIN:?}" "${PCDINO_BUILD_DIR:?}"
HERE="$(cd "$(dirname "$0")" && pwd)"
SRC=/usr/share/datasets/fashion-mnist
[ -r "$SRC/t10k-images-idx3-ubyte.gz" ] || fatal "Fashion-MNIST not found in $SRC (install dataset-fashion-mnist)"
W="$PCDINO_BUILD_DIR/test-work/meanstd_fashion_mnist"
rm -rf "$W" && mkdir -p "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=tcp,self

run "$PCDINO_BIN" dataset import --source "$SRC" --out "$W/fmnist" --split test --per-class 400
assert_rc 0 "import 400 test images per class"
assert_eq "$(find "$W/fmnist" -name '*.tif' | wc -l)" 4000 "4000 TIFFs written"
assert_eq "$(ls "$W/fmnist" | tr '\n' ' ')" "Ankle_boot Bag Coat Dress Pullover Sandal Shirt Sneaker T-shirt_top Trouser " \
  "one folder per Fashion-MNIST class"

cat >"$W/pipeline.yaml" <<YAML
meta:
  name_of_run: "fmnist"
  output_dir: "$W/out"
  dataset_dir: "$W/fmnist"
  seed: 40
  channel_dict: {0: "gray"}
  selected_channel_combination_per_run: ["0"]
train_scDINO:
  fraction_for_mean_std_calc: 0.35
YAML
run mpirun --oversubscribe -np 2 "$PCDINO_BIN" meanstd -c "$W/pipeline.yaml" --threads 1
assert_rc 0 "meanstd on 2 ranks"
assert_contains "$ERR" "over 1400 images" "the sample is 4000 - floor(0.65 * 4000) = 1400 images"

/usr/bin/python3 "$HERE/fashion_mnist_reference.py" "$SRC" test 400 0.35 40 >"$W/reference.json" ||
  fatal "reference computation failed"
run /usr/bin/python3 "$HERE/compare_mean_std.py" 1e-6 "$W/reference.json" "$W/out/fmnist/mean_and_std_of_dataset.txt"
assert_rc 0 "stage equals numpy on the IDX files ($OUT)"
assert_contains "$(cat "$W/out/fmnist/run_config_dump.yaml")" "fraction_for_mean_std_calc: 0.35" "config dumped beside"

finish
