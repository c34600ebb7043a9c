#!/usr/bin/python3
"""Prints the end of each failed test's output, from ctest's own logs.

scripts/test.sh calls it last, so that the reason a test failed is at the
bottom of a long CI log, where a truncated copy of that log still shows it.
  failed_test_tails.py BUILD_DIR [BUILD_DIR ...]
"""
import os
import sys

LINES = 60  # enough for a failed check and the service log lines after it


def failed_names(build):
    path = os.path.join(build, "Testing", "Temporary", "LastTestsFailed.log")
    if not os.path.exists(path):
        return []
    return [line.strip().split(":", 1)[1] for line in open(path, errors="replace") if ":" in line]


def outputs(build):
    """Each test's output in the last run, by name."""
    path = os.path.join(build, "Testing", "Temporary", "LastTest.log")
    found, name, lines, inside = {}, None, [], False
    for line in open(path, errors="replace") if os.path.exists(path) else []:
        if " Test: " in line and not inside:
            name = line.split(" Test: ", 1)[1].strip()
        elif line.startswith("Output:") and name is not None:
            inside, lines = True, []
        elif line.startswith("<end of output>") and inside:
            found[name], inside = lines[1:], False  # lines[0] is the dashed rule
        elif inside:
            lines.append(line.rstrip("\n"))
    return found


def main():
    for build in sys.argv[1:]:
        names = failed_names(build)
        if not names:
            continue
        out = outputs(build)
        for name in names:
            lines = out.get(name)
            print(f"===== failed in {build}: {name} (last {LINES} lines of its output) =====")
            print("\n".join(lines[-LINES:]) if lines is not None else "(ctest's log has no output for it: timed out or not run)")


if __name__ == "__main__":
    main()
