#!/usr/bin/env python3
"""Runs the README's examples as written (issue 24: a README example that no longer runs fails CI).

Every shell code block (```sh, ```bash, ```shell) of the Markdown file must follow a marker, an HTML comment
on the line right before its fence, which Markdown viewers do not show:

  <!-- example: timeout=60 expect="test accuracy" -->    run it; pass when it exits 0 within 60 s and every
                                                         expect (a Python regular expression, searched in
                                                         stdout and stderr together) matches
  <!-- example: skip="needs a GPU" -->                   not run here; the reason is required (a GPU,
                                                         several hosts, root namespaces, > 2 minutes...)

Options of a run marker: timeout=SECONDS (required, at most --max_timeout), expect="REGEX" (any number; " in
the regex as \\x22), exit=CODE (default 0). A block runs as one bash script with `set -eo pipefail`, from the
repository root, in a process group of its own that is killed when it ends or times out (background jobs
included). Blocks run in file order, so a block may use what an earlier one built.

  tools/readme_examples.py                   # run every runnable example of README.md
  tools/readme_examples.py --list            # what would run, with the markers' budgets; runs nothing
  tools/readme_examples.py --check           # markers only: every shell block marked, options valid, every
                                             # table row as wide as its header
  tools/readme_examples.py --only=3,5        # the examples with these numbers (as --list shows them)
  tools/readme_examples.py --timeout_scale=3 # on a machine busy with other work (the markers' timeouts hold
                                             # on an idle 2-core machine with a few times to spare)

Exit code 0 when every example passed, 1 otherwise (each failure says which block, from which line, why, and
shows the end of its output), 2 for a marker that is missing or wrong, or a table row with more or fewer cells
than its header: GitHub's Markdown drops a row's extra cells, so an unescaped | in a figure hides the rest of it.
"""

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

SHELL_LANGUAGES = ("sh", "bash", "shell")
MARKER = re.compile(r"^\s*<!--\s*example:(?P<options>.*?)-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[A-Za-z0-9_+-]*)\s*$")
TAIL_CHARS = 3000
GRACE_S = 5  # between SIGTERM and SIGKILL to an example's process group (bench binaries clean up on SIGTERM)


class MarkerError(Exception):
    pass


class Example:
    def __init__(self, number, line, code, options):
        self.number = number
        self.line = line  # 1-based line of the opening fence
        self.code = code
        self.skip = options.get("skip")
        self.timeout = options.get("timeout")
        self.expect = options.get("expect", [])
        self.exit = options.get("exit", 0)

    def first_line(self):
        for line in self.code.splitlines():
            if line.strip() and not line.strip().startswith("#"):
                return line.strip()
        return "(empty)"


def parse_options(text, where, max_timeout):
    """The options of one marker: key=value pairs, values optionally in double quotes."""
    try:
        words = shlex.split(text, posix=True)
    except ValueError as e:
        raise MarkerError(f"{where}: cannot parse the marker's options ({e}); write key=\"value\" pairs")
    options = {"expect": []}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep:
            raise MarkerError(f"{where}: option '{word}' has no value; write key=value (timeout=60, skip=\"why\")")
        if key == "expect":
            try:
                re.compile(value)
            except re.error as e:
                raise MarkerError(f"{where}: expect=\"{value}\" is not a valid regular expression: {e}")
            options["expect"].append(value)
        elif key in ("timeout", "exit"):
            try:
                options[key] = int(value)
            except ValueError:
                raise MarkerError(f"{where}: {key}={value} is not a whole number")
        elif key == "skip":
            if not value.strip():
                raise MarkerError(f"{where}: skip needs a reason, e.g. skip=\"needs a GPU\"")
            options["skip"] = value
        else:
            raise MarkerError(f"{where}: unknown option '{key}' (known: timeout, expect, exit, skip)")
    if "skip" in options:
        if len(options) > 2 or options["expect"]:
            raise MarkerError(f"{where}: a skip marker takes no other option")
        return options
    if "timeout" not in options:
        raise MarkerError(f"{where}: a run marker needs timeout=SECONDS (or skip=\"reason\" for a block not run here)")
    if not 1 <= options["timeout"] <= max_timeout:
        raise MarkerError(f"{where}: timeout={options['timeout']} is outside 1..{max_timeout} s; an example that "
                          "takes longer is marked skip=\"> 2 minutes\" with its time stated in the text")
    return options


