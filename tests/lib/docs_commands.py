#!/usr/bin/python3
"""Runs the shell sessions shown in README.md and docs/ and compares what they print with what the page shows
(issue #71).

    tests/lib/docs_commands.py [--pcdino PATH] [PAGE...]     default pages: README.md and docs/*.md

A session is a fenced block (```console, ```sh, ```shell or ```bash) with lines that start with "$ ": each such
line is a command (a line ending in a backslash continues on the next), the lines after it, up to the next
command, what it prints (stdout and stderr together). In the shown output a line that is only "..." stands for
any number of lines, and "..." inside a line for any text. Blocks without "$ " lines are listings, not run.

A session is not run when the last non-blank line before its fence is `<!-- not run: REASON -->`, or when one
of its commands starts with a program that needs AWS or a cluster (AWS_OR_CLUSTER below): the summary counts
it with its reason. Every other command runs with bash from a scratch copy of the repository (its git files,
the uncommitted ones included; cwd is the copy's root, one command after another, each in a shell of its own),
with the pcdino program's folder first on PATH. A command must exit 0: show an expected failure as
`$ COMMAND; echo "exit $?"`.

Exit codes: 0 every session ran as shown, 1 one did not, 64 bad usage, 69 no pcdino to run.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SESSION_LANGUAGES = {"console", "sh", "shell", "bash"}
FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.+?)\s*-->$")
# Programs whose commands need an AWS account, a built image or a running cluster: their sessions are shown,
# not run here.
AWS_OR_CLUSTER = {"aws", "pcluster", "packer", "sbatch", "srun", "salloc", "scontrol", "sinfo", "squeue",
                  "sacct", "scancel", "ssh", "scp", "sudo", "enroot", "./commands.sh", "./teardown.sh",
                  "./head-node.sh", "/opt/pcdino/verify.sh"}
COMMAND_SECONDS = 120


class Session:
    def __init__(self, page, line, language, skip):
        self.page, self.line, self.language, self.skip = page, line, language, skip
        self.commands = []  # [line number, command, [expected lines]]


def sessions(page, text, listings=None):
    """The shell sessions of one page; the line numbers of its shell blocks without "$ " go to listings."""
    found = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, language, start = m.group(1), m.group(2).lower(), i
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        indent = len(lines[start]) - len(lines[start].lstrip())  # a block inside a list item is indented
        body = [b[indent:] if b[:indent].strip() == "" else b.lstrip() for b in lines[start + 1:j]]
        i = j + 1
        if language not in SESSION_LANGUAGES:
            continue
        if not any(b.startswith("$ ") for b in body):
            if listings is not None:
                listings.append(f"{page}:{start + 1}")
            continue
        before = next((lines[k].strip() for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        marker = NOT_RUN.match(before)
        session = Session(page, start + 1, language, marker.group(1) if marker else None)
        k = 0
        while k < len(body):
            if not body[k].startswith("$ "):
                if not session.commands:  # text before the first command: not part of any output
                    k += 1
                    continue
                session.commands[-1][2].append(body[k])
                k += 1
                continue
            number, command = start + 2 + k, body[k][2:]
            while command.endswith("\\") and k + 1 < len(body):
                k += 1
                command += "\n" + body[k]  # bash joins the lines itself
            session.commands.append([number, command, []])
            k += 1
        if session.skip is None:
            for _, command, _ in session.commands:
                word = command.split()[0] if command.split() else ""
                if word in AWS_OR_CLUSTER:
                    session.skip = f"needs AWS or a cluster ({word})"
                    break
        found.append(session)
    return found


def trimmed(lines):
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def line_pattern(expected):
    return re.compile("^" + ".*".join(re.escape(part) for part in expected.split("...")) + "$")


def matches(expected, actual):
    """Whether the actual lines are the expected ones, "..." lines standing for any lines."""
    patterns = [None if e.strip() == "..." else line_pattern(e) for e in expected]
    memo = {}

    def at(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(patterns):
            result = j == len(actual)
        elif patterns[i] is None:
            result = at(i + 1, j) or (j < len(actual) and at(i, j + 1))
        else:
            result = j < len(actual) and bool(patterns[i].match(actual[j])) and at(i + 1, j + 1)
        memo[(i, j)] = result
        return result

    return at(0, 0)


def scratch_copy(dest):
    """The repository's files (git's list, uncommitted ones included) copied into dest."""
    listed = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True)
    if listed.returncode == 0 and listed.stdout:
        for rel in sorted(set(listed.stdout.decode().split("\0")) - {""}):
            src = os.path.join(ROOT, rel)
            if os.path.isfile(src) and not os.path.islink(src):
                os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
                shutil.copy2(src, os.path.join(dest, rel))
            elif os.path.islink(src):
                os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
                os.symlink(os.readlink(src), os.path.join(dest, rel))
    else:  # no git: the tree without build outputs
        shutil.copytree(ROOT, dest, symlinks=True, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".git", "build"))
    os.makedirs(os.path.join(dest, "build"), exist_ok=True)


def run_session(session, scratch, env):
    """Runs a session's commands; returns its problems."""
    problems = []
    for number, command, expected in session.commands:
        where = f"{session.page}:{number}: $ {command.splitlines()[0]}"
        try:
            r = subprocess.run(["bash", "-c", command], cwd=scratch, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=COMMAND_SECONDS)
        except subprocess.TimeoutExpired:
            problems.append(f"{where}\n  did not finish within {COMMAND_SECONDS} s")
            continue
        actual = trimmed(r.stdout.decode("utf-8", "replace").split("\n"))
        shown = trimmed(expected)
        if r.returncode != 0:
            problems.append(f"{where}\n  exited {r.returncode} (show an expected failure as "
                            f"`COMMAND; echo \"exit $?\"`); it printed:\n" + "\n".join("    " + a for a in actual))
        elif not matches(shown, actual):
            problems.append(f"{where}\n  prints what the page does not show.\n  the page shows:\n" +
                            "\n".join("    " + s for s in shown) + "\n  it printed:\n" +
                            "\n".join("    " + a for a in actual))
    return problems


