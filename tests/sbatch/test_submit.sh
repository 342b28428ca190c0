#!/usr/bin/env bash
# Integration (issue #7): the pipeline submitted by one command on the local two-node Slurm cluster.
#  1. `pcdino submit` chains the six stages with afterok; kNN is made to fail (more neighbours than
#     images): it fails, plots are cancelled, the rest completes, and `status` names the stage and why.
#  2. After the fix, `resume` resubmits kNN and plots only; a second `submit` while they are queued is
#     refused (75); the chain ends COMPLETED, in dependency order (Slurm's start/end times), with outputs.
#  3. A training job is sent SIGUSR1 (the time-limit signal: it checkpoints and requeues itself) and later
#     `scontrol requeue`; it resumes each time and ends with the weights of an uninterrupted run, bit for bit.
#  4. `cancel` ends a running pipeline's jobs; `status` says CANCELLED.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/python.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
W="$PCDINO_BUILD_DIR/test-work/submit"
rm -rf "$W" && mkdir -p "$W"
P=$PCDINO_BIN

/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$W/data" u8x1 3 20 >/dev/null ||
  fatal "cannot write the synthetic dataset (python3-tifffile)"
SLURM_SECTION="slurm:
  gpus: false
  exclusive: false
  cpus_per_task: 1"
knn_section() {
  echo "downstream_analyses:
  compute_cls_features:
    resize: false
  kNN:
    global:
      n_neighbors: $1
  umap_eval:
    n_neighbors: 5
    epochs: 20
$SLURM_SECTION"
}
EPOCHS=2 HYPERPARAMETERS="" DOWNSTREAM="$(knn_section '[500]')" tiny_pipeline "$W/pipeline.yaml" chain "$W"
sed -i 's/^train_scDINO:$/train_scDINO:\n  nnodes: 2\n  num_gpus: 1/' "$W/pipeline.yaml"
RUN="$W/out/chain"

cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-18517}"

# --- 1. one command, a failing stage -----------------------------------------------------------------
cd "$W" || fatal "no $W"
run "$P" submit pipeline.yaml
assert_rc 0 "submit"
assert_eq "$(grep -c ' job [0-9]' <<<"$OUT")" 6 "six jobs submitted: $OUT"
assert_contains "$OUT" "knn      job $(job_of knn) after extract $(job_of extract), labels $(job_of labels)" \
  "kNN waits for the features and the labels"
assert_contains "$(cat "$RUN/logs/train.sbatch")" "#SBATCH --nodes=2" "training asks for both nodes"
wait_all 400
run "$P" status pipeline.yaml
assert_rc 1 "status reports a failed stage"
assert_eq "$(state_of knn)" "$(job_of knn) FAILED" "status: kNN failed"
assert_contains "$OUT" "78:0 NonZeroExitCode" "status: with its exit code (configuration error) and reason"
assert_contains "$OUT" "n_neighbors" "status: and the error line that says why"
assert_eq "$(state_of plots)" "$(job_of plots) CANCELLED" "the failed stage's dependent was cancelled"
assert_contains "$OUT" "DependencyNeverSatisfied" "because its dependency can never be satisfied"
for s in meanstd train extract labels; do assert_contains "$OUT" "$(printf '%-8s' $s)" "$s listed"; done
assert_eq "$(grep -cE '^(meanstd|train|extract|labels) .* COMPLETED' <<<"$OUT")" 4 "the other stages completed"
train_out=$(cat "$RUN/logs/train_err_$(job_of train).err")
assert_contains "$train_out" "rank 1 of 2 on node2" "training ran on both nodes"
run "$P" logs pipeline.yaml knn -n 3 --stream err
assert_rc 0 "logs"
assert_contains "$OUT" "knn_err_$(job_of knn).err" "logs names the stage's file"
assert_contains "$OUT" "pcdino: stage knn failed with exit code 78" "logs shows its tail"
old_train=$(job_of train)

# --- 2. fix and resume --------------------------------------------------------------------------------
sed -i 's/n_neighbors: \[500\]/n_neighbors: [2, 5]/' pipeline.yaml
run "$P" resume pipeline.yaml
assert_rc 0 "resume"
assert_eq "$(grep -c ' job [0-9]' <<<"$OUT")" 2 "resume submits two jobs: $OUT"
assert_contains "$OUT" "knn      job" "kNN resubmitted"
assert_contains "$OUT" "plots    job" "plots resubmitted"
assert_eq "$(grep -c 'complete (configuration unchanged)' <<<"$OUT")" 4 "four stages skipped as complete"
run "$P" submit pipeline.yaml
assert_rc 75 "a second submit while jobs are queued"
assert_contains "$ERR" "still has jobs queued or running" "is refused with the reason"
wait_all 300
run "$P" status pipeline.yaml
assert_rc 0 "status after resume"
assert_eq "$(grep -c ' COMPLETED ' <<<"$OUT")" 6 "every stage COMPLETED: $OUT"
assert_eq "$(job_of train)" "$old_train" "training was not run again"
for f in mean_and_std_of_dataset.txt CLS_features/features.h5 kNN/global_kNN.txt kNN/knn.json plots/index.html \
  scDINO_ViTs/dino_vit/checkpoint.pth; do
  [ -s "$RUN/$f" ] && pass "$f written" || fail "$f missing"