def extract(path, max_timeout):
    """The file's shell blocks in order; MarkerError when one is unmarked or a marker is wrong or stray."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    examples = []
    pending = None  # (line number, options) of a marker waiting for its block
    i = 0
    while i < len(lines):
        marker = MARKER.match(lines[i])
        fence = FENCE.match(lines[i])
        if marker:
            if pending:
                raise MarkerError(f"{path}:{pending[0]}: marker not followed by a code block")
            pending = (i + 1, parse_options(marker.group("options"), f"{path}:{i + 1}", max_timeout))
            i += 1
            continue
        if fence:
            start = i
            indent = fence.group("indent")
            body = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                line = lines[i]
                body.append(line[len(indent):] if line.startswith(indent) else line)
                i += 1
            if i == len(lines):
                raise MarkerError(f"{path}:{start + 1}: code block never closed")
            lang = fence.group("lang")
            if lang in SHELL_LANGUAGES:
                if not pending:
                    raise MarkerError(
                        f"{path}:{start + 1}: shell block without a marker; put <!-- example: timeout=SECONDS "
                        "expect=\"...\" --> or <!-- example: skip=\"reason\" --> on the line before its fence")
                examples.append(Example(len(examples) + 1, start + 1, "\n".join(body) + "\n", pending[1]))
            elif pending:
                raise MarkerError(f"{path}:{pending[0]}: marker before a ```{lang} block; only shell blocks "
                                  f"({', '.join(SHELL_LANGUAGES)}) are examples")
            pending = None
            i += 1
            continue
        if pending and lines[i].strip():
            raise MarkerError(f"{path}:{pending[0]}: marker not followed by a code block (line {i + 1} comes first)")
        i += 1
    if pending:
        raise MarkerError(f"{path}:{pending[0]}: marker at the end of the file")
    return examples


TABLE_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def table_cells(line):
    """The cells of a Markdown table row: split at every | not escaped as \\| (GitHub splits inside code spans
    too), the outer pipes dropped."""
    text = line.strip()
    cells = re.split(r"(?<!\\)\|", text)
    if text.startswith("|"):
        cells = cells[1:]
    if text.endswith("|") and not text.endswith("\\|"):
        cells = cells[:-1]
    return cells


def check_tables(path):
    """MarkerError at the first table row (outside code blocks) whose cell count differs from its header's."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    in_code = False
    header = None  # (line number, cells) of the table being read
    for i, line in enumerate(lines):
        if FENCE.match(line):  # an opening or a closing fence
            in_code = not in_code
            header = None
            continue
        if in_code:
            continue
        if header is None:
            if "|" in line and i + 1 < len(lines) and TABLE_DELIMITER.match(lines[i + 1]):
                header = (i + 1, len(table_cells(line)))
            continue
        if not line.strip() or "|" not in line:
            header = None
            continue
        if TABLE_DELIMITER.match(line):
            continue
        cells = len(table_cells(line))
        if cells != header[1]:
            raise MarkerError(f"{path}:{i + 1}: table row with {cells} cells under a header of {header[1]} (line "
                              f"{header[0]}); GitHub drops the extra cells: escape a | inside a cell as \\|")


