#!/usr/bin/env bash
# `pcdino submit --dry-run` (issue #7): the checked-in example for the workshop's configuration
# (sbatch/examples/workshop.dry-run.sh) is what the program prints today, it parses as bash, and a dry
# run writes nothing and needs no Slurm.
source "$(dirname "$0")/../lib/assert.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
EX="$PCDINO_SOURCE_DIR/sbatch/examples"
W="$PCDINO_BUILD_DIR/test-work/dry_run"
rm -rf "$W" && mkdir -p "$W"

run env PATH=/usr/bin/nonexistent "$PCDINO_BIN" submit "$EX/workshop.yaml" --dry-run --program /opt/pcdino/bin/pcdino
assert_rc 0 "dry run without Slurm on PATH"
if [ "$OUT" = "$(cat "$EX/workshop.dry-run.sh")" ]; then pass "workshop.dry-run.sh is current"; else
  fail "sbatch/examples/workshop.dry-run.sh differs from the program's output; regenerate it with
  pcdino submit sbatch/examples/workshop.yaml --dry-run --program /opt/pcdino/bin/pcdino >sbatch/examples/workshop.dry-run.sh
$(diff <(echo "$OUT") "$EX/workshop.dry-run.sh" | head -20)"
fi
run bash -n "$EX/workshop.dry-run.sh"
assert_rc 0 "the example parses as bash"
assert_eq "$(grep -c '^#SBATCH --dependency' "$EX/workshop.dry-run.sh")" 0 "dependencies are on the command line"
assert_eq "$(grep -c 'sbatch --parsable --dependency=afterok:\$' "$EX/workshop.dry-run.sh")" 4 \
  "four stages wait for others"

run "$PCDINO_BIN" submit "$EX/workshop.yaml" --dry-run --output-dir "$W/out" --stages knn,plots
assert_rc 0 "dry run of two stages"
assert_contains "$OUT" "plots=\$(sbatch --parsable --dependency=afterok:\$knn" "plots wait for kNN"
assert_contains "$OUT" "knn=\$(sbatch --parsable $W/out/workshop/logs/knn.sbatch)" \
  "kNN waits for nothing outside the submission"
[ ! -e "$W/out" ] && pass "a dry run writes nothing" || fail "a dry run wrote $W/out"
# The node check before training: off unless doctor.enabled; on, training waits for it and for mean/std.
run "$PCDINO_BIN" submit "$EX/workshop.yaml" --dry-run --output-dir "$W/out" --set doctor.enabled=true
assert_rc 0 "dry run with the doctor stage"
assert_contains "$OUT" "doctor=\$(sbatch --parsable $W/out/workshop/logs/doctor.sbatch)" "the check is submitted first"
assert_contains "$OUT" "train=\$(sbatch --parsable --dependency=afterok:\$doctor:\$meanstd" "training waits for it"
assert_contains "$OUT" "pcdino doctor --config $W/out/workshop/logs/submitted_pipeline.yaml" \
  "the check reads the pipeline's doctor: section"
run "$PCDINO_BIN" submit "$EX/workshop.yaml" --dry-run --output-dir "$W/out" --set doctor.enabled=true --stages train
assert_rc 0 "dry run of training alone with the doctor stage on"
assert_contains "$OUT" "train=\$(sbatch --parsable --dependency=afterok:\$doctor " "a training submitted alone still waits for the check"
assert_not_contains "$(cat "$EX/workshop.dry-run.sh")" "doctor" "off by default"
run "$PCDINO_BIN" submit "$EX/workshop.yaml" --dry-run --output-dir "$W/out" --stages doctor
assert_rc 78 "--stages doctor while it is off"
assert_contains "$ERR" "stage doctor is off" "is refused"
assert_contains "$ERR" "--set doctor.enabled=true" "saying how to turn it on"
# Every example pipeline is one pcdino accepts (a dry run reads and checks the whole configuration).
for example in "$EX"/*.yaml; do
  run "$PCDINO_BIN" submit "$example" --dry-run --output-dir "$W/examples"
  assert_rc 0 "$(basename "$example") is a valid pipeline"
done
finish
