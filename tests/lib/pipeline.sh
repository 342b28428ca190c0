# shellcheck shell=bash
# The pipeline YAML of the training tests (sourced): DINO's smallest set-up on the synthetic 8x8 images of
# tests/pipelines/make_synthetic.py in DIR/data, outputs in DIR/out; and helpers for a submitted pipeline.

# tiny_pipeline FILE NAME DIR: vit_tiny with 2 of its 12 blocks (depth 2: the same code, a step 15x faster
# and a checkpoint of 97 MB instead of 168 on 2 cores, so that the tests' trainings wait on Slurm, not on the
# model), patch 4, 8/4-px crops, two locals, out_dim 64, no warm-ups, float32 (use_fp16 false: with it a CPU
# run takes whichever precision a timed step finds faster, so two runs that the tests compare tensor for
# tensor could train in different precisions on a busy machine).
# Environment: EPOCHS (1), BATCH (8), SEED and SPLIT (meta.seed, train_datasetsplit_fraction; the
# defaults when unset), HYPERPARAMETERS (more lines for train_scDINO.hyperparameters, indented 4) and
# DOWNSTREAM (a downstream_analyses section).
tiny_pipeline() {
  cat >"$1" <<YAML
meta:
  name_of_run: $2
  output_dir: "$3/out"
  dataset_dir: "$3/data"
${SEED:+  seed: $SEED}
${SPLIT:+  train_datasetsplit_fraction: $SPLIT}
train_scDINO:
  fraction_for_mean_std_calc: 1.0
  epochs: ${EPOCHS:-1}
  batch_size_per_gpu: ${BATCH:-8}
  num_workers: 1
  hyperparameters:
    arch: vit_tiny
    patch_size: 4
    out_dim: 64
    global_crops_size: 8
    local_crops_size: 4
    local_crops_number: 2
    warmup_epochs: 0
    warmup_teacher_temp_epochs: 0
    use_fp16: false
    depth: 2
${HYPERPARAMETERS:-}
${DOWNSTREAM:-}
YAML
}

# wait_all SECONDS: until no job is queued or running on the test cluster (a failure after SECONDS).
wait_all() {
  local deadline=$((SECONDS + $1))
  while [ -n "$(squeue -h 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 1; done
  [ -z "$(squeue -h)" ] || fail "jobs still queued after $1 s: $(squeue)"
}

# state_of STAGE: its job id and state in the `pcdino status` output held in $OUT.
state_of() { awk -v s="$1" '$1 == s { print $2, $3 }' <<<"$OUT"; }

# job_of STAGE: the job id of STAGE's last submission in the run folder $RUN.
job_of() {
  /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['jobs'][sys.argv[2]]['job_id'])" \
    "$RUN/logs/pipeline_jobs.json" "$1"
}

# when STAGE FIELD: a time of STAGE's last job as Slurm records it (StartTime, EndTime).
when() { scontrol show job -o "$(job_of "$1")" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
