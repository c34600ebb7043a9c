"""Prints the processes still running that a test started: those whose
environment holds AREAL_TEST_MARK=<mark> (the test exports it, and every
process it starts inherits it), leaving out this script and its ancestors
(the test's own shells). Exit status 1 when there is any.

    leftover_processes.py MARK
"""
import os
import sys

mark = ("AREAL_TEST_MARK=" + sys.argv[1]).encode()
ancestors = set()
pid = os.getpid()
while pid > 1:
    ancestors.add(pid)
    try:
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        break
left = []
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) in ancestors:
        continue
    try:
        with open(f"/proc/{entry}/environ", "rb") as f:
            env = f.read().split(b"\0")
        with open(f"/proc/{entry}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{entry}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        continue  # ended meanwhile, or not ours to read
    if mark in env and state != "Z":
        left.append(f"{entry} {cmd}")
for line in left:
    print(line)
sys.exit(1 if left else 0)
