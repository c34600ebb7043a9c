#!/usr/bin/python3
"""Compiles areal's torch code against the headers of other PyTorch releases.

areal's torch code picks kernels by libtorch version (TORCH_VERSION_* guards
in plugins/torch_model, plugins/train_fsdp, plugins/inference_local); CI builds
against Debian's 1.13 only and gpu_rehearsal.sh against one CUDA PyTorch. This
takes the compile commands of a build made against a CUDA PyTorch wheel
(scripts/gpu_rehearsal.sh's, so every CUDA-only path is compiled too), swaps
that PyTorch's headers for each given wheel's, and compiles every torch
translation unit with -fsyntax-only: a guard that names the wrong release (an
op whose signature differs there) fails here instead of on a user's machine.
Headers only: it links and runs nothing (gpu_rehearsal.sh does that for one
PyTorch). Wheels come from `pip download --no-deps torch==X.Y.Z`.

  /usr/bin/python3 scripts/libtorch_versions_check.py build-gpu-rehearsal/build torch-2.8.0-*.whl torch-2.9.1-*.whl
"""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import zipfile


def wheel_version(wheel):
    with zipfile.ZipFile(wheel) as z:
        text = z.read("torch/version.py").decode()
    return re.search(r"__version__ = '([^']+)'", text).group(1)


def extract_headers(wheel, dest):
    with zipfile.ZipFile(wheel) as z:
        z.extractall(dest, [n for n in z.namelist() if n.startswith("torch/include/")])
    return os.path.join(dest, "torch", "include")


def torch_commands(build):
    """The build's torch translation units, and the include root they use."""
    entries = json.load(open(os.path.join(build, "compile_commands.json")))
    units, root = [], None
    for e in entries:
        if e["file"].endswith(".cu"):
            continue
        args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        roots = [a for a in args if a.endswith("/torch/include")]
        if not roots:
            continue
        root = root or roots[0]
        units.append((e["file"], e["directory"], args))
    if not units:
        sys.exit(f"libtorch_versions_check: {build} compiled nothing against a PyTorch wheel's headers (configure it with one: scripts/gpu_rehearsal.sh)")
    return units, root


def syntax_args(args, old_root, new_root, cxx17):
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if cxx17 and re.fullmatch(r"-std=(c|gnu)\+\+2[0a]", a):
            a = "-std=c++17"  # what the build uses for a libtorch before 2.12 (cmake/AREALTorch.cmake)
        out.append(a.replace(old_root, new_root))
    return [out[0], "-fsyntax-only"] + out[1:]


def check(wheel, units, old_root, jobs):
    version = wheel_version(wheel)
    major, minor = (int(x) for x in version.split("+")[0].split(".")[:2])
    with tempfile.TemporaryDirectory() as tmp:
        root = extract_headers(wheel, tmp)

        def compile_one(unit):
            path, directory, args = unit
            r = subprocess.run(syntax_args(args, old_root, root, (major, minor) < (2, 12)), cwd=directory, capture_output=True, text=True)
            return path, r.returncode, r.stderr

        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            results = list(pool.map(compile_one, units))
    failed = [(p, err) for p, rc, err in results if rc != 0]
    print(f"PyTorch {version}: {len(units) - len(failed)} of {len(units)} torch translation units compile")
    for path, err in failed:
        errors = [line for line in err.splitlines() if "error" in line][:5]
        print(f"  FAILED {path}\n    " + "\n    ".join(errors))
    return not failed


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    units, old_root = torch_commands(sys.argv[1])
    jobs = os.cpu_count() or 1
    ok = [check(w, units, old_root, jobs) for w in sys.argv[2:]]
    sys.exit(0 if all(ok) else 1)


if __name__ == "__main__":
    main()
