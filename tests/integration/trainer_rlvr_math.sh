#!/usr/bin/env bash
# configs/rlvr_math.yaml, shortened: the rlvr_math workflow chats with the
# gateway in process (episode.chat), multi-turn with feedback. Checks that
# every episode's calls come back as its gateway session's rows, one per
# turn, that the verifier's reward sits on the last call and flows back to
# the first by turn_discount (0.9), and that training consumed them.
set -euo pipefail
host=$1 src=$2 work=$3
source "$src/tests/support/trainer_runs.sh"
fresh_model_workdir "$work" 4
run_config "$src/configs/rlvr_math.yaml" "$work" "$work/log" trainer.total_steps=4
/usr/bin/python3 - "$work/runs/rlvr_math/trial0" <<'PY'
import json, sys
run = sys.argv[1]
episodes = [json.loads(l) for l in open(f"{run}/rollouts.jsonl")]
assert len(episodes) >= 4 * 4 * 4, len(episodes)
two_turns = 0
for e in episodes:
    assert e["status"] == "ok", e.get("error")
    assert e["completions"] == [], "rlvr_math makes no token-level generate calls"
    rows, result = e["session"]["rows"], e["result"]
    assert len(rows) == result["turns"] and 1 <= len(rows) <= 2, (len(rows), result)
    assert rows[-1]["reward"] == result["reward"], (rows[-1]["reward"], result)
    for r in rows:
        assert len(r["input_ids"]) == len(r["loss_mask"]) == len(r["logprobs"]) == len(r["versions"])
        assert sum(r["loss_mask"]) > 0 and all(v >= 0 for v, m in zip(r["versions"], r["loss_mask"]) if m)
    if len(rows) == 2:
        two_turns += 1
        assert abs(rows[0]["reward"] - 0.9 * rows[1]["reward"]) < 1e-9, [r["reward"] for r in rows]
        # hf prompts: the second call's prompt holds the first call's exchange.
        assert len(rows[1]["input_ids"]) > len(rows[0]["input_ids"])
assert two_turns > 0, "no episode took a second turn"
metrics = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
assert [m["step"] for m in metrics] == [1, 2, 3, 4] and all(m["loss_tokens"] > 0 for m in metrics)
print(f"{len(episodes)} episodes, {two_turns} with a second turn, rewards on the session rows")
PY
echo OK
