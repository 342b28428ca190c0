#!/usr/bin/env bash
# Issue #62, Slurm's own metrics beside pcdino's, on a real Slurm 25.11 (scripts/stack slurm25.11; an older
# Slurm skips: exit 77). The local cluster turns on MetricsType=metrics/openmetrics; a job takes node1 whole
# (--exclusive), whose prolog (pcdino's node check) writes pcdino's series for the job on that node. `curl`
# reads slurmctld's /metrics/nodes (and /metrics/jobs, /partitions, /scheduler) on the cluster's slurmctld
# port: every node of `sinfo` has its lines, each node's CPUs say what `sinfo` says of it (allocated, idle), the
# per-state counts equal sinfo's, a drained node is counted, and `promtool check metrics` passes on each
# scrape. Then a real Prometheus with the `slurm-*` scrape jobs that `pcdino cluster generate` writes for a
# ParallelCluster 3.16.3 head node (the target and interval pointed at this cluster, nothing else changed)
# and pcdino's files: the dashboard's "Slurm state of the job's nodes" query, as the dashboard holds it, gives
# node1 allocated and no other node; its "Nodes out of service" query counts the drained node.
# On Slurm 26.05 and later, with and without MetricsAuthUsers (issue #74): the cluster again with
# --metrics-auth-users pcdino-user-a; each of two unprivileged users asks slurmctld for its own token (scontrol
# token): no token gets 401, the unlisted user's 403, the listed user's the metrics, and Prometheus with that
# token as its Bearer credentials scrapes the four endpoints while a job without it is down.
set -uo pipefail
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/users.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"

command -v slurmd >/dev/null || { echo "skip: no slurmd on PATH"; exit 77; }
release=$(slurm_release)
if ! slurm_at_least 25.11; then
  echo "skip: Slurm $release has no metrics plugin (25.11 and later: scripts/stack slurm25.11 test)"
  exit 77
fi
for tool in prometheus promtool curl /usr/bin/python3; do
  command -v "$tool" >/dev/null || fatal "needs $tool (scripts/install-deps slurm-source: curl, prometheus)"
done

W="$PCDINO_BUILD_DIR/test-work/slurm_metrics"
rm -rf "$W" && mkdir -p "$W/scrape" "$W/tsdb"
BASE=${TEST_CLUSTER_PORT:-19317}
SLURMCTLD="127.0.0.1:$BASE" PROMETHEUS="127.0.0.1:$((BASE + 51))" FILES="127.0.0.1:$((BASE + 52))"

