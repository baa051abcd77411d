#!/usr/bin/env python3
"""Fails when a Python test under tests/ checks something with a bare `assert`: `python -O`
compiles asserts away, so such a check would pass whatever happened. Tests use
tests/e2e/e2e_checks.py's `check` (or raise) instead.    Usage: check_no_bare_asserts.py TESTS_DIR
"""
import ast
import pathlib
import sys


def bare_asserts(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_no_bare_asserts.py TESTS_DIR")
    found = 0
    for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
        for line in bare_asserts(path):
            print(f"{path}:{line}: a bare assert (compiled away by python -O): use check()")
            found += 1
    print(f"check_no_bare_asserts: {found} bare assert(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
