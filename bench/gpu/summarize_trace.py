"""Where a Kineto trace's GPU time goes (scripts/gpu_check.sh, AREAL_BENCH_PROFILE).

    summarize_trace.py TRACE.json TITLE [TOP]

Prints Markdown: the span from the first to the last GPU activity, the time
the GPU was busy (kernels, copies, memsets; overlap counted once), the
number of kernels, time by kind (matrix products, attention, normalisation,
elementwise, reductions, copies, other), and the TOP kernels by total time.
"""
import json
import sys
from collections import defaultdict

KINDS = (  # first match wins; names are CUDA kernel symbols
    ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "splitk")),
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("norm", ("rms_norm", "rmsnorm", "layer_norm", "layernorm")),
    ("softmax", ("softmax",)),
    ("reduction", ("reduce",)),
    ("elementwise", ("elementwise", "vectorized", "unrolled", "pointwise")),
    ("index/copy", ("index", "gather", "scatter", "copy", "cat", "memcpy", "memset")),
)


def kind(name):
    low = name.lower()
    for label, keys in KINDS:
        if any(k in low for k in keys):
            return label
    return "other"


def main():
    path, title = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    trace = json.load(open(path))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]
    if not gpu:
        print(f"{title}: the trace holds no GPU activity")
        return
    gpu.sort(key=lambda e: e["ts"])
    start, end = gpu[0]["ts"], max(e["ts"] + e["dur"] for e in gpu)
    busy, cursor = 0.0, start
    for e in gpu:  # union of the intervals
        lo, hi = max(e["ts"], cursor), e["ts"] + e["dur"]
        if hi > lo:
            busy += hi - lo
            cursor = hi
    by_name, by_kind = defaultdict(lambda: [0.0, 0]), defaultdict(float)
    for e in gpu:
        by_name[e["name"]][0] += e["dur"]
        by_name[e["name"]][1] += 1
        by_kind[kind(e["name"])] += e["dur"]
    total = sum(v[0] for v in by_name.values())
    kernels = sum(1 for e in gpu if e.get("cat") == "kernel")
    print(f"{title}: GPU activity spans {(end - start) / 1e3:.1f} ms, busy {busy / 1e3:.1f} ms ({100 * busy / (end - start):.0f}%), "
          f"{kernels} kernels (mean {total / max(1, len(gpu)):.1f} us each).")
    print()
    print("| kind | GPU time | share |")
    print("| --- | --- | --- |")
    for label, t in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"| {label} | {t / 1e3:.1f} ms | {100 * t / total:.0f}% |")
    print()
    print("| kernel | calls | GPU time | share |")
    print("| --- | --- | --- | --- |")
    for name, (t, n) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]:
        short = name if len(name) <= 90 else name[:87] + "..."
        print(f"| `{short}` | {n} | {t / 1e3:.2f} ms | {100 * t / total:.1f}% |")
    print()


if __name__ == "__main__":
    main()
