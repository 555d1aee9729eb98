#!/usr/bin/python3
"""The course book's doc runner: runs the command blocks of docs/course pages and compares outputs.

A page is plain Markdown. Fenced blocks with these info strings are the runner's; every other
block (```python for the course's code, plain ```text) is only read by people:

  ```sh run            a command: run with bash (-e -o pipefail) in the project root
  ```python run        Python code: run by --python in the project root, with --python-path (the
                       build's python/ folder, where `import inferlab` finds the package) on
                       PYTHONPATH; without --python-path the block is skipped, and so the page
  ```text output       the output of the `sh run` or `python run` block before it (stdout and stderr together)
  ```sh serve          a server command: started in the background, waited for on
                       http://127.0.0.1:$PORT/health, stopped when the page ends

Commands see PATH with the build's bin/ and examples/ first, $WORK (a fresh empty folder for the
page) and $PORT (a free loopback port). In an output block a line `…` alone matches any number of
lines, `…` inside a line any text, and `<n>` one number (123, -1.5, 4,096, 1e-05). The actual
output has the page's $WORK folder and :PORT written back as `$WORK` and `:$PORT` before it is
compared; trailing spaces and trailing blank lines are ignored.

  run_pages.py check PAGE...   run every block, compare outputs; exit 1 on the first difference
  run_pages.py show PAGE       print each command as it runs it, with its live output (for learners)

Info-string option `requires=PATH` on a `sh run` or `python run` block: when PATH is missing, `check` skips the
page (exit 77) and `show` says what is missing.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

BLOCK_TIMEOUT_S = 300
SERVER_START_TIMEOUT_S = 120
SKIP = 77
NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?"


class PageError(Exception):
    pass


class Block:
    def __init__(self, kind, text, line, options):
        self.kind, self.text, self.line, self.options = kind, text, line, options
        self.expected = None  # the `text output` block that follows a `sh run`
        self.expected_line = None


def parse_page(path):
    """The runner's blocks of a page, in order; each `text output` attached to its command."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^(`{3,}|~{3,})\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        fence, words, start = m.group(1), m.group(2).split(), i + 1
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise PageError(f"{path}:{start}: fenced block never closed")
        i += 1
        text = "\n".join(body)
        if words[:2] in (["sh", "run"], ["sh", "serve"], ["python", "run"]):
            options = dict(w.split("=", 1) for w in words[2:] if "=" in w)
            blocks.append(Block("python" if words[0] == "python" else words[1], text, start, options))
        elif words[:2] == ["text", "output"]:
            if not blocks or blocks[-1].kind not in ("run", "python") or blocks[-1].expected is not None:
                raise PageError(f"{path}:{start}: a `text output` block must follow a `sh run` or `python run` block")
            blocks[-1].expected, blocks[-1].expected_line = text, start
    return blocks


def line_pattern(expected_line):
    """A regex for one expected line: `<n>` a number, `…` any text, the rest literal."""
    parts = re.split(r"(<n>|…)", expected_line)
    return re.compile("".join(NUMBER if p == "<n>" else ".*?" if p == "…" else re.escape(p) for p in parts) + r"\Z")


