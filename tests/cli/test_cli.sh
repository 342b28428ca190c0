#!/usr/bin/env bash
# The pcdino program's command-line contract: help, version, exit codes of unknown subcommands and of
# missing or bad arguments.
source "$(dirname "$0")/../lib/assert.sh"
: "${PCDINO_BIN:?set PCDINO_BIN to the pcdino program}"

run "$PCDINO_BIN" --help
assert_rc 0 "--help"
for sub in dataset meanstd train extract labels knn plots submit status logs cancel resume config metrics exit-codes \
  doctor node-check cluster ami; do
  assert_contains "$OUT" "  $sub" "--help lists '$sub'"
done
# One exit-code table (core/src/error.cpp): --help's line and `pcdino exit-codes` name the same codes, and 69
# has one row.
line=$(grep '^Exit codes: ' <<<"$OUT")
run "$PCDINO_BIN" exit-codes
assert_rc 0 "exit-codes"
# shellcheck disable=SC2016 # the backticks are the table's Markdown
codes=$(sed -n 's/^| \([0-9][0-9]*\) | `\([a-z-]*\)` .*/\1 \2/p' <<<"$OUT" | paste -sd, | sed 's/,/, /g')
assert_eq "$line" "Exit codes: $codes. \`pcdino exit-codes\` says what each means." "--help's exit codes are the table's"
assert_eq "$(grep -c '^| 69 |' <<<"$OUT")" 1 "69 means one thing"
# node-check: --list names every probe of the report (slurm_view, run first, included); --help names every
# key of the site file.
run "$PCDINO_BIN" node-check --list
assert_eq "$(cut -f1 <<<"$OUT" | head -n 1)" "slurm_view" "node-check --list starts with slurm_view"
assert_eq "$(wc -l <<<"$OUT")" 10 "node-check --list: ten probes"
run "$PCDINO_BIN" node-check --help
for key in SharedStorage LocalScratch MinScratchGiB Manifest ProbeSeconds Dcgm TextfileDir DrainGuardPercent; do
  assert_contains "$OUT" "$key" "node-check --help names the site file's key $key"
done

# Every stage of the stage table (listed by `submit --help`) is a subcommand of its own name.
run "$PCDINO_BIN" submit --help
stages=$(sed -n 's/.*Comma-separated stages to submit: \(.*\), or all.*/\1/p' <<<"$OUT" | tr -d ',')
assert_contains "$stages" "train" "submit --help lists the stage table"
for stage in $stages; do
  run "$PCDINO_BIN" "$stage" --help
  assert_rc 0 "stage '$stage' is a pcdino subcommand"
done

# The configuration schema and a file's effective configuration.
run "$PCDINO_BIN" config --schema
assert_rc 0 "config --schema"
assert_contains "$OUT" "| key | type | default | accepts | what it does |" "the schema is a Markdown table"
assert_contains "$OUT" "| \`train_scDINO.hyperparameters.lr\` | number | \`0.0005\` | > 0 |" "a key with its default and rule"
run "$PCDINO_BIN" cluster keys
assert_rc 0 "cluster keys"
assert_contains "$OUT" "| key | type | default | accepts | what it does |" "the site keys are a Markdown table"
assert_contains "$OUT" "| \`queues[].capacity_reservation_id\` |" "a queue's key, from the table parsing walks"
run "$PCDINO_BIN" metrics
assert_rc 0 "metrics"
assert_contains "$OUT" "| metric | type | stage | extra label | what |" "the metric table, in Markdown"
assert_contains "$OUT" "| \`pcdino_train_phase_seconds_total\` | counter | train | \`phase\` |" "a metric with its stage and label"
run "$PCDINO_BIN" config
assert_rc 64 "config needs a file or --schema"
cli_tmp=$(mktemp -d)
printf 'meta:\n  seed: 3\n' >"$cli_tmp/p.yaml"
run "$PCDINO_BIN" config "$cli_tmp/p.yaml" --set train_scDINO.epochs=7
assert_rc 0 "config FILE prints the effective configuration"
assert_contains "$OUT" "  seed: 3" "the file's value"
assert_contains "$OUT" "  epochs: 7" "the override"
assert_contains "$OUT" "    optimizer: \"adamw\"" "the defaults of keys the file leaves out"
printf 'meta:\n  sede: 3\n' >"$cli_tmp/bad.yaml"
run "$PCDINO_BIN" config "$cli_tmp/bad.yaml"
assert_rc 78 "config of a file with an unknown key"
assert_contains "$ERR" "bad.yaml:2:3: meta.sede: unknown key (did you mean 'meta.seed'?)" "named with line and column"
rm -rf "$cli_tmp"

run "$PCDINO_BIN" --version
assert_rc 0 "--version"
assert_contains "$OUT" "pcdino 0." "--version names the suite's version"
assert_contains "$OUT" "libtorch" "--version names the LibTorch it was built against"

run "$PCDINO_BIN"
assert_rc 64 "no subcommand is a usage error"
assert_contains "$ERR" "Usage: pcdino" "no subcommand prints the usage"

run "$PCDINO_BIN" frobnicate
assert_rc 64 "unknown subcommand is a usage error"
assert_contains "$ERR" "'frobnicate' is not a pcdino command" "unknown subcommand is named"

run "$PCDINO_BIN" --no-such-flag
assert_rc 64 "unknown flag is a usage error"

run "$PCDINO_BIN" dataset
assert_rc 64 "'dataset' needs import or pack"

run "$PCDINO_BIN" dataset pack --help
assert_rc 0 "'dataset pack --help' works"
assert_contains "$OUT" "HDF5" "'dataset pack --help' describes the command"

