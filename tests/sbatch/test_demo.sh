#!/usr/bin/env bash
# Integration (issue #8): README command one, scripts/demo, at a small scale: 100 Fashion-MNIST images per
# class and split instead of 1,000, everything else as the demo (sbatch/examples/demo.yaml, the local
# two-node cluster, the whole chain through `pcdino resume`, the baselines). It must end with exit code 0,
# the kNN files, the plots and index.html; run again, it submits nothing and prints the same table.
source "$(dirname "$0")/../lib/assert.sh"
: "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
W="$PCDINO_BUILD_DIR/test-work/demo"
rm -rf "$W" && mkdir -p "$W"
unset SLURM_CONF
export PCDINO_DEMO_DIR="$W" PCDINO_DEMO_PER_CLASS=100 PCDINO_DEMO_EPOCHS=3 LOCAL_CLUSTER_DIR="$W/cluster"
export LOCAL_CLUSTER_PORT=${TEST_CLUSTER_PORT:-18617}
trap '"$PCDINO_SOURCE_DIR/sbatch/local-cluster" down >/dev/null 2>&1' EXIT

run "$PCDINO_SOURCE_DIR/scripts/demo"
assert_rc 0 "scripts/demo"
RUN="$W/output/demo"
for f in kNN/global_kNN.txt kNN/knn.json plots/index.html plots/umap.png plots/knn_accuracy.png \
  CLS_features/features.h5 scDINO_ViTs/dino_vit/checkpoint.pth; do
  [ -s "$RUN/$f" ] && pass "$f written" || fail "$f missing"
done
assert_contains "$OUT" "kNN on the held-out Fashion-MNIST images" "the kNN table is printed"
for row in "DINO-trained ViT (teacher)" "same ViT, untrained" "raw pixels"; do
  assert_contains "$OUT" "$row" "the summary has a row for: $row"
done
assert_contains "$OUT" "plots: $RUN/plots/index.html" "the plots' path is printed"
assert_contains "$OUT" "demo: the local Slurm cluster is still up" "the demo says that the cluster it started is up"
assert_contains "$OUT" "sbatch/local-cluster --dir $W/cluster down" "and how to stop it"
assert_contains "$OUT" "| epoch " "the live view shows the training's progress"
assert_eq "$(find "$W/fashion-mnist-100" -name '*.tif' | wc -l)" 2000 "the dataset: 100 images per class and split"
train_log=$(cat "$RUN"/logs/train_err_*.err)
assert_contains "$train_log" "rank 1 of 2 on node2" "training ran on both nodes"
assert_contains "$train_log" "time_budget_minutes 15, estimate after epoch 1: " \
  "the demo's time budget judged the steps"
assert_contains "$train_log" " steps (3 epochs, " "PCDINO_DEMO_EPOCHS capped them"
assert_contains "$(cat "$W/pipeline.yaml")" "dataset_dir: \"$W/fashion-mnist-100\"" "pipeline.yaml: the dataset filled in"
assert_contains "$(cat "$W/pipeline.yaml")" "  epochs: 3 " "pipeline.yaml: PCDINO_DEMO_EPOCHS filled in"
diff <(grep -Ev '_dir:|^  epochs:' "$W/pipeline.yaml") \
  <(grep -Ev '_dir:|^  epochs:' "$PCDINO_SOURCE_DIR/sbatch/examples/demo.yaml") >/dev/null &&
  pass "pipeline.yaml is demo.yaml with only the folders and the epochs filled in" ||
  fail "pipeline.yaml differs from demo.yaml"
top1=$(/usr/bin/python3 -c "import json,sys; print(max(r['top1'] for r in json.load(open(sys.argv[1]))['results']))" \
  "$RUN/kNN/knn.json")
/usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 10 else 1)" "$top1" &&
  pass "kNN top-1 $top1% is above chance (10 classes)" || fail "kNN top-1 $top1% is not above chance"

run "$PCDINO_SOURCE_DIR/scripts/demo"
assert_rc 0 "scripts/demo again"
assert_contains "$OUT" "nothing submitted" "a second run finds every stage complete"
finish
