#!/usr/bin/env bash
# Integration: `pcdino cluster generate` on the three example site specs writes what is checked in under
# cluster/examples/, YAML that Debian's yamllint accepts (strict), scripts shellcheck accepts, no finding
# even with --strict; the workshop's GPU mismatch (jobs asking --gres=gpu:4 of a 1-GPU g4dn.2xlarge) fails
# with exit code 78; ParallelCluster's minimal example has policy findings only; commands.sh refuses
# another pcluster release, uploads head-node.sh (and compute-node.sh) and runs `create-cluster --dryrun
# true` before the real call; an image spec for another OS than the cluster's is refused;
# monitoring.prometheus gives a head-node.sh
# whose prometheus.yml passes promtool and loads pcdino's rules in a real Prometheus, refused without a package,
# and whose --remove takes back what it wrote. Issue #71: a refused configuration writes nothing (an earlier
# accepted run's files stay as they were); an image spec of another region is refused; Amazon Linux 2 past
# its end of support is a policy finding of generate (fatal with --strict) and a warning of `ami check`;
# teardown.sh asks first, prints its commands with --dry-run, and deletes in reverse order exactly what
# commands.sh made.
source "$(dirname "$0")/../lib/assert.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
W="$PCDINO_BUILD_DIR/test-work/cluster_examples"
rm -rf "$W" && mkdir -p "$W"
EX="$PCDINO_SOURCE_DIR/cluster/examples"