def default_pages():
    pages = ["README.md"]
    docs = os.path.join(ROOT, "docs")
    pages += sorted(os.path.join("docs", n) for n in os.listdir(docs) if n.endswith(".md"))
    return pages


def main(argv):
    pcdino = os.environ.get("PCDINO_BIN", os.path.join(ROOT, "build", "cli", "pcdino"))
    pages = []
    i = 0
    while i < len(argv):
        if argv[i] in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if argv[i] == "--pcdino" and i + 1 < len(argv):
            pcdino = argv[i + 1]
            i += 2
            continue
        if argv[i].startswith("-"):
            print(f"docs_commands: unknown option {argv[i]} (see --help)", file=sys.stderr)
            return 64
        pages.append(argv[i])
        i += 1
    if not os.access(pcdino, os.X_OK):
        print(f"docs_commands: no pcdino program at {pcdino} (build first, or --pcdino PATH)", file=sys.stderr)
        return 69
    pages = pages or default_pages()
    all_sessions, listings = [], []
    for page in pages:
        path = page if os.path.isabs(page) else os.path.join(ROOT, page)
        with open(path, encoding="utf-8") as f:
            all_sessions += sessions(page, f.read(), listings)
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(os.path.abspath(pcdino)) + os.pathsep + env.get("PATH", "")
    env.pop("SLURM_CONF", None)
    env.update({"LC_ALL": "C.UTF-8", "TZ": "UTC", "COLUMNS": "200"})
    problems, ran, commands, skipped = [], 0, 0, []
    with tempfile.TemporaryDirectory(prefix="pcdino-docs-") as scratch:
        scratch_copy(scratch)
        for session in all_sessions:
            if session.skip:
                skipped.append(f"{session.page}:{session.line} ({session.skip})")
                continue
            ran += 1
            commands += len(session.commands)
            problems += run_session(session, scratch, env)
    for p in problems:
        print("FAIL: " + p, file=sys.stderr)
    for s in skipped:
        print(f"not run: {s}")
    print(f"docs_commands: {len(pages)} page(s), {ran} session(s) with {commands} command(s) run, "
          f"{len(skipped)} not run, {len(problems)} problem(s); {len(listings)} shell block(s) without \"$ \" "
          f"are listings, not run: {' '.join(listings)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
