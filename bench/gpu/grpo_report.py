"""A GPU GRPO run's metrics as Markdown (scripts/gpu_check.sh, parts b and e).

    grpo_report.py RUN_DIR STEPS WEIGHT_UPDATE [DEVICE]

Checks that every step ran on DEVICE (default cuda:0; cpu in gpu_check's
rehearsal) in bfloat16 with a real gradient and
the hand-off kind expected ("memory": the whole weights, "adapter": LoRA),
then prints a row a step: reward, loss, gradient norm, tokens, rollout wait,
train time, hand-off time, and both engines' peak device memory.
"""
import json
import sys


def main():
    run, steps, handoff = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    device = sys.argv[4] if len(sys.argv) > 4 else "cuda:0"
    rows = [json.loads(line) for line in open(f"{run}/metrics.jsonl") if '"eval"' not in line]
    assert len(rows) == steps, f"{len(rows)} metrics rows for {steps} steps"
    for r in rows:
        assert r["device"] == device and r["dtype"] == "bfloat16", r
        assert r["weight_update"] == handoff, f"hand-off {r['weight_update']}, expected {handoff}"
        assert r["peak_device_memory_bytes"] > 0 and r["inference_peak_device_memory_bytes"] > 0, r
        assert r["grad_norm"] > 0, f"step {r['step']}: no gradient (every answer of every group got the same reward?)"
    gib = lambda b: f"{b / 2**30:.2f} GiB"
    print("| step | reward | loss | grad_norm | tokens | rollout wait s | train s | hand-off s | peak device memory: train step / engine |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['step']} | {r['reward_mean']:.3f} | {r['loss']:.4f} | {r['grad_norm']:.3f} | {int(r['tokens'])} | {r['seconds_rollout_wait']:.2f} | "
              f"{r['seconds_train']:.2f} | {r['seconds_weight_update']:.3f} | {gib(r['peak_device_memory_bytes'])} / {gib(r['inference_peak_device_memory_bytes'])} |")
    print()
    print(f"{steps} steps, policy version {rows[-1]['policy_version'] + 1} served by the local engine at the end; "
          f"{'weights' if handoff == 'memory' else 'the adapter'} handed over in memory on the GPU after each step.")


if __name__ == "__main__":
    main()