for name in workshop p5-efa cpu-only; do
  run "$PCDINO_BIN" cluster generate "$EX/$name.yaml" --out "$W/$name" --strict
  assert_rc 0 "$name: generate with no validator errors or policy findings (--strict)"
  run yamllint -s "$W/$name/cluster-config.yaml" "$W/$name/network.yaml"
  assert_rc 0 "$name: yamllint (strict) on cluster-config.yaml and network.yaml"
  run shellcheck "$W/$name"/*.sh
  assert_rc 0 "$name: shellcheck commands.sh (and head-node.sh)"
  run diff -r "$EX/$name" "$W/$name"
  assert_rc 0 "$name: cluster/examples/$name is what the generator writes now"
done

cat >"$W/workshop-pipeline.yaml" <<'YAML'
meta:
  dataset_dir: /fsx/DeepPhenotype_PBMC_ImageSet_YSeverin/Training
train_scDINO:
  num_gpus: 4
  nnodes: 2
  num_workers: 1
YAML
run "$PCDINO_BIN" cluster generate "$EX/workshop.yaml" --out "$W/mismatch" --pipeline "$W/workshop-pipeline.yaml"
assert_rc 78 "the workshop's pipeline does not fit its queue"
assert_contains "$OUT" "train_scDINO.num_gpus asks for 4 GPUs per node (--gres=gpu:4) but g4dn.2xlarge has 1" \
  "the GPU mismatch is named"
assert_contains "$OUT" "Scheduling.SlurmQueues[0].ComputeResources[0].InstanceType" "with the configuration's key path"
[ ! -e "$W/mismatch" ]
assert_eq "$?" 0 "a refused configuration writes nothing: no commands.sh to run"
assert_contains "$ERR" "nothing written to $W/mismatch" "and says so"
# Into a folder that an accepted run filled: its files stay as they were.
cp -r "$EX/workshop" "$W/kept"
sums() { (cd "$1" && md5sum -- * | sort); }
kept=$(sums "$W/kept")
run "$PCDINO_BIN" cluster generate "$EX/workshop.yaml" --out "$W/kept" --pipeline "$W/workshop-pipeline.yaml"
assert_rc 78 "refused again, into the folder of an accepted run"
assert_contains "$ERR" "nothing written to $W/kept (it keeps the files of its last accepted run)" "saying what it holds"
assert_eq "$(sums "$W/kept")" "$kept" "the accepted run's files are untouched"

sed "s/instance_type: g4dn.2xlarge/instance_type: g4dn.12xlarge/; s|ami_spec: ../..|ami_spec: $PCDINO_SOURCE_DIR|" \
  "$EX/workshop.yaml" >"$W/fixed.yaml"
run "$PCDINO_BIN" cluster generate "$W/fixed.yaml" --out "$W/fixed" --pipeline "$W/workshop-pipeline.yaml"
assert_rc 0 "with 4-GPU g4dn.12xlarge nodes it fits"
# ParallelCluster's minimal example: no error, three pcdino policy findings that fail only with --strict.
run "$PCDINO_BIN" cluster validate "$PCDINO_SOURCE_DIR/tests/cluster/pcluster-slurm.required.yaml"
assert_rc 0 "ParallelCluster's slurm.required.yaml has no error"
assert_contains "$OUT" "0 error(s), 3 policy, 0 warning(s)" "its policy findings are counted apart"
run "$PCDINO_BIN" cluster validate --strict "$PCDINO_SOURCE_DIR/tests/cluster/pcluster-slurm.required.yaml"
assert_rc 78 "policy findings fail with --strict"
# A generated template is a configuration only once rendered.
run "$PCDINO_BIN" cluster validate "$EX/workshop/cluster-config.yaml"
assert_rc 78 "unrendered placeholders are errors"
assert_contains "$OUT" "HeadNode.Networking.SubnetId: '\${PUBLIC_SUBNET_ID}' is an unrendered template placeholder" \
  "named with their key path"
run "$PCDINO_BIN" cluster validate --template --strict "$EX/workshop/cluster-config.yaml"
assert_rc 0 "as a template it passes --strict"

# commands.sh against stand-ins for the two cloud CLIs (no AWS account here): `pcluster version` prints
# what ParallelCluster prints (v3.11.1 cli/commands/version.py: json.dumps({"version": ...}, indent=2)),
# and every call is logged. envsubst is the real one.
mkdir -p "$W/bin"
cat >"$W/bin/pcluster" <<'SH'
#!/bin/sh
echo "pcluster $*" >>"$CALLS"
[ "$1" = version ] && printf '{\n  "version": "%s"\n}\n' "$FAKE_PCLUSTER_VERSION"
[ "$1" = describe-cluster ] && exit "${FAKE_DESCRIBE_RC:-0}"
exit 0
SH
cat >"$W/bin/aws" <<'SH'
#!/bin/sh
echo "aws $*" >>"$CALLS"
case "$*" in *describe-stacks*) echo "subnet-0123456789abcdef0" ;; esac
SH
chmod +x "$W/bin/pcluster" "$W/bin/aws"
cp -r "$EX/p5-efa" "$W/commands"
export CALLS="$W/calls.log"
FAKE_PCLUSTER_VERSION=3.11.1 PATH="$W/bin:$PATH" run "$W/commands/commands.sh"
assert_rc 69 "commands.sh refuses a pcluster of another release"
assert_contains "$ERR" "this configuration is for pcluster 3.16.3, found '3.11.1'" "naming both releases"
assert_eq "$(cat "$CALLS")" "pcluster version" "and calls nothing else"
rm -f "$CALLS"
FAKE_PCLUSTER_VERSION=3.16.3 PATH="$W/bin:$PATH" run "$W/commands/commands.sh"
assert_rc 0 "commands.sh with pcluster 3.16.3"
assert_eq "$(grep -c '^pcluster create-cluster' "$CALLS")" 2 "create-cluster runs twice"
assert_contains "$(grep '^pcluster create-cluster' "$CALLS" | head -1)" "--dryrun true" "first as a dry run"
upload=$(grep -n '^aws s3 cp' "$CALLS" | tail -n 1 | cut -d: -f1)
create=$(grep -n '^pcluster create-cluster' "$CALLS" | head -n 1 | cut -d: -f1)
[ -n "$upload" ] && [ "$upload" -lt "$create" ]
assert_eq "$?" 0 "head-node.sh and compute-node.sh are uploaded before the cluster is created"
assert_contains "$(cat "$CALLS")" "aws s3 cp --region us-east-1 head-node.sh s3://research-bucket/pcluster/pcdino/head-node.sh" \
  "to the spec's s3_prefix"
assert_contains "$(cat "$CALLS")" \
  "aws s3 cp --region us-east-1 compute-node.sh s3://research-bucket/pcluster/pcdino/compute-node.sh" \
  "compute-node.sh beside it (containers)"
assert_not_contains "$(grep '^pcluster create-cluster' "$CALLS" | tail -1)" "--dryrun" "then for real"
assert_not_contains "$(grep -v '^#' "$W/commands/cluster-config.rendered.yaml")" "\${" \
  "the rendered configuration has no placeholder left"
uploaded=$(sed -n 's/^aws s3 cp --region us-east-1 [^ ]* //p' "$CALLS")

# teardown.sh against the same stand-ins: nothing without the cluster's name; --dry-run calls nothing; then
# newest first what commands.sh made, the uploaded objects and nothing else of the bucket.
rm -f "$CALLS"
PATH="$W/bin:$PATH" run bash -c "echo dino-other | '$W/commands/teardown.sh'"
assert_rc 64 "teardown.sh without the cluster's name"
assert_contains "$ERR" "not confirmed: nothing deleted" "says so"
assert_contains "$OUT" "the FSx for Lustre file system it made at /fsx (DeletionPolicy Delete" "after saying what it deletes"
[ ! -e "$CALLS" ]
assert_eq "$?" 0 "and calls nothing"
PATH="$W/bin:$PATH" run "$W/commands/teardown.sh" --dry-run
assert_rc 0 "teardown.sh --dry-run"
assert_contains "$OUT" "+ pcluster delete-cluster --region us-east-1 --cluster-name dino-p5" "prints the commands"
[ ! -e "$CALLS" ]
assert_eq "$?" 0 "and calls nothing"
PATH="$W/bin:$PATH" run bash -c "echo dino-p5 | '$W/commands/teardown.sh'"
assert_rc 0 "teardown.sh, confirmed with the cluster's name"
assert_eq "$(cat "$CALLS")" "pcluster describe-cluster --region us-east-1 --cluster-name dino-p5
pcluster delete-cluster --region us-east-1 --cluster-name dino-p5
aws cloudformation wait stack-delete-complete --region us-east-1 --stack-name dino-p5
aws s3 rm --region us-east-1 s3://research-bucket/pcluster/pcdino/head-node.sh
aws s3 rm --region us-east-1 s3://research-bucket/pcluster/pcdino/compute-node.sh
aws cloudformation delete-stack --region us-east-1 --stack-name dino-p5-network
aws cloudformation wait stack-delete-complete --region us-east-1 --stack-name dino-p5-network" \
  "the cluster (waiting for its stack), the uploads, the network stack (waiting), in that order"
assert_eq "$(sed -n 's/^aws s3 rm --region us-east-1 //p' "$CALLS")" "$uploaded" "the objects removed are those commands.sh uploaded"
rm -f "$CALLS"
FAKE_DESCRIBE_RC=1 PATH="$W/bin:$PATH" run "$W/commands/teardown.sh" --yes
assert_rc 0 "teardown.sh --yes when the cluster is gone already"
assert_contains "$OUT" "no cluster dino-p5 in us-east-1 (deleted already?)" "says so"
assert_not_contains "$(cat "$CALLS")" "delete-cluster" "and deletes the rest only"

# The image spec must be built for the cluster's release and OS.
sed "s/os: ubuntu2204/os: alinux2023/" "$PCDINO_SOURCE_DIR/ami/examples/current.yaml" >"$W/other-image.yaml"
sed "s|ami_spec: .*|ami_spec: $W/other-image.yaml|" "$EX/p5-efa.yaml" >"$W/p5-other-os.yaml"
run "$PCDINO_BIN" cluster generate "$W/p5-other-os.yaml" --out "$W/other-os"
assert_rc 78 "generate refuses an image built for another OS"
assert_contains "$ERR" "builds for ParallelCluster 3.16.3 on alinux2023 in us-east-1, the cluster is ParallelCluster 3.16.3 on ubuntu2204 in us-east-1" \
  "naming both"
assert_eq "$(ls "$W/other-os" 2>/dev/null)" "" "and writes nothing"
# An AMI lives in one region: an image spec of another region is refused too.
sed "s/^region: us-east-1/region: us-west-2/" "$PCDINO_SOURCE_DIR/ami/examples/current.yaml" >"$W/other-region.yaml"
sed "s|ami_spec: .*|ami_spec: $W/other-region.yaml|" "$EX/p5-efa.yaml" >"$W/p5-other-region.yaml"
run "$PCDINO_BIN" cluster generate "$W/p5-other-region.yaml" --out "$W/other-region"
assert_rc 78 "generate refuses an image built in another region"
assert_contains "$ERR" "on ubuntu2204 in us-west-2, the cluster is ParallelCluster 3.16.3 on ubuntu2204 in us-east-1" \
  "naming both regions"
# Amazon Linux 2: its end of support (2026-06-30, in the release table) is a policy finding once past: the
# configuration is written without --strict, refused with it; before that date a warning.
sed 's/os: ubuntu2204/os: alinux2/; /ami_spec:/d' "$EX/workshop.yaml" >"$W/workshop-al2.yaml"
if [[ $(date -u +%F) > 2026-06-30 ]]; then al2=policy; else al2=warning; fi
run "$PCDINO_BIN" cluster generate "$W/workshop-al2.yaml" --out "$W/al2"
assert_rc 0 "generate on Amazon Linux 2 without --strict"
assert_contains "$OUT" "$al2: workshop-al2.yaml: image.os: alinux2's vendor support" "an OS past its end of support is named"
assert_contains "$OUT" "on 2026-06-30: no security updates after it" "with its date"
run "$PCDINO_BIN" cluster generate "$W/workshop-al2.yaml" --out "$W/al2-strict" --strict
if [ "$al2" = policy ]; then
  assert_rc 78 "and refused with --strict"
  [ ! -e "$W/al2-strict" ]
  assert_eq "$?" 0 "writing nothing"
fi
run "$PCDINO_BIN" ami check "$PCDINO_SOURCE_DIR/ami/examples/workshop.yaml"
assert_rc 0 "ami check warns of Amazon Linux 2, it does not refuse the old workshop's image"
assert_contains "$OUT" "warning: base.os: alinux2's vendor support" "ami check names it"
# Ubuntu 24.04's official AMI has no Lustre client: the p5 site (FSx for Lustre) on it is refused; with its
# own AMI (which may carry the client) it is the site's call.
sed "s/os: ubuntu2204/os: ubuntu2404/; /custom_ami:/d; /ami_spec:/d" "$EX/p5-efa.yaml" >"$W/p5-2404.yaml"
run "$PCDINO_BIN" cluster generate "$W/p5-2404.yaml" --out "$W/p5-2404"
assert_rc 78 "FSx for Lustre on ubuntu2404's official AMI is refused"
assert_contains "$ERR" "storage.fsx: ParallelCluster 3.16.3's official ubuntu2404 AMI has no Lustre client" "saying why"
sed "s/os: ubuntu2204/os: ubuntu2404/; /ami_spec:/d" "$EX/p5-efa.yaml" >"$W/p5-2404-own.yaml"
run "$PCDINO_BIN" cluster generate "$W/p5-2404-own.yaml" --out "$W/p5-2404-own"
assert_rc 0 "with a custom AMI it is generated, and its configuration (Image.Os ubuntu2404) validates"

# monitoring.prometheus on the p5 site: the configuration still passes (--strict), head-node.sh passes
# ShellCheck, and the prometheus.yml it writes passes `promtool check config` with pcdino's rules.
{ sed "s|ami_spec: .*|ami_spec: $PCDINO_SOURCE_DIR/ami/examples/current.yaml|" "$EX/p5-efa.yaml"; printf 'monitoring:\n  prometheus:\n    retention: 30d\n'; } >"$W/p5-prometheus.yaml"
run "$PCDINO_BIN" cluster generate "$W/p5-prometheus.yaml" --out "$W/prometheus" --strict
assert_rc 0 "p5 with monitoring.prometheus: generate with no finding (--strict)"
run shellcheck "$W/prometheus/head-node.sh" "$W/prometheus/commands.sh"
assert_rc 0 "shellcheck head-node.sh with its Prometheus part"
run yamllint -s "$W/prometheus/cluster-config.yaml"
assert_rc 0 "yamllint (strict) on its cluster-config.yaml"
# Prometheus alone, run for real as far as this machine allows (Debian's prometheus and promtool are here;
# no systemd unit is touched and no ParallelCluster IMDS script exists): a pcdino prefix holding the
# repository's rules, /etc/prometheus and /etc/default/prometheus under the test folder.
grep -v '^spank:\|^  s3_prefix\|^containers:\|^node_check:\|^  interval_seconds\|^  min_scratch_gib' "$W/p5-prometheus.yaml" |
  sed 's|^    retention: 30d|    retention: 30d\n    s3_prefix: s3://research-bucket/monitoring|' >"$W/prometheus-alone.yaml"
run "$PCDINO_BIN" cluster generate "$W/prometheus-alone.yaml" --out "$W/alone" --strict
assert_rc 0 "Prometheus without spank: generate"
assert_not_contains "$(cat "$W/alone/head-node.sh")" "spank_pcdino" "a script without the plugin's part"
run shellcheck "$W/alone/head-node.sh"
assert_rc 0 "shellcheck on it"
mkdir -p "$W/prefix/share/pcdino/monitoring/rules"
cp "$PCDINO_SOURCE_DIR"/monitoring/rules/*.yml "$W/prefix/share/pcdino/monitoring/rules/"
head_node() {
  run env PCDINO_PREFIX="$W/prefix" PROMETHEUS_ETC="$W/etc/prometheus" PROMETHEUS_DEFAULTS="$W/etc/default/prometheus" \
    PARALLELCLUSTER_IMDS_ACCESS= PCDINO_NO_SYSTEMD=1 PCDINO_STATE="$W/state" bash "$W/alone/head-node.sh" "$@"
}
mkdir -p "$W/etc/default"
head_node
assert_rc 0 "head-node.sh's Prometheus part runs"
assert_contains "$OUT" "wrote $W/etc/prometheus/prometheus.yml" "and writes prometheus.yml"
run promtool check config "$W/etc/prometheus/prometheus.yml"
assert_rc 0 "promtool check config (rule files included): $OUT"
assert_contains "$(cat "$W/etc/default/prometheus")" "--storage.tsdb.retention.time=30d" "the retention"
head_node
assert_rc 0 "a second run"
assert_not_contains "$OUT" "wrote" "rewrites nothing"
run env PCDINO_PREFIX="$W/none" PARALLELCLUSTER_IMDS_ACCESS= PCDINO_NO_SYSTEMD=1 PCDINO_STATE="$W/state" \
  bash "$W/alone/head-node.sh"
assert_rc 1 "without pcdino's rules on the head node it fails"
assert_contains "$ERR" "the head node must run the pcdino image" "saying why"
# A real Prometheus with that configuration loads pcdino's rule groups (EC2 discovery finds nothing here).
port=$((19090 + RANDOM % 500))
prometheus --config.file="$W/etc/prometheus/prometheus.yml" --storage.tsdb.path="$W/tsdb" \
  --web.listen-address="127.0.0.1:$port" >"$W/prometheus.log" 2>&1 &
prom=$!
for _ in $(seq 30); do curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1 && break; sleep 1; done
groups=$(curl -fsS "http://127.0.0.1:$port/api/v1/rules" 2>/dev/null | grep -o '"file":"[^"]*"' | sort -u)
kill "$prom"
wait "$prom" 2>/dev/null
assert_contains "$groups" "$W/prefix/share/pcdino/monitoring/rules/pcdino-alerts.yml" "Prometheus loads pcdino's alert rules"
# --remove takes back what the runs wrote (Prometheus's own files; the package was there before).
head_node --remove
assert_rc 0 "head-node.sh --remove"
assert_contains "$OUT" "removed $W/etc/prometheus/prometheus.yml" "says what it removes"
[ ! -e "$W/etc/prometheus" ] && [ ! -e "$W/etc/default/prometheus" ] && [ ! -e "$W/state" ] && [ -d "$W/etc/default" ]
assert_eq "$?" 0 "prometheus.yml, its folder, the defaults file and the record are gone; what was there stays"
# Refused on an OS without a Prometheus package, naming the key.
sed 's/os: ubuntu2204/os: alinux2023/; s|ami_spec: .*||' "$W/prometheus-alone.yaml" >"$W/prometheus-al2023.yaml"
run "$PCDINO_BIN" cluster generate "$W/prometheus-al2023.yaml" --out "$W/al2023"
assert_rc 78 "monitoring.prometheus on Amazon Linux 2023 is refused"
assert_contains "$ERR" "monitoring.prometheus: the head node (image.os alinux2023) has no Prometheus package" "saying why"

run "$PCDINO_BIN" cluster cost "$EX/workshop.yaml"
assert_rc 0 "cost report"
assert_contains "$OUT" "always-on total" "cost report totals the always-on resources"
finish
