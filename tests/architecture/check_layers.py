#!/usr/bin/env python3
"""Fails when a file includes a header of a layer it may not depend on.

The layers and their allowed edges are written once, in docs/architecture.md, in the fenced block
tagged `layers` ("model: util tensor loading" = files of model/ may include util, tensor, loading
and model itself). A file's layer is its folder: include/inferlab/<layer>/, src/<layer>/,
tools/ (tools), examples/ (examples), python/ (python); a sub-folder named as a layer of its own ("model/graph") is
that layer, with its own, usually stricter, rule. An include's layer is read from its path:
"inferlab/<layer>/x.h" (public), "<layer>/x.h" (an internal header under src/), or "x.h" next to
the including file (its own layer).

Public headers (include/inferlab/) may include only the C++ standard library (<vector>, ...) and
the headers listed in the block tagged `public-third-party`: library types stay out of the API.

usage: check_layers.py ROOT [RULES]   (ROOT: the tree to check; RULES: the document whose blocks are
                                      the rules, ROOT/docs/architecture.md when not given)
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', re.M)


def fenced_block(doc: str, tag: str) -> str:
    m = re.search(r"^```" + tag + r"\n(.*?)^```", doc, re.M | re.S)
    if not m:
        sys.exit(f"check_layers: docs/architecture.md has no ```{tag} block")
    return m.group(1)


def read_rules(rules: pathlib.Path):
    doc = rules.read_text(encoding="utf-8")
    allowed = {}
    for line in fenced_block(doc, "layers").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        layer, _, deps = line.partition(":")
        allowed[layer.strip()] = {layer.strip(), *deps.split()}
    for layer, deps in allowed.items():
        unknown = deps - allowed.keys()
        if unknown:
            sys.exit(f"check_layers: layer '{layer}' names unknown layers {sorted(unknown)}")
    third_party = set(fenced_block(doc, "public-third-party").split())
    return allowed, third_party


def deepest_layer(folders, layers):
    """The most specific layer a folder path is in: "model/graph" before "model"."""
    for k in range(len(folders), 0, -1):
        name = "/".join(folders[:k])
        if name in layers:
            return name
    return None


def layer_of_file(rel: pathlib.PurePosixPath, layers):
    parts = rel.parts
    if parts[:2] == ("include", "inferlab") and len(parts) > 3:
        return deepest_layer(parts[2:-1], layers)
    if parts[0] == "src" and len(parts) > 2:
        return deepest_layer(parts[1:-1], layers)
    if parts[0] in ("tools", "examples", "python") and parts[0] in layers:
        return parts[0]
    return None


def layer_of_include(path: str, own: str, layers):
    parts = path.split("/")
    if parts[0] == "inferlab":
        return (deepest_layer(parts[1:-1], layers) or "?") if len(parts) > 2 else "?"
    if len(parts) > 1 and parts[0] in layers:
        return deepest_layer(parts[:-1], layers)
    return own  # a header beside the file


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    rules = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else root / "docs" / "architecture.md"
    allowed, third_party = read_rules(rules)
    problems, checked = [], 0
    for top in ("include", "src", "tools", "examples", "python"):
        for file in sorted((root / top).rglob("*")):
            if file.suffix not in (".h", ".hpp", ".cpp", ".cc"):
                continue
            rel = pathlib.PurePosixPath(file.relative_to(root).as_posix())
            own = layer_of_file(rel, allowed)
            if own is None:
                problems.append(f"{rel}: not in any layer of docs/architecture.md")
                continue
            checked += 1
            public = rel.parts[0] == "include"
            text = file.read_text(encoding="utf-8", errors="replace")
            for m in INCLUDE.finditer(text):
                kind, path = m.groups()
                line = text.count("\n", 0, m.start()) + 1
                if kind == '"':
                    target = layer_of_include(path, own, allowed)
                    if target not in allowed[own]:
                        problems.append(f"{rel}:{line}: {own} includes \"{path}\" of layer {target}, "
                                        f"not among {own}'s allowed layers ({' '.join(sorted(allowed[own] - {own})) or 'none'})")
                elif public and not re.fullmatch(r"[a-z_]+", path) and path not in third_party:
                    problems.append(f"{rel}:{line}: public header includes <{path}>: keep third-party types "
                                    f"out of the API (allowed besides the standard library: {' '.join(sorted(third_party))})")
    for p in problems:
        print(p)
    print(f"check_layers: {checked} files, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
