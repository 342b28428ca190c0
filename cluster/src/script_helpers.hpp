// The shell helpers of the scripts `pcdino cluster generate` writes (head-node.sh, compute-node.sh): one
// text, after each script's PROG=<name> and RECORD=<folder> lines.
#pragma once

namespace pcdino::cluster {

// remember, note and make_dir keep head-node.sh's record for --remove in $RECORD; compute-node.sh sets RECORD
// empty and keeps none.
inline constexpr const char* kScriptHelpers = R"SH(fail() { echo "$PROG: $*" >&2; exit 1; }
# note LINE: LINE added once to $RECORD/record, what --remove undoes ("package NAME", "unit NAME", ...).
note() {
  [ -n "$RECORD" ] || return 0
  mkdir -p "$RECORD"
  grep -qxF -- "$1" "$RECORD/record" 2>/dev/null || printf '%s\n' "$1" >>"$RECORD/record"
}
# remember PATH: before the first change to PATH, how to undo it: "created PATH" for a path that is not
# there, "saved PATH" with a copy under $RECORD/saved for one that is. Later changes add nothing.
remember() {
  [ -n "$RECORD" ] || return 0
  if grep -qxF -e "created $1" -e "saved $1" "$RECORD/record" 2>/dev/null; then return 0; fi
  if [ -e "$1" ] || [ -L "$1" ]; then
    mkdir -p "$RECORD/saved$(dirname "$1")"
    cp -a "$1" "$RECORD/saved$1"
    note "saved $1"
  else
    note "created $1"
  fi
}
# make_dir DIR...: mkdir -p, each folder it makes remembered, parents first.
make_dir() {
  local dir missing=()
  for dir in "$@"; do
    while [ ! -d "$dir" ]; do
      missing=("$dir" "${missing[@]}")
      dir=$(dirname "$dir")
    done
  done
  for dir in "${missing[@]}"; do
    if [ ! -d "$dir" ]; then
      remember "$dir"
      mkdir "$dir"
    fi
  done
}
# put SOURCE TARGET MODE: TARGET becomes a root-owned copy of SOURCE, by rename, only if it differs. The copy
# is a dot file beside TARGET: Slurm's include globs (plugstack.conf.d/*) do not match it if a run dies before
# the rename (temporary files there failed every job's plugin start: aws-parallelcluster#6459).
put() {
  local new
  new="$(dirname "$2")/.$(basename "$2").pcdino-new"
  if ! cmp -s "$1" "$2"; then
    remember "$2"
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
