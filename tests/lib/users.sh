# shellcheck shell=bash
# Two unprivileged users for the tests of what runs as root on a shared cluster (sourced, after assert.sh):
# pcdino-user-a and pcdino-user-b, each with a group of its own, made once per machine (useradd, under a lock:
# tests run side by side). test_users sets USER_A, USER_B, UID_A, UID_B, GID_A, GID_B, or ends the test
# skipped (77) where it cannot make them (not root, no useradd).
test_users() {
  [ "$(id -u)" = 0 ] || { echo "skipped: needs root (makes two users)"; exit 77; }
  command -v useradd >/dev/null || { echo "skipped: no useradd"; exit 77; }
  USER_A=pcdino-user-a USER_B=pcdino-user-b
  local u
  exec 7>/run/pcdino-test-users.lock
  flock 7
  for u in "$USER_A" "$USER_B"; do
    id -u "$u" >/dev/null 2>&1 || useradd --user-group --no-create-home --home-dir /nonexistent \
      --shell /bin/sh "$u" || fatal "useradd $u failed"
  done
  flock -u 7
  UID_A=$(id -u "$USER_A") UID_B=$(id -u "$USER_B") GID_A=$(id -g "$USER_A") GID_B=$(id -g "$USER_B")
  export USER_A USER_B UID_A UID_B GID_A GID_B
}

# as USER CMD...: runs CMD as USER (no login, this environment less HOME), like run.
as() {
  local who=$1
  shift
  run setpriv --reuid="$who" --regid="$(id -g "$who")" --init-groups --reset-env -- "$@"
}

# user_do USER CMD...: CMD as USER with the local cluster's client settings (cluster_up's SLURM_CONF and Open
# MPI's transport), as that user's own shell on the head node would have them.
user_do() {
  local who=$1
  shift
  as "$who" env SLURM_CONF="${SLURM_CONF-}" PATH="$PATH" OMPI_MCA_btl="${OMPI_MCA_btl-}" \
    OMPI_MCA_btl_tcp_if_include="${OMPI_MCA_btl_tcp_if_include-}" "$@"
}
