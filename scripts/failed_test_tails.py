#!/usr/bin/python3
"""Prints the end of each failed test's output, from ctest's log of its last run.

scripts/test.sh calls it last, so that the reason a test failed is at the
bottom of a long CI log, where a truncated copy of that log still shows it.
It reads Testing/Temporary/LastTest.log only: ctest leaves an old
LastTestsFailed.log in place after a run that passes.
  failed_test_tails.py BUILD_DIR [BUILD_DIR ...]
"""
import os
import sys

LINES = 60  # enough for a failed check and the service log lines after it


def failed_outputs(build):
    """(name, output lines) of each test of the last run that did not pass."""
    path = os.path.join(build, "Testing", "Temporary", "LastTest.log")
    if not os.path.exists(path):
        return []
    failed, name, lines, inside, ended = [], None, [], False, False
    for line in open(path, errors="replace"):
        if inside:
            if line.startswith("<end of output>"):
                inside, ended = False, True
            else:
                lines.append(line.rstrip("\n"))
        elif " Test: " in line:
            name, lines, ended = line.split(" Test: ", 1)[1].strip(), [], False
        elif line.startswith("Output:") and name is not None:
            inside = True
        elif ended and line.startswith("Test ") and not line.startswith("Test time"):
            # "Test Passed", or "Test Pass Reason:" for a test passed by its PASS_REGULAR_EXPRESSION.
            if not line.startswith("Test Pass"):
                failed.append((name, lines[1:]))  # lines[0] is the dashed rule
            ended = False
    return failed


def main():
    for build in sys.argv[1:]:
        for name, lines in failed_outputs(build):
            print(f"===== failed in {build}: {name} (last {LINES} lines of its output) =====")
            print("\n".join(lines[-LINES:]))


if __name__ == "__main__":
    main()
