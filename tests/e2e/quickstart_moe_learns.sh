#!/usr/bin/env bash
# The MoE quickstart as `scripts/quickstart.sh --moe` runs it, seeded: a tiny
# Qwen3-MoE model (init-model --family qwen3_moe), the format stage, then
# configs/quickstart_moe.yaml with the real example agent, served by the local
# engine and trained by fsdp with the routers' load-balancing loss. Checks
# what issue #35 promises for it: the last 50 steps' mean reward and the
# greedy evaluation of the final weights >= 0.9 (check_quickstart_run.py
# --masters), within the staleness bound, with the balancing loss reported
# every step; every trained row carried the rollout's routing (the gateway
# recorded it, the trainer replayed it: routing_replay rollout refuses a
# batch without); and the final folder is a Qwen3-MoE model.
set -euo pipefail
host=$1 src=$2 work=$3
source "$src/tests/support/trainer_runs.sh"
require_agent_modules "$src"
rm -rf "$work" && mkdir -p "$work"
"$host" init-model --family qwen3_moe --preset tiny --tokenizer bytes --out "$work/model" --seed 1 >/dev/null
format_warmup "$src" "$work"
run_config "$src/configs/quickstart_moe.yaml" "$work" "$work/run.log" experiment.trial=t experiment.seed=7
grep -o "done: .*" "$work/run.log"
run="$work/runs/quickstart_moe/t"
steps=$(/usr/bin/python3 -c "import json; print(sum(1 for l in open('$run/metrics.jsonl') if not json.loads(l).get('eval')))")
/usr/bin/python3 "$src/tests/support/check_quickstart_run.py" "$run" "$steps" --masters
/usr/bin/python3 - "$run" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/metrics.jsonl") if not json.loads(l).get("eval")]
aux = [r.get("moe_aux_loss") for r in rows]
assert all(isinstance(a, float) and a > 0 for a in aux), f"moe_aux_loss missing in some rows: {aux[:5]}"
print(f"load-balancing loss every step: {aux[0]:.4f} (first) -> {aux[-1]:.4f} (last); 2 is perfectly balanced (top 2)")
# Every exported row holds the routing of all its positions but the last.
rollouts = [json.loads(l) for l in open(f"{sys.argv[1]}/rollouts.jsonl")]
rows_seen = 0
for rec in rollouts:
    for row in rec.get("session", rec).get("rows", []):
        r = row.get("routed_experts")
        assert r and r["moe_layers"] == 2 and r["top_k"] == 2 and r["num_experts"] == 8 and r["dtype"] == "uint8", row.get("interaction_id")
        assert r["positions"] == len(row["input_ids"]) - 1, (r["positions"], len(row["input_ids"]))
        rows_seen += 1
assert rows_seen > 0, "no rows in rollouts.jsonl"
print(f"{rows_seen} rows, each with the rollout's routing (2 layers x top-2, uint8)")
cfg = json.load(open(f"{sys.argv[1]}/final/config.json"))
assert cfg["model_type"] == "qwen3_moe" and cfg["num_experts"] == 8, cfg
PY
echo OK
