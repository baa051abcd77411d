#!/usr/bin/env python3
"""Fails a test run on any skipped test that tests/skip_allowlist.txt does not allow.

Reads the JUnit XML that `ctest --output-junit` writes, prints every skipped test with its skip
message and whether a rule allows it, then every failed test with the last lines of its output
(so the tail of a log names what failed), then a closing line "N passed, N failed" where "failed"
counts failed tests plus skips no rule allows. Exit status 1 when that count is non-zero.

Usage: check_skips.py JUNIT_XML ALLOWLIST
"""

import re
import sys
import xml.etree.ElementTree as ET


def load_rules(path):
    rules = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, reason = line.partition(" ~ ")
            if not sep or not name.strip() or not reason.strip():
                sys.exit(f"{path}:{number}: expected '<name regex> ~ <reason regex>', got {line!r}")
            rules.append((re.compile(name.strip()), re.compile(reason.strip()), number))
    return rules


def skip_message(case):
    """The lines of the test's output that say why it skipped (GoogleTest: '...: Skipped')."""
    out = case.findtext("system-out") or ""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.endswith("Skipped") and i + 1 < len(lines):
            return lines[i + 1].strip()
    skipped = case.find("skipped")
    return (skipped.get("message", "") if skipped is not None else "") or "(no message)"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    junit, allowlist = sys.argv[1], sys.argv[2]
    rules = load_rules(allowlist)
    cases = ET.parse(junit).getroot().iter("testcase")
    passed = 0
    failures = []  # (name, last lines of its output)
    skips = []  # (name, message, allowing rule line or None)
    for case in cases:
        name = case.get("name", "")
        status = case.get("status", "")
        if case.find("failure") is not None or case.find("error") is not None or status == "fail":
            failures.append((name, (case.findtext("system-out") or "").splitlines()[-15:]))
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            message = skip_message(case)
            rule = next((n for name_re, reason_re, n in rules
                         if name_re.search(name) and reason_re.search(message)), None)
            skips.append((name, message, rule))
        else:
            passed += 1
    disallowed = [s for s in skips if s[2] is None]
    print(f"check_skips: {len(skips)} skipped test(s), {len(disallowed)} not on {allowlist}")
    for name, message, rule in skips:
        verdict = f"allowed by {allowlist}:{rule}" if rule else "NOT ALLOWED"
        print(f"  skipped: {name}: {message} [{verdict}]")
    for name, tail in failures:
        print(f"  FAILED: {name}")
        for line in tail:
            print(f"    | {line}")
    print(f"{passed} passed, {len(failures) + len(disallowed)} failed")
    return 1 if failures or disallowed else 0


if __name__ == "__main__":
    sys.exit(main())
