#!/usr/bin/env bash
# Bad input to the dataset and mean/std commands: each stops with the exit code that says what is wrong
# (sysexits), a message naming the file or key, and no output under its final name; or, for a corrupt
# image with meta.skip_corrupt, skips it and lists it in a report.
source "$(dirname "$0")/../lib/assert.sh"
own_mpi_session_dir
: "${PCDINO_BIN:?}" "${PCDINO_BUILD_DIR:?}"
HERE="$(cd "$(dirname "$0")" && pwd)"
W="$PCDINO_BUILD_DIR/test-work/stage_bad_input"
rm -rf "$W" && mkdir -p "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=tcp,self

config() {  # config NAME DATASET_DIR [EXTRA META LINES]
  printf 'meta:\n  name_of_run: "%s"\n  output_dir: "%s"\n  dataset_dir: "%s"\n%s\ntrain_scDINO:\n  fraction_for_mean_std_calc: 1.0\n' \
    "$1" "$W/out" "$2" "${3:-}" >"$W/$1.yaml"
  echo "$W/$1.yaml"
}
no_output() { assert_eq "$(ls "$W/out/$1/mean_and_std_of_dataset.txt" 2>/dev/null)" "" "$1: no mean/std file left"; }

/usr/bin/python3 "$HERE/make_synthetic.py" "$W/good" u16x5 2 5 >/dev/null || fatal "cannot make the dataset"

run "$PCDINO_BIN" meanstd -c "$(config missing "$W/nowhere")"
assert_rc 66 "missing dataset directory"
assert_contains "$ERR" "$W/nowhere" "message names the directory"
no_output missing

mkdir -p "$W/empty"
run "$PCDINO_BIN" meanstd -c "$(config empty "$W/empty")"
assert_rc 65 "dataset directory without class folders"
assert_contains "$ERR" "has no class folders" "message says what is missing"

cp -r "$W/good" "$W/noimages" && mkdir -p "$W/noimages/class9"
run "$PCDINO_BIN" meanstd -c "$(config noimages "$W/noimages")"
assert_rc 65 "class folder without images"
assert_contains "$ERR" "$W/noimages/class9" "message names the class folder"

cp -r "$W/good" "$W/corrupt" && truncate -s 200 "$W/corrupt/class1/img002.tif"
run "$PCDINO_BIN" meanstd -c "$(config corrupt "$W/corrupt")"
assert_rc 65 "truncated TIFF"
assert_contains "$ERR" "$W/corrupt/class1/img002.tif" "message names the file"
no_output corrupt
run timeout 120 mpirun --oversubscribe -np 2 "$PCDINO_BIN" meanstd -c "$W/corrupt.yaml" --threads 1
assert_rc 65 "truncated TIFF with 2 ranks: the job ends with the error's code, no hang"
no_output corrupt
run "$PCDINO_BIN" meanstd -c "$W/corrupt.yaml" --set meta.skip_corrupt=true
assert_rc 0 "skip_corrupt: the stage completes"
assert_contains "$(cat "$W/out/corrupt/skipped_images.txt")" "class1/img002.tif" "skipped image listed in the report"
assert_contains "$ERR" "over 9 images (1 skipped)" "9 of 10 images used"

run "$PCDINO_BIN" meanstd -c "$(config channel "$W/good" '  selected_channel_combination_per_run: ["05"]')"
assert_rc 65 "channel index out of range"
assert_contains "$ERR" "selected_channel_combination_per_run selects channel 5 but the image has 5 channel(s)" \
  "message names the key and the channel count"
no_output channel

printf 'meta:\n  dataset_dir: "%s"\ntrain_scDINO:\n  fraction_for_mean_std: 0.5\n' "$W/good" >"$W/typo.yaml"
run "$PCDINO_BIN" meanstd -c "$W/typo.yaml"
assert_rc 78 "unknown key in the pipeline YAML"
assert_contains "$ERR" "typo.yaml:4:3: train_scDINO.fraction_for_mean_std: unknown key" "message has file, line, column and key"
run "$PCDINO_BIN" meanstd -c "$W/good.yaml"
assert_rc 66 "missing pipeline YAML"
run "$PCDINO_BIN" meanstd -c "$W/typo.yaml" --set train_scDINO.epochs=many
assert_rc 78 "bad override"
assert_contains "$ERR" "--set train_scDINO.epochs=many" "message names the flag"

# Packing needs one shape: a different image is named with the first.
cp -r "$W/good" "$W/mixed"
/usr/bin/python3 -c "import numpy, tifffile; tifffile.imwrite('$W/mixed/class1/img004.tif', numpy.zeros((9, 8, 5), numpy.uint16), photometric='minisblack', planarconfig='contig')"
run "$PCDINO_BIN" dataset pack --dataset-dir "$W/mixed" --out "$W/mixed.packed"
assert_rc 65 "pack of images with different shapes"
assert_contains "$ERR" "class1/img004.tif' is 9x8x5 uint16" "message names the odd file and its shape"
assert_contains "$ERR" "class0/img000.tif' is 8x8x5 uint16" "message names the first file and its shape"
assert_eq "$(ls "$W/mixed.packed")" "" "no shard or manifest left behind"

finish
