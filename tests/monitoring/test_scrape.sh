#!/usr/bin/env bash
# Issue #40, a real scrape: Debian's prometheus-node-exporter (its textfile collector on a test folder) and
# prometheus on 127.0.0.1 ports of their own, with pcdino's alert rules and a thresholds file of short
# windows. A two-rank training on the local cluster writes its metrics there; read back through
# Prometheus's HTTP API, each rank's pcdino_train_steps_total and its step-duration histogram's count equal
# the steps in the training's log, the collector reports no error, and `promtool check metrics` passes on
# every file written; the doctor's verdict per node arrives too. Then a longer training: rank 1 stopped with SIGSTOP makes PcdinoTrainingHung fire for
# rank 0 (blocked in the allreduce) and PcdinoMetricsStale for rank 1; resumed with SIGCONT both clear;
# killed with SIGKILL, rank 1's file stays and PcdinoMetricsStale catches it.
set -uo pipefail
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
W="$PCDINO_BUILD_DIR/test-work/monitoring"
rm -rf "$W" && mkdir -p "$W/jobs" "$W/textfile" "$W/rules" "$W/tsdb"
BASE=${TEST_CLUSTER_PORT:-19417}
EXPORTER="127.0.0.1:$((BASE + 50))" PROMETHEUS="127.0.0.1:$((BASE + 51))"
command -v prometheus-node-exporter >/dev/null && command -v prometheus >/dev/null ||
  fatal "needs Debian's prometheus and prometheus-node-exporter (scripts/install-deps)"

/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$W/data" u8x1 3 20 >/dev/null ||
  fatal "cannot write the synthetic dataset (python3-tifffile)"
METRICS=(--set "monitoring.textfile_dir=$W/textfile" --set monitoring.interval_seconds=1)
EPOCHS=3 tiny_pipeline "$W/short.yaml" short "$W"
run "$PCDINO_BIN" meanstd -c "$W/short.yaml" "${METRICS[@]}"
assert_rc 0 "meanstd, its metrics in the textfile folder"
# The long training: 60 steps an epoch (a checkpoint per epoch, not per 0.3 s), more epochs than it runs.
mkdir -p "$W/long" && mv "$W/data" "$W/long/data.short"
/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$W/long/data" u8x1 3 400 >/dev/null ||
  fatal "cannot write the synthetic dataset"
mv "$W/long/data.short" "$W/data"
EPOCHS=1000 tiny_pipeline "$W/long.yaml" long "$W/long"
run "$PCDINO_BIN" meanstd -c "$W/long.yaml"
assert_rc 0 "meanstd of the long training's images"

# The shipped rules, and thresholds that fire within seconds instead of minutes.
cp "$PCDINO_SOURCE_DIR/monitoring/rules/pcdino-alerts.yml" "$W/rules/"
sed -e 's/vector(240)/vector(12)/' -e 's/vector(120)/vector(6)/' \
  "$PCDINO_SOURCE_DIR/monitoring/rules/pcdino-thresholds.yml" >"$W/rules/thresholds.yml"
grep -q 'vector(12)' "$W/rules/thresholds.yml" && grep -q 'vector(6)' "$W/rules/thresholds.yml" ||
  fatal "the thresholds file no longer has the hung (240) and stale (120) values this test shortens"
cat >"$W/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["$W/rules/thresholds.yml", "$W/rules/pcdino-alerts.yml"]
scrape_configs:
  - job_name: node
    static_configs: [{targets: ["$EXPORTER"]}]
YAML
run promtool check config "$W/prometheus.yml"
assert_rc 0 "promtool check config: the test's prometheus.yml and pcdino's rules"

cluster_up "$W/cluster" "$BASE"
prometheus-node-exporter --web.listen-address="$EXPORTER" --collector.disable-defaults --collector.textfile \
  --collector.textfile.directory="$W/textfile" >"$W/exporter.log" 2>&1 &
beside_cluster $!
prometheus --config.file="$W/prometheus.yml" --storage.tsdb.path="$W/tsdb" --web.listen-address="$PROMETHEUS" \
  >"$W/prometheus.log" 2>&1 &
beside_cluster $!

# query PROMQL: the result vector as "labels value" lines, sorted (python reads the API's JSON).
query() {
  curl -sf --get "http://$PROMETHEUS/api/v1/query" --data-urlencode "query=$1" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
for s in sorted(r, key=lambda s: sorted(s["metric"].items())):
    m = s["metric"]
    print(",".join(f"{k}={m[k]}" for k in ("rank", "alertname", "alertstate") if k in m), s["value"][1])'
}
ready() { curl -sf "http://$PROMETHEUS/-/ready" >/dev/null && curl -sf "http://$EXPORTER/metrics" >/dev/null; }
wait_for 60 ready || fatal "Prometheus or the node exporter did not start: $(tail -n 5 "$W/prometheus.log" "$W/exporter.log")"
pass "node exporter and Prometheus up"

train() {  # train FILE: submits the two-rank training of FILE, prints its job id
  sbatch --parsable -N2 -n2 -o "$W/jobs/train_%j.out" --wrap "srun --mpi=pmix --kill-on-bad-exit=1 \
    '$PCDINO_BIN' train -c '$1' --threads 1 --device cpu --set monitoring.textfile_dir='$W/textfile' \
    --set monitoring.interval_seconds=1"
}

