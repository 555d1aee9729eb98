#!/usr/bin/env python3
"""Fails when an archive needs an inferlab symbol that none of the allowed archives define.

For the lab: every inferlab:: function libinferlab_lab.a calls must be defined in the lab itself or
in inferlab_core (util, tensor, loading) — never in the engine, tokenizer or grammar archives. This
reads the archives' symbol tables (nm), so it sees every object, not only those a test executable
happens to pull in.

usage: check_links_no_model.py ARCHIVE ALLOWED_ARCHIVE...
"""
import subprocess
import sys


def symbols(archive: str, *flags: str) -> set:
    out = subprocess.run(["nm", *flags, archive], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and "8inferlab" in parts[-1]:  # the mangled namespace inferlab
            names.add(parts[-1])
    return names


def main() -> int:
    archive, allowed = sys.argv[1], sys.argv[2:]
    defined = symbols(archive, "--defined-only")
    for other in allowed:
        defined |= symbols(other, "--defined-only")
    missing = sorted(symbols(archive, "--undefined-only") - defined)
    if missing:
        demangled = subprocess.run(["c++filt"], input="\n".join(missing), capture_output=True, text=True).stdout
        for name in demangled.splitlines()[:20]:
            print(f"needs {name}")
        print(f"check_links_no_model: {archive} needs {len(missing)} inferlab symbol(s) defined outside its allowed archives")
        return 1
    print(f"check_links_no_model: {archive} needs nothing beyond its allowed archives")
    return 0


if __name__ == "__main__":
    sys.exit(main())