def trimmed_lines(text):
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def output_matches(expected, actual):
    """Whether the actual lines match the expected lines (a lone `…` line takes any lines)."""
    want, got = trimmed_lines(expected), trimmed_lines(actual)
    patterns = [None if line.strip() == "…" else line_pattern(line) for line in want]
    memo = {}

    def match(i, j):  # want[i:] against got[j:]
        if (i, j) not in memo:
            if i == len(patterns):
                memo[i, j] = j == len(got)
            elif patterns[i] is None:
                memo[i, j] = any(match(i + 1, k) for k in range(j, len(got) + 1))
            else:
                memo[i, j] = j < len(got) and bool(patterns[i].match(got[j])) and match(i + 1, j + 1)
        return memo[i, j]

    sys.setrecursionlimit(max(10000, 4 * (len(want) + len(got))))
    return match(0, 0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Page:
    """One page's run: its environment, its server (if any), and clean-up."""

    def __init__(self, path, args, work):
        self.path, self.work, self.port = path, work, free_port()
        self.env = dict(os.environ)
        self.env["PATH"] = os.pathsep.join([os.path.abspath(args.bin_dir), os.path.abspath(args.examples_dir),
                                            self.env.get("PATH", "/usr/bin:/bin")])
        self.env.update(WORK=work, PORT=str(self.port), LC_ALL="C.UTF-8", NO_COLOR="1")
        self.python = args.python
        if args.python_path:  # the package the build made comes first
            self.env["PYTHONPATH"] = os.pathsep.join(
                [os.path.abspath(args.python_path)] + ([self.env["PYTHONPATH"]] if self.env.get("PYTHONPATH") else []))
        self.root = os.path.abspath(args.root)
        self.servers = []

    def normalise(self, output):
        return output.replace(self.work, "$WORK").replace(f":{self.port}", ":$PORT")

    def run(self, block, live=False):
        """Runs a command or Python block; returns (exit code, output). live: output goes to the terminal."""
        if block.kind == "python":
            command = [self.python, "-c", block.text]
        else:
            command = ["bash", "-e", "-o", "pipefail", "-c", block.text]
        try:
            if live:
                return subprocess.run(command, cwd=self.root, env=self.env, timeout=BLOCK_TIMEOUT_S).returncode, ""
            done = subprocess.run(command, cwd=self.root, env=self.env, timeout=BLOCK_TIMEOUT_S,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            return done.returncode, self.normalise(done.stdout.decode("utf-8", "replace"))
        except subprocess.TimeoutExpired:
            return 124, f"(timed out after {BLOCK_TIMEOUT_S} s)"

    def serve(self, block):
        """Starts a server block in the background and waits until /health answers."""
        log_path = os.path.join(self.work, f"server-{len(self.servers)}.log")
        log = open(log_path, "wb")
        server = subprocess.Popen(["bash", "-e", "-c", "exec " + block.text], cwd=self.root, env=self.env,
                                  stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
        self.servers.append(server)
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if server.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop_servers()
        raise PageError(f"{self.path}:{block.line}: the server did not become healthy "
                        f"(exit {server.returncode}); its log:\n" + open(log_path, errors="replace").read())

    def stop_servers(self):
        for server in self.servers:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGTERM)
                try:
                    server.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(server.pid, signal.SIGKILL)
                    server.wait()
        self.servers = []


def missing_requirement(blocks, root):
    for block in blocks:
        need = block.options.get("requires")
        if need and not os.path.exists(os.path.join(root, need)):
            return need
    return None


def check(path, args):
    blocks = parse_page(path)
    if not any(b.kind == "run" for b in blocks):
        raise PageError(f"{path}: no `sh run` block")
    need = missing_requirement(blocks, args.root)
    if need:
        print(f"{path}: skipped, {need} is missing")
        return SKIP
    work = tempfile.mkdtemp(prefix="course-")
    page = Page(path, args, work)
    skipped = 0
    try:
        for block in blocks:
            if block.kind == "serve":
                page.serve(block)
                print(f"{path}:{block.line}: server started: {block.text}")
                continue
            if block.kind == "python" and not args.python_path:
                print(f"{path}:{block.line}: skipped (a Python block, and no --python-path: the build has no "
                      "Python module, INFERLAB_PYTHON is off)")
                skipped += 1
                continue
            code, output = page.run(block)
            if code != 0:
                print(f"{path}:{block.line}: FAILED (exit {code}): {block.text}\n{output}")
                return 1
            if block.expected is not None and not output_matches(block.expected, output):
                print(f"{path}:{block.line}: FAILED: the output differs from the block at line {block.expected_line}\n"
                      f"command:\n{block.text}\n--- expected\n{block.expected}\n--- actual\n{output}")
                return 1
            print(f"{path}:{block.line}: ok: {block.text.splitlines()[0] if block.text else ''}")
        if skipped:
            print(f"{path}: every other block passed; skipped as a whole, {skipped} Python block(s) not run")
            return SKIP
        return 0
    finally:
        page.stop_servers()
        shutil.rmtree(work, ignore_errors=True)


def shown_command(block, args, root):
    """A block as a learner could type it: a command, or Python as a here-document to the interpreter."""
    lines = block.text.split("\n")
    if block.kind == "python":  # unindented, so that it can be pasted as it is
        python = os.path.relpath(args.python, root) if args.python.startswith(root + os.sep) else args.python
        where = f"PYTHONPATH={os.path.relpath(os.path.abspath(args.python_path), root)} " if args.python_path else ""
        return "\n".join([f"$ {where}{python} - <<'PY'"] + lines + ["PY"])
    return "\n".join(("$ " if n == 0 else "  ") + line for n, line in enumerate(lines))


def show(path, args):
    blocks = parse_page(path)
    need = missing_requirement(blocks, args.root)
    if need:
        print(f"this step needs {need}, which is missing")
        return 1
    stem = os.path.basename(path).split(".")[0]
    work = os.path.abspath(os.path.join(args.root, "out", "course", stem))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    page = Page(path, args, work)
    print(f"# {path}   (WORK={work} PORT={page.port})")
    try:
        for block in blocks:
            shown = shown_command(block, args, page.root)
            if block.kind == "python" and not args.python_path:
                print(f"{shown}\n(not run: the build has no Python module; see docs/python.md)\n", flush=True)
                continue
            if block.kind == "serve":
                print(f"{shown} &   # started in the background; stopped at the end of the step", flush=True)
                page.serve(block)
                continue
            print(shown, flush=True)
            code, _ = page.run(block, live=True)
            if code != 0:
                print(f"(exit {code})")
                return code
            print(flush=True)
        return 0
    finally:
        page.stop_servers()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    parser = argparse.ArgumentParser(description="Run the course book's command blocks.")
    parser.add_argument("mode", choices=["check", "show"])
    parser.add_argument("pages", nargs="+")
    parser.add_argument("--root", default=root, help="the project root (commands run there)")
    parser.add_argument("--bin-dir", default=os.path.join(root, "build", "bin"))
    parser.add_argument("--examples-dir", default=os.path.join(root, "build", "examples"))
    venv_python = os.path.join(root, ".venv", "bin", "python")
    parser.add_argument("--python", default=venv_python if os.path.exists(venv_python) else sys.executable,
                        help="the interpreter of `python run` blocks (default: the project's .venv)")
    build_python = os.path.join(root, "build", "python")
    parser.add_argument("--python-path", default=build_python if os.path.isdir(os.path.join(build_python, "inferlab")) else "",
                        help="the folder holding the inferlab package (the build's python/); empty: Python blocks are skipped")
    args = parser.parse_args()
    if args.mode == "show" and len(args.pages) != 1:
        parser.error("show takes one page")
    result = 0
    try:
        for page in args.pages:
            code = check(page, args) if args.mode == "check" else show(page, args)
            result = code if result in (0, SKIP) and code else result
    except PageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `show` piped into head
        return 1
    return result


if __name__ == "__main__":
    sys.exit(main())
