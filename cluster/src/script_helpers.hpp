// The shell helpers of the scripts `pcdino cluster generate` writes (head-node.sh, compute-node.sh): one
// text, after each script's PROG=<name> line.
#pragma once

namespace pcdino::cluster {

inline constexpr const char* kScriptHelpers = R"SH(fail() { echo "$PROG: $*" >&2; exit 1; }
# put SOURCE TARGET MODE: TARGET becomes a root-owned copy of SOURCE, by rename, only if it differs. The copy
# is a dot file beside TARGET: Slurm's include globs (plugstack.conf.d/*) do not match it if a run dies before
# the rename (temporary files there failed every job's plugin start: aws-parallelcluster#6459).
put() {
  local new
  new="$(dirname "$2")/.$(basename "$2").pcdino-new"
  if ! cmp -s "$1" "$2"; then
    install -o root -g root -m "$3" "$1" "$new"
    mv -f "$new" "$2"
    echo "$PROG: wrote $2"
  fi
}
put_text() {  # put_text TEXT TARGET
  local tmp
  tmp=$(mktemp)
  printf '%s\n' "$1" >"$tmp"
  put "$tmp" "$2" 0644
  rm -f "$tmp"
}
)SH";

}  // namespace pcdino::cluster
