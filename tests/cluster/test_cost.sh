#!/usr/bin/env bash
# `pcdino cluster cost` as an admin runs it (issue #71 item 4): the issue's command on the workshop example
# adds nothing for the run's nodes (its 2 static nodes are in the always-on total: 64.32 USD, not the
# 56.91 USD of before), prices us-west-2 as us-west-2 and names each price it lacks; a run estimate with
# one or two of --pipeline, --images and --images-per-second-per-gpu is a usage error (64) naming the rest.
# The hand computations are in test_cost.cpp.
source "$(dirname "$0")/../lib/assert.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}"
EX="$PCDINO_SOURCE_DIR/cluster/examples"
PIPELINE="$PCDINO_SOURCE_DIR/sbatch/examples/workshop.yaml"

run "$PCDINO_BIN" cluster cost "$EX/workshop.yaml" --pipeline "$PIPELINE" --images 1000000 \
  --images-per-second-per-gpu 900
assert_rc 0 "the issue's command"
assert_contains "$OUT" "Cost of cluster dino-workshop in us-west-2" "priced in the site's region"
assert_contains "$OUT" "= 15.43 h" "the run's hours"
assert_contains "$OUT" "its nodes are the queue's static ones, already in the always-on total" \
  "the static nodes are not added again"
assert_contains "$OUT" "15.43 h x (4.168 USD/h always-on + 0.000 USD/h extra) = 64.32 USD" "the run's cost"
assert_not_contains "$OUT" "56.91" "not the double count of before"
assert_contains "$OUT" "size unknown: head_node.root_volume_gib unset (the AMI's size)" "an unsized volume is named"
assert_contains "$OUT" "Sources:" "the prices' sources are printed"

for example in p5-efa cpu-only; do
  run "$PCDINO_BIN" cluster cost "$EX/$example.yaml"
  assert_rc 0 "$example: the always-on estimate alone"
  assert_contains "$OUT" "always-on total" "$example: a total"
done
assert_contains "$OUT" "no price in the table for FSx SCRATCH_2 in eu-west-1" "cpu-only: a missing price is named with its region"

run "$PCDINO_BIN" cluster cost "$EX/workshop.yaml" --images 1000000
assert_rc 64 "--images alone is a usage error"
assert_contains "$ERR" "--images given, --pipeline, --images-per-second-per-gpu missing" "naming what is missing"
run "$PCDINO_BIN" cluster cost "$EX/workshop.yaml" --pipeline "$PIPELINE" --images 1000000
assert_rc 64 "no throughput: a usage error"
assert_contains "$ERR" "--pipeline, --images given, --images-per-second-per-gpu missing" "naming the throughput option"
run "$PCDINO_BIN" cluster cost "$EX/workshop.yaml" --pipeline "$PIPELINE" --images 0 \
  --images-per-second-per-gpu 900
assert_rc 64 "0 images is no figure"
finish