done
for edge in meanstd:train train:extract extract:knn labels:knn knn:plots; do
  before=${edge%%:*} after=${edge##*:}
  end=$(when "$before" EndTime) start=$(when "$after" StartTime)
  [[ ! "$start" < "$end" ]] && pass "$after started ($start) after $before ended ($end)" ||
    fail "$after started at $start before $before ended at $end"
done
run "$P" resume pipeline.yaml
assert_rc 0 "resume with nothing left"
assert_contains "$OUT" "nothing submitted" "resume says every stage is complete"

# --- 3. requeue: the time-limit signal, then scontrol requeue ---------------------------------------
/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$W/data2" u8x1 3 60 >/dev/null
EPOCHS=6 DOWNSTREAM="$SLURM_SECTION" tiny_pipeline "$W/requeue.yaml" requeue "$W"
sed -i "s|$W/data\"|$W/data2\"|" "$W/requeue.yaml"
RUN="$W/out/requeue"
MODEL="$RUN/scDINO_ViTs/dino_vit"
run "$P" meanstd -c requeue.yaml --threads 1
assert_rc 0 "meanstd for the requeue run"
run "$P" submit requeue.yaml --stages train
assert_rc 0 "submit the training stage alone"
job=$(job_of train)
epochs_done() { [ -f "$MODEL/log.txt" ] && wc -l <"$MODEL/log.txt" || echo 0; }
wait_epochs() {  # wait_epochs N: until log.txt has N epochs
  local deadline=$((SECONDS + 120))
  while [ "$(epochs_done)" -lt "$1" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
}
release() {  # a requeued job waits ~2 min (BeginTime); let it start once its node has cleaned up
  local deadline=$((SECONDS + 60))
  until [ "$(squeue -h -j "$job" -o %r)" = BeginTime ] || [ $SECONDS -ge $deadline ]; do sleep 0.5; done
  until ! sinfo -h -N -o %T | grep -qv idle || [ $SECONDS -ge $deadline ]; do sleep 0.5; done
  sleep 5  # the previous start's step may still be torn down on the node: a step launched now fails
  scontrol update JobId="$job" StartTime=now
}
wait_epochs 1
scancel --signal=USR1 "$job"
release
wait_epochs 3
scontrol requeue "$job"
release
wait_all 300
err=$(cat "$RUN/logs/train_err_$job.err")
assert_contains "$err" "requeueing job $job" "on SIGUSR1 the job requeues itself after checkpointing"
assert_contains "$err" "(start 3)" "the job started three times"
assert_eq "$(grep -c 'resuming from' <<<"$err")" 2 "and resumed from its checkpoint twice"
assert_eq "$(scontrol show job -o "$job" | grep -o 'JobState=[A-Z]*')" "JobState=COMPLETED" "it completed"
# As in the job (slurm.cpus_per_task 1): one OpenBLAS thread, so the sums are taken in the same order.
run env SLURM_CPUS_PER_TASK=1 "$P" train -c requeue.yaml --threads 1 --device cpu --model-dir "$W/uninterrupted"
assert_rc 0 "the same training without interruption"
run torch_py - "$MODEL/checkpoint.pth" "$W/uninterrupted/checkpoint.pth" <<'PY'
import sys, torch
a, b = (torch.load(p, map_location="cpu") for p in sys.argv[1:3])
same = a["epoch"] == b["epoch"] == 6 and torch.equal(a["dino_loss"]["center"], b["dino_loss"]["center"])
for key in ("student", "teacher"):
    same = same and a[key].keys() == b[key].keys() and all(torch.equal(a[key][k], b[key][k]) for k in a[key])
print("identical" if same else "different")
sys.exit(0 if same else 1)
PY
assert_rc 0 "requeued twice, the weights equal the uninterrupted run's bit for bit ($OUT)"

# --- 4. cancel ---------------------------------------------------------------------------------------
run "$P" submit requeue.yaml --stages train --set train_scDINO.epochs=200
assert_rc 0 "submit a long training"
job=$(job_of train)
deadline=$((SECONDS + 60))
until [ "$(squeue -h -j "$job" -o %T)" = RUNNING ] || [ $SECONDS -ge $deadline ]; do sleep 0.5; done
run "$P" cancel requeue.yaml
assert_rc 0 "cancel"
assert_contains "$OUT" "cancelled train $job" "cancel names the job"
wait_all 60
run "$P" status requeue.yaml
assert_rc 1 "status after cancel"
assert_eq "$(state_of train)" "$job CANCELLED" "status: CANCELLED"
: >"$W/never.yaml"
run "$P" status "$W/never.yaml" --name-of-run never
assert_rc 66 "status of a run never submitted"
cluster_down
finish
