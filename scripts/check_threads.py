#!/usr/bin/env python3
"""Every thread the product starts runs its body under a guard that logs and
counts an exception instead of letting it end the process (std::terminate):
plugins start threads with areal::sdk::guarded_thread, host code with
areal::guarded_thread (core/telemetry/guarded_thread.hpp). This check fails
on any other way of starting one in core/, plugins/, host/ and plugin_api/
(issue #32: one sampled token ended `areal-host serve`).

    scripts/check_threads.py
"""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from check_includes import strip_code  # noqa: E402  (comments and strings are not code)

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = ["core", "plugins", "host", "plugin_api"]
ALLOWED = {"plugin_api/include/areal/sdk.hpp", "core/telemetry/guarded_thread.hpp"}
RAW = [
    (re.compile(r"\bstd::thread\s*[({]"), "constructs a std::thread"),
    (re.compile(r"\bstd::thread\s+\w+\s*[({]"), "constructs a std::thread"),
    (re.compile(r"\bstd::jthread\b"), "uses std::jthread"),
    (re.compile(r"\bstd::async\s*\("), "uses std::async"),
    (re.compile(r"\bpthread_create\s*\("), "calls pthread_create"),
    (re.compile(r"\bPoco::Thread\b"), "uses Poco::Thread"),
]
CONTAINER = re.compile(r"std::(?:vector|deque|list)<\s*std::thread\s*>\s*(\w+)")


def problems(path):
    code = strip_code(path.read_text(errors="replace"))
    out = []
    for rx, what in RAW:
        for m in rx.finditer(code):
            out.append((code.count("\n", 0, m.start()) + 1, what))
    for name in set(CONTAINER.findall(code)):
        for m in re.finditer(r"\b" + re.escape(name) + r"\s*\.\s*emplace(?:_back)?\s*\(", code):
            out.append((code.count("\n", 0, m.start()) + 1, f"emplaces a thread into {name} (push_back a guarded_thread instead)"))
    return out


def main():
    files = sorted(p for f in FOLDERS for p in (ROOT / f).rglob("*") if p.suffix in {".cpp", ".hpp", ".h"})
    bad = 0
    for p in files:
        rel = str(p.relative_to(ROOT))
        if rel in ALLOWED:
            continue
        for line, what in problems(p):
            bad += 1
            print(f"{rel}:{line}: {what}; start threads with guarded_thread (sdk.hpp for plugins, core/telemetry/guarded_thread.hpp for the host)")
    if bad:
        print(f"check_threads: {bad} unguarded thread start(s)")
        return 1
    print(f"check_threads: {len(files)} files, every thread starts through guarded_thread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
