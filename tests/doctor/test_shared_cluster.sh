#!/usr/bin/env bash
# The node check as root beside an unprivileged user (issue #70), the real program: user A fills the shared
# filesystem and puts a FIFO, a link and a 64 GiB sparse file in the textfile folder under the names pcdino
# reads there. The check neither blocks nor drains (the full filesystem is a warning, named), writes its
# verdict, and leaves A's files alone; a stage of user B's starts and writes its metrics beside them.
set -uo pipefail
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/users.sh"
: "${PCDINO_BIN:?}" "${PCDINO_BUILD_DIR:?}"
test_users
W="$PCDINO_BUILD_DIR/test-work/doctor_shared_cluster"
umount -l "$W/fsx" 2>/dev/null
rm -rf "$W"
mkdir -p "$W/fsx" "$W/textfile"
chmod 0755 "$W"
chmod 1777 "$W/textfile"
mount -t tmpfs -o size=8m,mode=1777 tmpfs "$W/fsx" || { echo "skipped: cannot mount a tmpfs"; exit 77; }
trap 'umount -l "$W/fsx" 2>/dev/null' EXIT

# A fills /fsx (dd ends at ENOSPC) and plants its files.
as "$USER_A" dd if=/dev/zero of="$W/fsx/big" bs=1M count=16
assert_contains "$ERR" "No space left on device" "user A fills the shared filesystem"
as "$USER_A" mkfifo "$W/textfile/pcdino_node_check_node1.prom"
as "$USER_A" sh -c "ln -s /dev/zero '$W/textfile/pcdino_1_0.prom' && truncate -s 64G '$W/textfile/pcdino_2_0.prom'"
assert_rc 0 "A's FIFO, link and sparse file are in the textfile folder"
cat >"$W/site.yaml" <<YAML
SharedStorage:
  - MountDir: $W/fsx
Manifest: ""
ProbeSeconds: 5
TextfileDir: $W/textfile
YAML

start=$SECONDS
run timeout 60 "$PCDINO_BIN" node-check --site "$W/site.yaml" --node node1 --json "$W/report.json"
assert_rc 0 "the node check ends, no drain finding"
assert_eq "$((SECONDS - start < 40))" 1 "within its limits (no FIFO held it)"
assert_contains "$OUT" "shared_fs     WARN" "the full filesystem is a warning"
assert_contains "$OUT" "No space left on device (the filesystem's state, the same on every node: not drained)" \
  "naming the error"
assert_contains "$OUT" "node1: warn in" "the verdict: warn"
assert_eq "$(jq -r .verdict "$W/report.json")" warn "its JSON report says so"
[ -f "$W/textfile/pcdino_node_check_node1.prom" ] && [ "$(stat -c %U "$W/textfile/pcdino_node_check_node1.prom")" = root ]
assert_eq "$?" 0 "root's verdict took its name from A's FIFO (a rename over it)"
assert_contains "$(cat "$W/textfile/pcdino_node_check_node1.prom")" 'check="shared_fs"} 0' \
  "the verdict names the failed check"
[ -L "$W/textfile/pcdino_1_0.prom" ] && [ "$(stat -c %s "$W/textfile/pcdino_2_0.prom")" = 68719476736 ]
assert_eq "$?" 0 "A's link and sparse file left as they were"
leftovers=$(find "$W/fsx" "$W/textfile" -name '.*' -newer "$W/site.yaml" | wc -l)
assert_eq "$leftovers" 0 "no temporary file left behind"

# B's stage starts beside A's files: the doctor's metrics file, as every stage's.
as "$USER_B" timeout 60 "$PCDINO_BIN" node-check --site "$W/site.yaml" --node node2
assert_rc 0 "B's node check (a stage of B's reading the folder at its start) ends"
assert_eq "$(stat -c %U "$W/textfile/pcdino_node_check_node2.prom")" "$USER_B" "and writes its metrics there"
# Space freed: the check passes.
rm -f "$W/fsx/big"
run timeout 60 "$PCDINO_BIN" node-check --site "$W/site.yaml" --node node1
assert_contains "$OUT" "shared_fs     ok" "once space is freed the shared_fs check passes"
finish
