#!/usr/bin/env bash
# Integration (issue #70): a cluster of two unprivileged users on the local two-node cluster, its shared
# filesystem a small tmpfs. User A fills the shared filesystem and puts a FIFO, a link to /dev/zero and a
# 64 GiB sparse file into the node exporter's textfile folder under the names pcdino reads there. Then the
# health check on both nodes warns of the full filesystem and drains neither; user B's job passes both
# prologs and runs a pcdino stage (mean/std) that writes its metrics beside A's files; A's files stay as
# they were; once space is freed the health check is clean.
# Skipped (77) where the test is not root or cannot mount a tmpfs.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
source "$(dirname "$0")/../lib/users.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
test_users
W="$PCDINO_BUILD_DIR/test-work/shared_cluster"
umount -l "$W/fsx" 2>/dev/null
rm -rf "$W" && mkdir -p "$W/fsx"
chmod 0755 "$W"
mount -t tmpfs -o size=32m,mode=1777 tmpfs "$W/fsx" || { echo "skipped: cannot mount a tmpfs"; exit 77; }
export LOCAL_CLUSTER_SHARED="$W/fsx" LOCAL_CLUSTER_HEALTH_CHECK_INTERVAL=3600
cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-19537}"
trap 'stop_cluster; umount -l "$W/fsx" 2>/dev/null' EXIT
D=$LOCAL_CLUSTER_DIR T=$LOCAL_CLUSTER_DIR/textfile
chmod 1777 "$T"
# health_check NODE: the wrapper as slurmd runs it as HealthCheckProgram (the node's namespace, no job).
health_check() {
  run in_node "$1" env -i SLURMD_NODENAME="$1" SLURM_CONF="$SLURM_CONF" "$D/etc/node-check"
}

# B's data and pipeline, B's own; its metrics go to the cluster's textfile folder.
install -d -o "$USER_B" -g "$USER_B" -m 0755 "$W/b"
/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$W/b/data" u8x1 2 20 >/dev/null ||
  fatal "cannot write the synthetic dataset (python3-tifffile)"
tiny_pipeline "$W/b/run.yaml" meanstd-b "$W/b"
printf 'monitoring:\n  textfile_dir: %s\n' "$T" >>"$W/b/run.yaml"
chown -R "$USER_B:$USER_B" "$W/b"

# A's doing.
user_do "$USER_A" dd if=/dev/zero of="$W/fsx/filler" bs=1M count=64
assert_contains "$ERR" "No space left on device" "user A fills the shared filesystem"
# The nodes' first health check (at slurmd's start) wrote root's verdicts: A can neither replace nor remove them.
user_do "$USER_A" sh -c "echo 'pcdino_doctor_node_healthy 1' >'$T/forged' && mv -f '$T/forged' '$T/pcdino_node_check_node1.prom'"
assert_rc 1 "A cannot replace root's verdict (a sticky folder)"
user_do "$USER_A" rm -f "$T/pcdino_node_check_node2.prom"
assert_rc 1 "nor remove it"
user_do "$USER_A" sh -c "mkfifo '$T/pcdino_77_0.prom' && ln -s /dev/zero '$T/pcdino_78_0.prom' &&
  truncate -s 64G '$T/pcdino_79_0.prom'"
assert_rc 0 "A's FIFO, link and sparse file in the textfile folder"

for node in node1 node2; do
  health_check "$node"
  assert_rc 0 "$node's health check ends"
  assert_contains "$(cat "$D/log/node-check-$node.json")" "No space left on device" "$node's report names ENOSPC"
  assert_eq "$(jq -r .verdict "$D/log/node-check-$node.json")" warn "$node: a warning"
done
assert_eq "$(sinfo -h -R -o '%N %E')" "" "no node drained"

user_do "$USER_B" sbatch --parsable -N2 -n2 -o "$W/b/job_%j.out" --chdir "$W/b" \
  --wrap "srun --mpi=pmix $PCDINO_BIN meanstd --config $W/b/run.yaml"
assert_rc 0 "B submits a two-node mean/std"
job=$OUT
wait_job "$job" 300
assert_eq "$(scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z]*')" JobState=COMPLETED "B's job completed"
[ -s "$W/b/out/meanstd-b/mean_and_std_of_dataset.txt" ]
assert_eq "$?" 0 "B's stage ran past both prologs and wrote its mean/std: $(tail -3 "$W/b/job_$job.out")"
assert_eq "$(stat -c %U "$T/pcdino_${job}_0.prom" 2>/dev/null)" "$USER_B" "B's stage wrote its metrics beside A's files"
assert_eq "$(sinfo -h -R -o '%N %E')" "" "still no node drained"
assert_eq "$(stat -c %U "$T/pcdino_node_check_node1.prom" "$T/pcdino_node_check_node2.prom" | sort -u)" root \
  "the nodes' verdicts are root's"
[ -p "$T/pcdino_77_0.prom" ] && [ -L "$T/pcdino_78_0.prom" ] && [ "$(stat -c %s "$T/pcdino_79_0.prom")" = 68719476736 ]
assert_eq "$?" 0 "A's FIFO, link and sparse file as they were"

user_do "$USER_A" rm -f "$W/fsx/filler"
health_check node1
assert_rc 0 "the health check once space is freed"
assert_eq "$(jq -r '.checks[] | select(.name == "shared_fs") | .ok' "$D/log/node-check-node1.json")" true \
  "its shared_fs check passes"
cluster_down
umount -l "$W/fsx"
finish