# --- 1. what the generator writes for a ParallelCluster 3.16.3 (Slurm 25.11.8) head node ----------------------
cat >"$W/site.yaml" <<'YAML'
name: metrics
region: us-east-1
availability_zone: us-east-1a
parallelcluster_version: 3.16.3
head_node: {ssh_allowed_cidr: 203.0.113.0/24}
image: {os: ubuntu2204, custom_ami: ami-0123456789abcdef0}
queues: [{name: q, instance_type: c5.xlarge}]
monitoring: {prometheus: {s3_prefix: s3://bkt/monitoring}}
YAML
run "$PCDINO_BIN" cluster generate "$W/site.yaml" --out "$W/generated"
assert_rc 0 "pcdino cluster generate, monitoring.prometheus on ParallelCluster 3.16.3"
assert_contains "$(cat "$W/generated/cluster-config.yaml")" "- MetricsType: metrics/openmetrics" \
  "CustomSlurmSettings turn on slurmctld's metrics"
# The slurm-* jobs close scrape_configs; only their target and interval change here.
sed -n '/^  - job_name: slurm-/,$p' "$W/generated/prometheus.yml" >"$W/slurm-jobs.yml"
assert_eq "$(grep -c 'targets: \["localhost:6820"\]' "$W/slurm-jobs.yml")" 4 \
  "four slurm-* jobs on the head node's SlurmctldPort (6820)"
sed -i -e "s/localhost:6820/$SLURMCTLD/" -e 's/scrape_interval: 30s/scrape_interval: 1s/' "$W/slurm-jobs.yml"

# --- 2. the local cluster on Slurm 25.11 and a job that takes node1 whole ------------------------------------
cluster_up "$W/cluster" "$BASE"
assert_contains "$(cat "$SLURM_CONF")" "MetricsType=metrics/openmetrics" "local-cluster's slurm.conf on $release"
job=$(sbatch --parsable -N1 -w node1 --exclusive -o "$W/job_%j.out" --wrap 'sleep 600')
[ -n "$job" ] || fatal "sbatch failed"
running() { [ "$(squeue -h -j "$job" -o %T)" = RUNNING ]; }
wait_for 120 running || fatal "job $job never ran: $(squeue -j "$job")"
pass "job $job runs on node1 (--exclusive)"
mapfile -t nodes < <(sinfo -h -N -o '%N' | sort -u)
[ ${#nodes[@]} -ge 2 ] || fatal "expected two nodes or more, sinfo: ${nodes[*]}"

# --- 3. curl: slurmctld's own endpoints on its port ---------------------------------------------------------
scrape() {  # scrape PATH FILE [TOKEN_FILE]: HTTP status of GET PATH on slurmctld's port, the body in FILE;
  local auth=()  # with TOKEN_FILE's JWT as the Bearer token
  [ -z "${3:-}" ] || auth=(-H "Authorization: Bearer $(<"$3")")
  curl -s -o "$2" -w '%{http_code}' "${auth[@]}" "http://$SLURMCTLD$1"
}
assert_eq "$(scrape /metrics "$W/scrape/index.txt")" 200 "GET /metrics"
for path in nodes jobs partitions scheduler; do
  assert_contains "$(cat "$W/scrape/index.txt")" "'/metrics/$path'" "slurmctld lists /metrics/$path"
  assert_eq "$(scrape "/metrics/$path" "$W/scrape/$path.txt")" 200 "curl /metrics/$path"
  run promtool check metrics <"$W/scrape/$path.txt"
  assert_rc 0 "promtool check metrics: /metrics/$path"
done
# value FILE SERIES: the value of one series line of a scrape ("" if none).
value() { awk -v s="$2" '$1 == s { print $2 }' "$1"; }
N="$W/scrape/nodes.txt"
for n in "${nodes[@]}"; do
  cpus=$(value "$N" "slurm_node_cpus_effective{node=\"$n\"}")
  alloc=$(value "$N" "slurm_node_cpus_alloc{node=\"$n\"}")
  if [ -z "$cpus" ] || [ -z "$alloc" ]; then
    fail "/metrics/nodes has no slurm_node_cpus_* line of $n"
    continue
  fi
  if [ "$alloc" -eq 0 ]; then seen=idle; elif [ "$alloc" -ge "$cpus" ]; then seen=allocated; else seen=mixed; fi
  assert_eq "$seen" "$(sinfo -h -n "$n" -o %T | head -n 1)" \
    "$n: its CPUs ($alloc of $cpus allocated) say what sinfo says"
done
assert_eq "$(value "$N" slurm_nodes)" "${#nodes[@]}" "slurm_nodes: every node of sinfo"
assert_eq "$(value "$N" slurm_nodes_alloc)" 1 "slurm_nodes_alloc: node1"
assert_eq "$(value "$N" slurm_nodes_idle)" "$((${#nodes[@]} - 1))" "slurm_nodes_idle: the others"
assert_eq "$(value "$W/scrape/jobs.txt" slurm_jobs_running)" 1 "/metrics/jobs: one job running"
assert_eq "$(value "$W/scrape/partitions.txt" 'slurm_partition_nodes_alloc{partition="local"}')" 1 \
  "/metrics/partitions: node1 allocated in partition local"
scontrol update nodename=node2 state=drain reason="test_slurm_metrics" || fatal "cannot drain node2"
scrape /metrics/nodes "$N" >/dev/null
assert_eq "$(value "$N" slurm_nodes_drained)" 1 "a drained node2 is counted (slurm_nodes_drained)"
assert_eq "$(value "$N" 'slurm_node_cpus_alloc{node="node2"}')" 0 \
  "node2's own lines stay those of an idle node (Slurm 25.11 exports no per-node state)"

# --- 4. a real Prometheus: the generator's slurm-* jobs and pcdino's files -----------------------------------
# node1's prolog wrote pcdino's series for the job (the node check, as on a ParallelCluster node).
T="$LOCAL_CLUSTER_DIR/textfile"
written() { grep -q "slurm_job_id=\"$job\"" "$T/pcdino_node_check_node1.prom" 2>/dev/null; }
wait_for 60 written || fatal "no pcdino series of job $job from node1's prolog: $(ls "$T")"
pass "node1's prolog wrote pcdino's series of job $job"
# The node exporter's textfile collector leaves a file's series as they are, as this server does (the 25.11
# root has no node exporter): one target per file, named by its node.
/usr/bin/python3 - "${FILES%:*}" "${FILES#*:}" "$T" <<'PY' >"$W/files.log" 2>&1 &
import http.server, os, sys
host, port, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
class Files(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        try:
            body = open(os.path.join(folder, os.path.basename(self.path)), "rb").read()
        except OSError:
            return self.send_error(404)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer((host, port), Files).serve_forever()
PY
beside_cluster $!
{
  printf 'global:\n  scrape_interval: 1s\nscrape_configs:\n'
  cat "$W/slurm-jobs.yml"
  printf '  - job_name: pcdino\n    static_configs:\n'
  for n in "${nodes[@]}"; do
    printf '      - targets: ["%s"]\n' "$FILES"
    printf '        labels: {instance: %s, __metrics_path__: /pcdino_node_check_%s.prom}\n' "$n" "$n"
  done
} >"$W/prometheus.yml"
run promtool check config "$W/prometheus.yml"
assert_rc 0 "promtool check config: the generator's slurm-* jobs and pcdino's"
prometheus --config.file="$W/prometheus.yml" --storage.tsdb.path="$W/tsdb" --web.listen-address="$PROMETHEUS" \
  >"$W/prometheus.log" 2>&1 &
beside_cluster $!
ready() { curl -sf "http://$PROMETHEUS/-/ready" >/dev/null; }
wait_for 60 ready || fatal "Prometheus did not start: $(tail -n 5 "$W/prometheus.log")"

# query PROMQL: the result vector as "node value" lines (or "job value"), sorted.
query() {
  curl -sf --get "http://$PROMETHEUS/api/v1/query" --data-urlencode "query=$1" | /usr/bin/python3 -c '
import json, sys
for s in sorted(json.load(sys.stdin)["data"]["result"], key=lambda s: sorted(s["metric"].items())):
    m = s["metric"]
    print(m.get("node", m.get("job", "")), s["value"][1])'
}
# panel TITLE REFID: that query of the dashboard's panel, for this job.
panel() {
  /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print([t["expr"] for p in d["panels"] if p["title"] == sys.argv[2]
       for t in p["targets"] if t["refId"] == sys.argv[3]][0])' \
    "$PCDINO_SOURCE_DIR/monitoring/grafana/pcdino-job.json" "$1" "$2" | sed "s/\$slurm_job_id/$job/g"
}
up() { [ "$(query 'sum(up{job=~"slurm-.*|pcdino"})')" = " $((4 + ${#nodes[@]}))" ]; }
wait_for 60 up && pass "Prometheus scrapes slurmctld's four endpoints and pcdino's files" ||
  fail "targets not up: $(query 'up')"
state=$(panel "Slurm state of the job's nodes" A)
assert_contains "$state" "slurm_node_cpus_alloc" "the panel reads slurmctld's node metrics"
has_state() { [ -n "$(query "$state")" ]; }
wait_for 30 has_state || fail "the panel's query gives nothing: $state"
assert_eq "$(query "$state")" "node1 2" "the dashboard's panel: job $job's node, node1, allocated (2)"
out_of_service=$(panel "Nodes out of service (whole cluster)" B)
assert_eq "$(query "$out_of_service")" "slurm-nodes 1" "the dashboard's drained count: node2"

scancel "$job"
wait_job "$job" 120

# --- 5. MetricsAuthUsers (Slurm 26.05): the same endpoints for the listed users' tokens only -------------------
if ! slurm_at_least 26.05; then
  assert_not_contains "$(cat "$SLURM_CONF")" "MetricsAuthUsers" "no MetricsAuthUsers in Slurm $release's slurm.conf"
  echo "MetricsAuthUsers: Slurm $release has none (26.05 and later); its /metrics answered without a token above"
  finish
  exit
fi
# Two unprivileged users: the listed one and another; each asks slurmctld for its own token (scontrol token,
# auth/munge) and reads /metrics/nodes with it as the Bearer token, as a head node's Prometheus would.
test_users
cluster_down
# A cluster of its own: the first one kept node2 drained in its saved state.
LOCAL_CLUSTER_METRICS_AUTH_USERS=$USER_A cluster_up "$W/cluster-auth" "$BASE"
assert_eq "$(scontrol show config | awk -F' = ' '$1 ~ /^MetricsAuthUsers/ {print $2}')" "$USER_A" \
  "scontrol show config: MetricsAuthUsers = $USER_A on Slurm $release"
# token USER FILE: USER's own JWT from scontrol token, in FILE (as Prometheus's credentials_file reads it).
token() {
  user_do "$1" scontrol token lifespan=600
  [ "$RC" -eq 0 ] && [[ "$OUT" == SLURM_JWT=* ]] || fatal "scontrol token as $1: exit $RC: $OUT $ERR"
  printf '%s' "${OUT#SLURM_JWT=}" >"$2"
}
token "$USER_A" "$W/token-a"
token "$USER_B" "$W/token-b"
assert_eq "$(scrape /metrics/nodes "$W/scrape/anonymous.txt")" 401 "no token: /metrics/nodes refused (401)"
assert_eq "$(scrape /metrics/nodes "$W/scrape/user-b.txt" "$W/token-b")" 403 "$USER_B's token, not listed: refused (403)"
assert_eq "$(scrape /metrics/nodes "$W/scrape/user-a.txt" "$W/token-a")" 200 "$USER_A's token, listed: /metrics/nodes"
assert_eq "$(value "$W/scrape/user-a.txt" slurm_nodes)" "${#nodes[@]}" "$USER_A reads slurm_nodes: every node"
# Prometheus with the generator's slurm-* jobs given USER_A's token, and one job without a token.
{
  printf 'global:\n  scrape_interval: 1s\nscrape_configs:\n'
  sed "s|^    static_configs:|    authorization: {credentials_file: $W/token-a}\n&|" "$W/slurm-jobs.yml"
  printf '  - job_name: anonymous\n    metrics_path: /metrics/nodes\n    static_configs:\n'
  printf '      - targets: ["%s"]\n' "$SLURMCTLD"
} >"$W/prometheus-auth.yml"
run promtool check config "$W/prometheus-auth.yml"
assert_rc 0 "promtool check config: the slurm-* jobs with a Bearer token"
rm -rf "$W/tsdb" && mkdir -p "$W/tsdb"
prometheus --config.file="$W/prometheus-auth.yml" --storage.tsdb.path="$W/tsdb" \
  --web.listen-address="$PROMETHEUS" >"$W/prometheus-auth.log" 2>&1 &
beside_cluster $!
wait_for 60 ready || fatal "Prometheus did not start: $(tail -n 5 "$W/prometheus-auth.log")"
scraped() { [ -n "$(query 'up{job="anonymous"}')" ] && [ "$(query 'sum(up{job=~"slurm-.*"})')" = " 4" ]; }
wait_for 60 scraped && pass "Prometheus scrapes slurmctld's four endpoints with $USER_A's token" ||
  fail "slurm-* targets not up with the token: $(query 'up')"
assert_eq "$(query 'up{job="anonymous"}')" "anonymous 0" "the same endpoint without a token is down for Prometheus"
finish
