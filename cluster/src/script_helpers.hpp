// The shell helpers of the scripts `pcdino cluster generate` writes (head-node.sh, compute-node.sh): one
// text, after each script's PROG=<name> line.
#pragma once

namespace pcdino::cluster {

inline constexpr const char* kScriptHelpers = R"SH(fail() { echo "$PROG: $*" >&2; exit 1; }
# put SOURCE TARGET MODE: TARGET becomes a root-owned copy of SOURCE, by rename, only if it differs.
put() {
  if ! cmp -s "$1" "$2"; then
    install -o root -g root -m "$3" "$1" "$2.pcdino-new"
    mv -f "$2.pcdino-new" "$2"
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