def end_group(process):
    """SIGTERM to the example's process group, SIGKILL to what is left after GRACE_S; reaps the shell."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        process.wait()
        return
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        process.poll()  # reaps the shell, so that an empty group disappears
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()


def interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def run(example, root, timeout_scale):
    """(passed, seconds, why, output) of one example."""
    timeout = example.timeout * timeout_scale
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as script:
        script.write("set -eo pipefail\n" + example.code)
    start = time.monotonic()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(["bash", script.name], cwd=root, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        timed_out = False
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            code = None
        finally:
            # The block's background jobs (servers, ranks) go with it, whether it ended or not, and so does
            # the whole group when this harness is interrupted (KeyboardInterrupt, or SIGTERM below).
            end_group(process)
        seconds = time.monotonic() - start
        os.unlink(script.name)
        out.seek(0)
        output = out.read().decode("utf-8", errors="replace")
    if timed_out:
        why = f"still running after {timeout:g} s (timeout={example.timeout} x --timeout_scale) (killed)"
        return False, seconds, why, output
    if code != example.exit:
        return False, seconds, f"exit code {code}, expected {example.exit}", output
    missing = [e for e in example.expect if not re.search(e, output, re.MULTILINE)]
    if missing:
        return False, seconds, "no output line matches expect=" + ", ".join(f'"{m}"' for m in missing), output
    return True, seconds, "", output


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readme", default=None, help="Markdown file (default: README.md of the repository)")
    parser.add_argument("--root", default=None, help="directory the examples run in (default: the repository root)")
    parser.add_argument("--list", action="store_true", help="list the examples and their budgets; run nothing")
    parser.add_argument("--check", action="store_true", help="check the markers only; run nothing")
    parser.add_argument("--only", default="", help="comma-separated example numbers to run (see --list)")
    parser.add_argument("--max_timeout", type=int, default=180, help="largest timeout a marker may give (s)")
    parser.add_argument("--timeout_scale", type=float, default=1.0,
                        help="multiplies every marker's timeout (a machine loaded by other work)")
    # The timeouts are upper bounds: the examples ran in about 6-7 minutes on this 2-core machine (2026-11-27),
    # with the real-hosts rig (mpirun over ssh) and the PS backup-worker examples added; CI's limit is 90.
    parser.add_argument("--budget", type=int, default=1500,
                        help="the runnable examples' timeouts may add up to at most this many seconds")
    args = parser.parse_args()
    root = args.root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    readme = args.readme or os.path.join(root, "README.md")
    try:
        examples = extract(readme, args.max_timeout)
        check_tables(readme)
    except MarkerError as e:
        print(f"readme_examples: {e}", file=sys.stderr)
        return 2
    runnable = [e for e in examples if not e.skip]
    budget = sum(e.timeout for e in runnable)
    if budget > args.budget:
        print(f"readme_examples: the runnable examples' timeouts add up to {budget} s, over --budget={args.budget} "
              "s; shorten an example or mark it skip", file=sys.stderr)
        return 2
    if args.check or args.list:
        for e in examples:
            what = f"skip ({e.skip})" if e.skip else f"run, timeout {e.timeout} s"
            if args.list:
                print(f"{e.number:3d}  line {e.line:4d}  {what}: {e.first_line()}")
        print(f"{readme}: {len(examples)} shell blocks, {len(runnable)} run (timeouts {budget} s in all), "
              f"{len(examples) - len(runnable)} skipped with a reason")
        return 0
    signal.signal(signal.SIGTERM, interrupted)
    only = {int(n) for n in args.only.split(",") if n.strip()}
    failures = 0
    total = time.monotonic()
    for e in examples:
        if only and e.number not in only:
            continue
        if e.skip:
            print(f"[{e.number}] SKIP  line {e.line}: {e.first_line()} ({e.skip})", flush=True)
            continue
        passed, seconds, why, output = run(e, root, args.timeout_scale)
        print(f"[{e.number}] {'PASS' if passed else 'FAIL'}  line {e.line} ({seconds:.1f} s): {e.first_line()}",
              flush=True)
        if not passed:
            failures += 1
            print(f"    {readme}:{e.line}: {why}; the end of its output:", flush=True)
            for line in output[-TAIL_CHARS:].splitlines():
                print(f"    | {line}")
    print(f"readme_examples: {failures} failed, {time.monotonic() - total:.0f} s in all", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
