#!/usr/bin/python3
"""The doc runner's own test: real pages pass, a copy with one changed output fails, and the
placeholders match what they promise and nothing more. Arguments are passed on to run_pages.py."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "run_pages.py")
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from run_pages import output_matches  # noqa: E402

failures = []


def expect(what, condition):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def run_runner(page, *extra):
    done = subprocess.run([sys.executable, RUNNER, "check", page] + sys.argv[1:] + list(extra), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=240)
    return done.returncode, done.stdout.decode("utf-8", "replace")


def page_copy(source, old, new, folder):
    text = open(os.path.join(ROOT, "docs", "course", source), encoding="utf-8").read()
    assert old in text, f"{old!r} not in {source}"
    path = os.path.join(folder, source)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text.replace(old, new, 1))
    return path


# The matcher: numbers, any text, any lines; literal text stays literal.
expect("<n> matches integers, decimals, thousands and exponents",
       output_matches("a <n> b <n> c <n> d <n>", "a 12 b -0.5 c 4,096 d 7.3e-05"))
expect("<n> does not match a word", not output_matches("E2E: <n> ms", "E2E: fast ms"))
expect("… inside a line matches any text", output_matches("TTFT  16 …", "TTFT  16  38.07  43.92"))
expect("a lone … line matches zero lines", output_matches("a\n…\nb", "a\nb"))
expect("a lone … line matches many lines", output_matches("…\nE2E: <n> ms", "x\n\n\ny\nE2E: 3.5 ms"))
expect("a missing line fails", not output_matches("a\nb\nc", "a\nc"))
expect("an extra line fails", not output_matches("a\nb", "a\nb\nc"))
expect("regex characters are literal", not output_matches("[4, 1, 1]", "[4, 1, 1"))
expect("trailing spaces and blank lines are ignored", output_matches("x  \n\n", "x\n"))

with tempfile.TemporaryDirectory() as folder:
    code, out = run_runner(os.path.join(ROOT, "docs", "course", "05-kv-bytes.en.md"))
    expect("the unchanged page passes", code == 0)
    changed = page_copy("05-kv-bytes.en.md", "131,072 bytes / token", "131,073 bytes / token", folder)
    code, out = run_runner(changed)
    expect("a copy with one changed output fails", code == 1)
    expect("the failure names the block and shows both outputs",
           "FAILED: the output differs" in out and "131,073" in out and "131,072" in out)
    broken = page_copy("03-causal-attention.en.md", "causal_attention\n", "causal_attention --no-such-flag; exit 3\n", folder)
    code, out = run_runner(broken)
    expect("a failing command fails the page", code == 1 and "FAILED (exit 3)" in out)
    orphan = os.path.join(folder, "orphan.md")
    open(orphan, "w").write("```text output\nx\n```\n")
    code, out = run_runner(orphan)
    expect("an output block without a command is a page error (exit 2)", code == 2)
    skipped = os.path.join(folder, "skipped.md")
    open(skipped, "w").write("```sh run requires=no/such/file\ntrue\n```\n")
    code, out = run_runner(skipped)
    expect("a missing requirement skips the page (exit 77)", code == 77)


# `python run` blocks: run by the interpreter with the --python-path folder first on PYTHONPATH,
# their output compared like a command's; no --python-path skips the page, saying so.
PYTHON_PAGE = """```sh run
echo shell
```

```python run
import os, numbers_module
print(numbers_module.ANSWER, os.path.isdir(os.environ["WORK"]))
```

```text output
42 True
```
"""
with tempfile.TemporaryDirectory() as folder:
    modules = os.path.join(folder, "modules")
    os.makedirs(modules)
    open(os.path.join(modules, "numbers_module.py"), "w").write("ANSWER = 42\n")
    page = os.path.join(folder, "python.md")
    open(page, "w").write(PYTHON_PAGE)
    code, out = run_runner(page, "--python", sys.executable, "--python-path", modules)
    expect("a Python block runs with --python-path on PYTHONPATH and its output matches", code == 0)
    changed = os.path.join(folder, "python_changed.md")
    open(changed, "w").write(PYTHON_PAGE.replace("42 True", "43 True"))
    code, out = run_runner(changed, "--python", sys.executable, "--python-path", modules)
    expect("a Python block with a changed output fails", code == 1 and "FAILED: the output differs" in out)
    raising = os.path.join(folder, "python_raising.md")
    open(raising, "w").write(PYTHON_PAGE.replace("import os", "raise ValueError('bad step')\nimport os"))
    code, out = run_runner(raising, "--python", sys.executable, "--python-path", modules)
    expect("a Python block that raises fails the page with its traceback",
           code == 1 and "FAILED (exit 1)" in out and "ValueError: bad step" in out)
    code, out = run_runner(page, "--python", sys.executable, "--python-path=")
    expect("without --python-path the page is skipped (exit 77) after its other blocks ran",
           code == 77 and "ok: echo shell" in out and "skipped (a Python block" in out)

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
