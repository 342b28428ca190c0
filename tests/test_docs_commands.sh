#!/usr/bin/env bash
# The shell sessions of README.md and docs/ print what the pages show (issue #71): every "$ " command of a
# ```console (or sh) block that needs no AWS runs from a scratch copy of the repository with the built pcdino,
# and its output must match the lines under it ("..." for lines or text left out). tests/lib/docs_commands.py
# says the convention. Then the checker itself, on pages written here: a shown output that differs, a
# command that fails, and a session that must not run are each told apart.
source "$(dirname "$0")/lib/assert.sh"
: "${PCDINO_BIN:?set PCDINO_BIN to the pcdino program}" "${PCDINO_SOURCE_DIR:?}"
check="$PCDINO_SOURCE_DIR/tests/lib/docs_commands.py"

run "$check" --pcdino "$PCDINO_BIN"
assert_rc 0 "every session of README.md and docs/ prints what its page shows"
[ "$RC" -eq 0 ] || echo "$ERR" >&2
echo "$OUT" | tail -n 1
assert_contains "$OUT" "docs/admin.md:" "the admin's page has sessions that need AWS, listed as not run"
runs=$(sed -n 's/.* \([0-9][0-9]*\) session(s) with.*/\1/p' <<<"$OUT")
if [ "${runs:-0}" -ge 4 ]; then pass "$runs sessions ran"; else
  fail "only '${runs:-0}' sessions ran: the pages lost their runnable sessions"
fi

pages=$(mktemp -d)
trap 'rm -rf "$pages"' EXIT
fence='```'
cat >"$pages/good.md" <<EOF
# A page whose sessions print what it shows

${fence}console
\$ pcdino --help
pcdino: self-supervised DINO pretraining ... on Slurm clusters.
...
Subcommands:
...
\$ pcdino nosuch; echo "exit \$?"
pcdino: 'nosuch' is not a pcdino command. See 'pcdino --help'.
exit 64
\$ printf 'one\ntwo\n' \\
  && echo three
one
two
three
${fence}

A listing, not a session:

${fence}sh
pcdino cluster generate site.yaml --out build/cluster   # no prompt: not run
${fence}

<!-- not run: on the head node -->
${fence}console
\$ pcdino status pipeline.yaml
anything at all
${fence}

${fence}console
\$ pcluster version
{"version": "9.9.9"}
${fence}

- a session inside a list item, indented as the item is:

  ${fence}console
  \$ echo indented
  indented
  ${fence}
EOF
run "$check" --pcdino "$PCDINO_BIN" "$pages/good.md"
assert_rc 0 "a page whose output matches, with '...' for lines and text"
assert_contains "$OUT" "2 session(s) with 4 command(s) run, 2 not run, 0 problem(s); 1 shell block(s)" \
  "the listing is not a session, an indented session is one; two are not run"
assert_contains "$OUT" "good.md:26 (on the head node)" "a session marked not run says why"
assert_contains "$OUT" "good.md:31 (needs AWS or a cluster (pcluster))" "a pcluster session is not run"

sed 's/^exit 64$/exit 0/' "$pages/good.md" >"$pages/wrong.md"
run "$check" --pcdino "$PCDINO_BIN" "$pages/wrong.md"
assert_rc 1 "a shown output that is not what the command prints fails"
assert_contains "$ERR" "wrong.md:9: \$ pcdino nosuch" "the failure names the page, line and command"
assert_contains "$ERR" "prints what the page does not show" "and says why"

sed 's/; echo "exit \$?"$//' "$pages/good.md" | sed '/^exit 64$/d' >"$pages/failing.md"
run "$check" --pcdino "$PCDINO_BIN" "$pages/failing.md"
assert_rc 1 "a command that fails without showing it fails"
assert_contains "$ERR" "exited 64" "the failure gives the exit code"

sed 's/^pcdino: self-supervised DINO pretraining \.\.\. on Slurm clusters\.$/pcdino: self-supervised DINO/' \
  "$pages/good.md" >"$pages/prefix.md"
run "$check" --pcdino "$PCDINO_BIN" "$pages/prefix.md"
assert_rc 1 "a shown line must match the whole printed line, not its start"

run "$check" --pcdino "$pages/no-such-pcdino" "$pages/good.md"
assert_rc 69 "no pcdino to run"
finish
