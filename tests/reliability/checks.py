"""The reliability tests' checks: each prints ok / FAIL with what it checked, and the failures are
collected so a test runs every check and then exits non-zero when any failed."""

failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)