# --- 1. the counts, read back through Prometheus -------------------------------------------------
job=$(train "$W/short.yaml")
wait_job "$job" 300
assert_contains "$(cat "$W/jobs/train_$job.out")" "[rank 1/2] [info] trained 3 epochs" "short training ran"
ended() { [ "$(query "pcdino_job_end_timestamp_seconds{slurm_job_id=\"$job\"}" | wc -l)" -eq 2 ]; }
wait_for 60 ended || fail "Prometheus never saw both ranks' final files: $(ls "$W/textfile")"
steps=$(/usr/bin/python3 -c "import json,sys
print([json.loads(l) for l in open(sys.argv[1]) if '\"iteration\"' in l][-1]['iteration'])" \
  "$W/out/short/scDINO_ViTs/dino_vit/metrics.jsonl")
assert_eq "$(query "pcdino_train_steps_total{slurm_job_id=\"$job\"}")" "rank=0 $steps
rank=1 $steps" "pcdino_train_steps_total of each rank = the log's $steps steps"
assert_eq "$(query "pcdino_train_step_duration_seconds_count{slurm_job_id=\"$job\"}")" "rank=0 $steps
rank=1 $steps" "the step-duration histogram's count = the steps"
assert_eq "$(query "pcdino_train_samples_total{slurm_job_id=\"$job\"}")" "rank=0 $((steps * 8))
rank=1 $((steps * 8))" "samples: 8 images per step per rank"
assert_eq "$(query "count(pcdino_train_phase_seconds_total{slurm_job_id=\"$job\"} > 0)")" " 8" \
  "four phases of each rank timed"
assert_eq "$(query 'node_textfile_scrape_error')" " 0" "node_textfile_scrape_error is 0"
assert_eq "$(query 'pcdino_meanstd_images_total')" "rank=0 60" "mean/std: 60 images read"
for file in "$W"/textfile/*.prom; do
  run promtool check metrics <"$file"
  assert_rc 0 "promtool check metrics: $(basename "$file")"
done

# The doctor's verdict per node, and the bus bandwidth between them (rank 0). Both nodes share this host's
# two cores with Prometheus and the exporter, so one node's memory probe can read half the other's (a CI run
# drained node2 at 12.5 against 25.1 GB/s): the speed check reports but judges no node slow here
# (--slow-fraction 0); doctor.local_cluster tests that verdict.
run timeout 300 "$PCDINO_BIN" doctor --submit --nodes 2 --log "$W/jobs/doctor-%j.out" --shared-dir "$W" \
  --probe-mb 8 --scratch "" --manifest "" --answer-timeout 60 --textfile-dir "$W/textfile" --slow-fraction 0
assert_rc 0 "pcdino doctor on both nodes"
doctored() { [ "$(query 'pcdino_doctor_node_healthy' | wc -l)" -eq 2 ]; }
wait_for 30 doctored || fail "Prometheus never saw both nodes' verdicts"
assert_eq "$(query 'pcdino_doctor_node_healthy')" "rank=0 1
rank=1 1" "the doctor's verdict: both nodes healthy"
assert_eq "$(query 'count(pcdino_doctor_check_ok{check="shared_fs"} == 1)')" " 2" "each node's shared_fs check"
assert_eq "$(query 'pcdino_doctor_allreduce_busbw_bytes_per_second > 0' | cut -d' ' -f1)" "rank=0" \
  "rank 0: the allreduce bus bandwidth"

# --- 2. rank 1 stopped, then resumed, then killed ------------------------------------------------
job=$(train "$W/long.yaml")
stepping() { [ "$(query "pcdino_train_steps_total{slurm_job_id=\"$job\"} > 5" | wc -l)" -eq 2 ]; }
wait_for 180 stepping || fatal "the long training never stepped: $(tail -n 5 "$W/jobs/train_$job.out")"
rank1=$(node_pids node2)
[ -n "$rank1" ] || fatal "no rank on node2"
kill -STOP "$rank1"
pass "rank 1 (pid $rank1, node2) stopped"
firing() {  # firing ALERT RANK: the alert fires for that rank of the job
  query "ALERTS{alertname=\"$1\",alertstate=\"firing\",slurm_job_id=\"$job\",rank=\"$2\"}" | grep -q .
}
start=$SECONDS
wait_for 150 firing PcdinoTrainingHung 0 &&
  pass "PcdinoTrainingHung fires for rank 0 ($((SECONDS - start)) s after the stop; hung after 12 s, for: 30s)" ||
  fail "PcdinoTrainingHung never fired: $(query "ALERTS{slurm_job_id=\"$job\"}")"
firing PcdinoMetricsStale 1 && pass "PcdinoMetricsStale fires for the stopped rank 1" ||
  fail "PcdinoMetricsStale not firing for rank 1: $(query "ALERTS{slurm_job_id=\"$job\"}")"
curl -sf "http://$PROMETHEUS/api/v1/alerts" | grep -q '"alertname":"PcdinoTrainingHung"' &&
  pass "/api/v1/alerts lists it" || fail "/api/v1/alerts does not list PcdinoTrainingHung"
kill -CONT "$rank1"
quiet() { [ -z "$(query "ALERTS{alertstate=\"firing\",slurm_job_id=\"$job\"}")" ]; }
wait_for 60 quiet && pass "resumed (SIGCONT): every alert of the job clears" ||
  fail "alerts still firing after SIGCONT: $(query "ALERTS{slurm_job_id=\"$job\"}")"
kill -KILL "$rank1"
wait_for 120 firing PcdinoMetricsStale 1 && pass "killed (SIGKILL): PcdinoMetricsStale catches rank 1's file" ||
  fail "PcdinoMetricsStale never fired for the killed rank: $(query "ALERTS{slurm_job_id=\"$job\"}")"
grep -q pcdino_job_end_timestamp_seconds "$W/textfile/pcdino_${job}_1.prom" &&
  fail "the killed rank's file says it ended" || pass "the killed rank's file does not say it ended"
scancel "$job"
wait_job "$job" 120
finish
