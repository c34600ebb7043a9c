"""Checks a LoRA run whose trainer handed its adapter to real vLLM after
every step (see vllm_adapters.sh), from metrics.jsonl and vLLM's log:
  - every step ran and handed over the adapter alone (weight_update
    "adapter", its bytes > 0), within the staleness bound (2);
  - vLLM's log-probs of tokens sampled with the adapter the trainer had just
    handed over equal the trainer's recomputation within BOUND
    (logprob_drift_max), on some tokens at least;
  - vLLM loaded a new adapter for every version (the start's and each
    step's) and unloaded retired ones, whose folders left ADAPTER_DIR.
  check_adapter_run.py RUN_DIR STEPS BOUND VLLM_LOG LOADS_BEFORE ADAPTER_DIR
"""
import json
import os
import sys

run, steps, bound, vllm_log, loads_before, adapter_dir = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
failed = 0


def check(ok, what):
    global failed
    failed += not ok
    print(("ok " if ok else "FAIL ") + what)


rows = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"))]
rows = [r for r in rows if not r.get("eval")]
check([r["step"] for r in rows] == list(range(1, steps + 1)), f"steps {[r['step'] for r in rows]}")
check(all(r.get("weight_update") == "adapter" for r in rows), f"weight updates: {sorted({r.get('weight_update') for r in rows})}")
sizes = sorted({r.get("weight_update_bytes", 0) for r in rows})
check(all(r.get("weight_update_bytes", 0) > 0 for r in rows), f"adapter bytes handed over per step: {sizes}")
check(all(r["staleness_max"] <= 2 for r in rows), f"staleness max {max(r['staleness_max'] for r in rows)} <= 2")
tokens = sum(r.get("logprob_drift_tokens", 0) for r in rows)
drift = max((r["logprob_drift_max"] for r in rows if r.get("logprob_drift_tokens", 0) > 0), default=float("nan"))
check(tokens > 0 and drift <= bound,
      f"vLLM's log-probs with the handed-over adapter vs the trainer's: max difference {drift:.3g} on {tokens} tokens (bound {bound})")
log = open(vllm_log).read()
loads = log.count('POST /v1/load_lora_adapter HTTP/1.1" 200') - loads_before
unloads = log.count('POST /v1/unload_lora_adapter HTTP/1.1" 200')
check(loads == steps + 1, f"vLLM loaded {loads} adapters for {steps} steps (the start's and one a step)")
check(unloads >= steps - 1, f"vLLM unloaded {unloads} retired adapters")
left = sorted(os.listdir(adapter_dir))
check(1 <= len(left) <= 2, f"adapter folders left on disk: {left}")
sys.exit(1 if failed else 0)
