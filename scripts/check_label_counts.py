#!/usr/bin/env python3
"""Fails when a CTest label has fewer tests than tests/label_minimums.txt commits to.

A suite that silently stops being built (a missing header, a CMake condition gone false, a test
binary that lists no tests) would otherwise turn CI green by running less. Run before the tests:
    check_label_counts.py BUILD_DIR MINIMUMS_FILE
MINIMUMS_FILE: one `label minimum` per line, `#` comments. Raising a minimum is how a suite that
grew stays guarded; lowering one is a reviewed change of its own.
"""
import collections
import json
import subprocess
import sys


def label_counts(build_dir):
    listing = subprocess.run(["ctest", "--test-dir", build_dir, "--show-only=json-v1"],
                             check=True, capture_output=True, text=True).stdout
    counts = collections.Counter()
    for test in json.loads(listing)["tests"]:
        for prop in test.get("properties", []):
            if prop["name"] == "LABELS":
                counts.update(prop["value"])
    return counts


def read_minimums(path):
    minimums = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or not parts[1].isdigit():
                sys.exit(f"{path}:{number}: expected 'label minimum', got {line!r}")
            minimums[parts[0]] = int(parts[1])
    return minimums


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check_label_counts.py BUILD_DIR MINIMUMS_FILE")
    counts = label_counts(sys.argv[1])
    failed = False
    for label, minimum in read_minimums(sys.argv[2]).items():
        have = counts.get(label, 0)
        verdict = "ok" if have >= minimum else "TOO FEW"
        failed |= have < minimum
        print(f"check_label_counts: {label}: {have} tests (minimum {minimum}) {verdict}")
    if failed:
        print("check_label_counts: a suite lost tests or was not built (see tests/README.md, "
              "'Suites that cannot vanish')")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
