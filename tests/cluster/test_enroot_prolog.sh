#!/usr/bin/env bash
# The containers' prolog (`pcdino cluster enroot-prolog`, issue #70) as Slurm runs it, as root, with two real
# unprivileged users: each job's user gets Enroot folders of their own (0700) in folders that are root's, so
# that user A can neither make, read nor replace user B's; a folder or a link A made there before (on a
# cluster whose folders were 1777) is moved aside, never used; the prolog never fails a job.
set -uo pipefail
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/users.sh"
test_users
W="$PCDINO_BUILD_DIR/test-work/enroot_prolog"
rm -rf "$W"
mkdir -p "$W/etc"
chmod 0755 "$W"
cat >"$W/etc/enroot.conf" <<CONF
ENROOT_RUNTIME_PATH $W/run/enroot/user-\$(id -u)
ENROOT_DATA_PATH $W/data/user-\$(id -u)
ENROOT_CACHE_PATH $W/cache/group-\$(id -g)
ENROOT_TEMP_PATH $W/tmp
ENROOT_MOUNT_HOME n
CONF
install -d -m 0755 "$W/run" "$W/run/enroot" "$W/data" "$W/cache"
install -d -m 1777 "$W/tmp"
run "$PCDINO_BIN" cluster enroot-prolog --enroot-conf "$W/etc/enroot.conf"
assert_rc 0 "pcdino cluster enroot-prolog"
printf '%s\n' "$OUT" >"$W/prolog"
chmod 0755 "$W/prolog"
# prolog UID GID: as slurmd runs a prolog (root, almost no environment).
prolog() { run env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_JOB_UID="$1" SLURM_JOB_GID="$2" "$W/prolog"; }

prolog "$UID_B" "$GID_B"
assert_rc 0 "the prolog for B's job"
assert_eq "$(stat -c '%U %a' "$W/data/user-$UID_B" "$W/run/enroot/user-$UID_B" | tr '\n' ' ')" \
  "$USER_B 700 $USER_B 700 " "B's data and runtime folders are B's, 0700"
assert_eq "$(stat -c '%U %G %a' "$W/cache/group-$GID_B")" "root $USER_B 2770" \
  "B's group cache: root's and B's group's, 2770"
as "$USER_B" sh -c "echo b >'$W/data/user-$UID_B/layer' && cat '$W/data/user-$UID_B/layer'"
assert_eq "$OUT" b "B writes and reads its own folder"
as "$USER_A" mkdir "$W/data/user-$UID_A"
assert_rc 1 "A cannot make a folder of its own beside (only the prolog makes them)"
as "$USER_A" cat "$W/data/user-$UID_B/layer"
assert_rc 1 "A cannot read B's container data"
as "$USER_A" mv "$W/data/user-$UID_B" "$W/data/taken"
assert_rc 1 "A cannot move B's folder away"
as "$USER_A" sh -c "echo a >'$W/data/user-$UID_B/layer'"
assert_rc 2 "A cannot replace B's files (sh: Permission denied)"
prolog "$UID_B" "$GID_B"
assert_eq "$(cat "$W/data/user-$UID_B/layer")" b "B's next job keeps B's folder as it was"

# A cluster whose folders were every user's (1777): A made B's folders first, one a link to a folder of A's.
rm -rf "$W/data/user-$UID_B" "$W/run/enroot/user-$UID_B"
chmod 1777 "$W/data" "$W/run/enroot"
as "$USER_A" mkdir -m 0777 "$W/data/user-$UID_B"
as "$USER_A" ln -s /etc "$W/run/enroot/user-$UID_B"
prolog "$UID_B" "$GID_B"
assert_rc 0 "a prolog in folders every user can write still lets the job run"
assert_contains "$ERR" "$W/data is not root's 0755 (owner uid 0, mode 1777)" "and says why it made nothing there"
assert_eq "$(stat -c %U "$W/data/user-$UID_B")" "$USER_A" "it leaves a folder there alone (no race to win)"
chmod 0755 "$W/data" "$W/run/enroot"  # what compute-node.sh does to such a folder
prolog "$UID_B" "$GID_B"
assert_rc 0 "the prolog once the folders are root's again"
assert_contains "$ERR" "$W/data/user-$UID_B was not the user's (owner uid $UID_A): moved to" "A's folder is moved aside"
assert_contains "$ERR" "$W/run/enroot/user-$UID_B was not the user's" "and A's link too"
assert_eq "$(stat -c '%U %a %F' "$W/data/user-$UID_B" "$W/run/enroot/user-$UID_B" | tr '\n' ' ')" \
  "$USER_B 700 directory $USER_B 700 directory " "B gets folders of its own in their place"
assert_eq "$(stat -c '%U %a' /etc)" "root 755" "the link's target is left as it was"
moved=("$W"/run/enroot/user-"$UID_B".moved-aside.*)
[ -L "${moved[0]}" ] && pass "the link is kept aside as a link" || fail "no link aside: ${moved[*]}"

prolog "" ""
assert_rc 0 "no SLURM_JOB_UID: exit 0"
prolog 0 0
assert_rc 0 "root's job: nothing to make"
[ ! -e "$W/data/user-0" ] && pass "no folder made for root" || fail "user-0 made"
mv "$W/etc/enroot.conf" "$W/etc/gone"
prolog "$UID_A" "$GID_A"
assert_rc 0 "no enroot.conf: exit 0 (a node without containers)"
finish