# Built stages take --config and the shared overrides.
for sub in meanstd "dataset pack"; do
  # shellcheck disable=SC2086
  run "$PCDINO_BIN" $sub --help
  assert_rc 0 "'$sub --help'"
  for opt in --config --set --dataset-dir --output-dir --name-of-run --seed; do
    assert_contains "$OUT" "$opt" "'$sub --help' lists $opt"
  done
done
run "$PCDINO_BIN" meanstd
assert_rc 64 "meanstd without --config is a usage error"
assert_contains "$ERR" "--config is required" "the missing option is named"
run "$PCDINO_BIN" train --help
assert_rc 0 "'train --help' (pcdino-train's own help)"
assert_contains "$OUT" "--limit-images" "pcdino train runs pcdino-train"
run "$PCDINO_BIN" train --config /nonexistent.yaml
assert_rc 66 "pcdino-train's exit code comes through pcdino"
run "$PCDINO_BIN" dataset import --help
assert_contains "$OUT" "--per-class" "'dataset import --help' lists --per-class"

# The pipeline commands take the configuration as their first argument or with --config.
for sub in submit resume status cancel; do
  run "$PCDINO_BIN" $sub --help
  assert_rc 0 "'$sub --help'"
  assert_contains "$OUT" "--set" "'$sub --help' lists the overrides"
  run "$PCDINO_BIN" $sub /nonexistent.yaml
  assert_rc 66 "'$sub' with a missing pipeline file"
  assert_contains "$ERR" "/nonexistent.yaml" "'$sub' names the missing file"
done
run "$PCDINO_BIN" submit
assert_rc 64 "submit without a pipeline is a usage error"
run "$PCDINO_BIN" submit /dev/null --stages train,knnn --dry-run
assert_rc 78 "an unknown stage in --stages"
assert_contains "$ERR" "'knnn' is not a stage" "the unknown stage is named"
run "$PCDINO_BIN" logs /dev/null
assert_rc 64 "logs needs a stage"
# pcdino doctor --config takes the doctor: section's settings; an option that one of its keys sets is refused
# beside it (--set changes the key), before anything runs.
run "$PCDINO_BIN" doctor --config /dev/null --min-busbw-gbps 5
assert_rc 64 "doctor --config with an option its doctor: section sets"
assert_contains "$ERR" "--set doctor.min_busbw_gbps=VALUE" "names the key to set instead"
run "$PCDINO_BIN" doctor --set doctor.probe_mb=5
assert_rc 64 "doctor --set without --config"
run "$PCDINO_BIN" doctor --config /dev/null --set doctor.probe_mb=-1
assert_rc 78 "doctor --config checks the section like every stage"
assert_contains "$ERR" "doctor.probe_mb: expected a number > 0" "naming the key"

# A key pcdino reads but does not implement stops the stage with exit 78 (configuration) naming the key,
# before any work; the same keys at the values pcdino implements pass that point.
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
printf 'meta:\n  dataset_dir: "%s/none"\n  output_dir: "%s"\n' "$W" "$W" >"$W/p.yaml"
for setting in train_scDINO.hyperparameters.optimizer=sgd train_scDINO.hyperparameters.optimizer=lars \
  train_scDINO.hyperparameters.use_bn_in_head=true train_scDINO.dist_url=tcp://node1:23456 \
  downstream_analyses.compute_cls_features.use_weighted_sampler=true \
  downstream_analyses.attention_visualisation.num_images_per_class=4 \
  downstream_analyses.attention_visualisation.resize_attention_image=false \
  downstream_analyses.attention_visualisation.image_size=224 downstream_analyses.umap_eval.topometry_plots=true; do
  run "$PCDINO_BIN" train -c "$W/p.yaml" --set "$setting"
  assert_rc 78 "train with $setting"
  assert_contains "$ERR" "${setting%%=*}: not implemented" "the key of $setting is named"
done
run "$PCDINO_BIN" train -c "$W/p.yaml" --set train_scDINO.hyperparameters.optimizer=adamw \
  --set train_scDINO.hyperparameters.use_bn_in_head=false
assert_rc 66 "implemented values get past the configuration (to the missing dataset)"
# CUDA graphs of the step need a CUDA device and a LibTorch with CUDA: refused before any work otherwise.
run "$PCDINO_BIN" train -c "$W/p.yaml" --cuda-graph --device cpu
assert_rc 78 "train --cuda-graph on a CPU"
assert_contains "$ERR" "--cuda-graph: " "the option is named"
# Gaudi and Trainium: no LibTorch backend, so a pipeline that asks for them stops before any work with
# the reason, from `pcdino submit` (nothing submitted) as from the trainer, and so does --device hpu.
for accelerator in habana neuron; do
  run "$PCDINO_BIN" submit -c "$W/p.yaml" --dry-run --set slurm.accelerator=$accelerator
  assert_rc 78 "submit with slurm.accelerator: $accelerator"
  assert_contains "$ERR" "slurm.accelerator: pcdino does not train or extract on" "the key and the reason"
done
run "$PCDINO_BIN" train -c "$W/p.yaml" --set slurm.accelerator=habana
assert_rc 78 "train with slurm.accelerator: habana"
assert_contains "$ERR" "habana_frameworks" "what to use instead"
run "$PCDINO_BIN" train -c "$W/p.yaml" --device hpu
assert_rc 78 "train --device hpu"
assert_contains "$ERR" "--device hpu: pcdino does not train or extract on Intel Gaudi" "the option and the reason"

finish
