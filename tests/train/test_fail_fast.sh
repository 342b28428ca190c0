#!/usr/bin/env bash
# Integration (issue #5): a two-node training job never hangs on a lost rank. (1) Rank 1 killed with
# SIGKILL mid-training: srun --kill-on-bad-exit ends the job at once and names the task; a resubmission
# resumes from the last checkpoint. (2) Rank 1 stopped (SIGSTOP: alive but silent, as a hung node): rank
# 0's watchdog ends it after --comm-timeout with a message, and the job ends. The timeout (30 s) leaves
# room for rank 0's checkpoint write at an epoch's end, which the other rank waits for, on a busy disk.
# Waits for a job to get somewhere are sized for a machine 3x slower than the 2-core one this was
# written on, under a parallel ctest (issue #38: 120 s once ran out there); they end as soon as it gets
# there. The bounds on how fast a job ends after its rank is lost stay tight: they are the behaviour.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
W="$PCDINO_BUILD_DIR/test-work/fail_fast"
rm -rf "$W" && mkdir -p "$W/jobs"

/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$W/data" u8x1 3 100 >/dev/null ||
  fatal "cannot write the synthetic dataset (python3-tifffile)"
EPOCHS=200 tiny_pipeline "$W/pipeline.yaml" ff "$W"
run "$PCDINO_BIN" meanstd -c "$W/pipeline.yaml"
assert_rc 0 "meanstd"
LOG="$W/out/ff/scDINO_ViTs/dino_vit/log.txt"

cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-18317}"
submit() {  # submit NAME: a two-node training job
  sbatch --parsable -N2 -n2 -o "$W/jobs/$1_%j.out" --wrap "srun --kill-on-bad-exit=1 --mpi=pmix \
    '$PCDINO_BIN' train -c '$W/pipeline.yaml' --threads 1 --device cpu --comm-timeout 30"
}
rank_pid() {  # the pid of the pcdino-train process of Slurm task $1
  local pid
  for pid in $(pgrep -f "pcdino-train.*$W/pipeline.yaml"); do
    if env_has "$pid" "SLURM_PROCID=$1"; then
      echo "$pid"
      return
    fi
  done
}

# 1. SIGKILL.
job=$(submit kill)
wait_for 540 epochs_logged "$W/out/ff" 2 || fatal "the job did not train two epochs: $(cat "$W/jobs/kill_$job.out")"
wait_for 120 eval 'pid=$(rank_pid 1); [ -n "$pid" ]' || fatal "no process of rank 1: $(cat "$W/jobs/kill_$job.out")"
kill -KILL "$pid"
start=$SECONDS
wait_job "$job" 240
elapsed=$((SECONDS - start))
[ "$elapsed" -le 45 ] && pass "the job ended ${elapsed} s after rank 1 died" ||
  fail "the job took ${elapsed} s to end after rank 1 died"
assert_contains "$(cat "$W/jobs/kill_$job.out")" "task 1: Killed" "srun names the lost rank"
done_epochs=$(wc -l <"$LOG")

job=$(submit resume)
wait_for 360 grep -qs "resuming from" "$W/jobs/resume_$job.out" || fail "the resubmitted job did not resume"
assert_contains "$(cat "$W/jobs/resume_$job.out")" "at epoch $done_epochs" "it resumes after the last finished epoch"
scancel "$job"
wait_job "$job" 180

# 2. SIGSTOP: alive but silent.
job=$(submit stop)
wait_for 360 grep -qs "epoch .*: loss" "$W/jobs/stop_$job.out" || fatal "the job did not start training"
wait_for 120 eval 'pid=$(rank_pid 1); [ -n "$pid" ]' ||
  fatal "no process of rank 1: $(squeue -j "$job" 2>&1; cat "$W/jobs/stop_$job.out")"
kill -STOP "$pid"
start=$SECONDS
wait_job "$job" 240
elapsed=$((SECONDS - start))
[ "$elapsed" -le 75 ] && pass "the job ended ${elapsed} s after rank 1 stopped answering (timeout 30 s)" ||
  fail "the job took ${elapsed} s to end after rank 1 stopped"
assert_contains "$(cat "$W/jobs/stop_$job.out")" "rank 0 of 2: no progress for 30 s" "rank 0's watchdog says why"
kill -KILL "$pid" 2>/dev/null
cluster_down
finish
