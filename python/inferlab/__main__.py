"""`python -m inferlab ARGS` and the `inferlab` console script: the CLI itself, run in place of
this process (same arguments, exit status and signals)."""
import os
import sys
from pathlib import Path


def cli_path() -> Path:
    """The inferlab executable: the wheel's (inferlab/bin/inferlab), else the build tree's
    (build/bin/inferlab beside build/python/inferlab)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "bin" / "inferlab", here.parent.parent / "bin" / "inferlab"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(f"inferlab: no CLI executable beside the package ({here / 'bin' / 'inferlab'})")


def main() -> None:
    cli = str(cli_path())
    sys.stdout.flush()
    os.execv(cli, [cli, *sys.argv[1:]])


if __name__ == "__main__":
    main()
