#!/usr/bin/env bash
# Prefix sharing (issue #36): train-step time and tokens computed with
# train.prefix_sharing off (every row on its own) and auto (shared prefixes
# once), side by side in one run on the same rows (areal_prefix_sharing_bench):
#   (a) group     16 samples of an 8k-token prompt with 300-token replies
#                 (the loss on the replies), micro_batch_tokens 16384
#   (b) sessions  4 sessions of 20 turns exported a row per call: a 200-token
#                 system prompt, each turn 60 tokens in and a 40-token reply
#                 (the loss on the row's last reply)
#   (c) quickstart the 144 rows of a real quickstart step (the last 144 of
#                 runs/quickstart/trial0/rollouts.jsonl) on its model
# (a) and (b) run a tiny Qwen3 (init-model --preset agent: 2 layers, hidden
# 64, 64k context) with the byte vocabulary; (c) needs scripts/quickstart.sh
# to have run.
#   bench/model/prefix_sharing.sh [BUILD_DIR] [THREADS] [STEPS]
set -euo pipefail
source "$(dirname "$0")/bench_env.sh" "$@"
steps=${3:-2}
"$build/bin/areal-host" init-model --family qwen3 --preset agent --tokenizer bytes --out "$work/model" --seed 1 2>&1 | head -1
/usr/bin/python3 - "$work" <<'PY'
import json, random, sys
work = sys.argv[1]
rng = random.Random(7)
tokens = lambda n: [rng.randrange(3, 256) for _ in range(n)]
with open(f"{work}/group.jsonl", "w") as f:
    prompt = tokens(8192)
    for _ in range(16):
        reply = tokens(300)
        f.write(json.dumps({"input_ids": prompt + reply, "loss_mask": [0] * len(prompt) + [1] * len(reply)}) + "\n")
with open(f"{work}/sessions.jsonl", "w") as f:
    for _ in range(4):
        history = tokens(200)
        for turn in range(20):
            history += tokens(60)
            reply = tokens(40)
            f.write(json.dumps({"input_ids": history + reply, "loss_mask": [0] * len(history) + [1] * len(reply)}) + "\n")
            history += reply
PY
report() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
name, r = sys.argv[1], json.load(open(sys.argv[2]))
off, on = r["off"], r["auto"]
print(f"\n{name}: {r['rows']} rows, {r['tokens']} row tokens, micro_batch_tokens {r['micro_batch_tokens']}, {r['steps']} timed steps, {r['threads']} threads")
for way, x in (("per row (off)", off), ("tree (auto)", on)):
    print(f"  {way:14s} step {x['step_seconds']:8.3f} s   computed tokens {x['computed_tokens']:8.0f}   micro-batches {x['micro_batches']:3d}"
          f"   first loss {x['first_loss']:.6f}   peak memory {x['peak_memory_bytes'] / 2**20:7.0f} MiB")
print(f"  speed-up {r['speedup']:.2f}x, {off['computed_tokens'] / on['computed_tokens']:.2f}x fewer tokens")
assert abs(off["first_loss"] - on["first_loss"]) < 1e-5 * max(1.0, abs(off["first_loss"])), "the two ways disagree on the loss"
PY
}
"$build/bin/areal_prefix_sharing_bench" "$work/model" "$threads" "$steps" 16384 "$work/group.jsonl" > "$work/group.json"
report "(a) group: 16 x (8192-token prompt + 300-token reply)" "$work/group.json"
"$build/bin/areal_prefix_sharing_bench" "$work/model" "$threads" "$steps" 16384 "$work/sessions.jsonl" > "$work/sessions.json"
report "(b) sessions: 4 x 20 turns, a row per call" "$work/sessions.json"
qs="$src/runs/quickstart/trial0"
[ -f "$qs/rollouts.jsonl" ] || { echo "(c) needs a quickstart run: scripts/quickstart.sh"; exit 1; }
tail -n 144 "$qs/rollouts.jsonl" | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    for row in json.loads(line)["rows"]:
        print(json.dumps({"input_ids": row["input_ids"], "loss_mask": row["loss_mask"]}))' > "$work/quickstart.jsonl"
"$build/bin/areal_prefix_sharing_bench" "$src/runs/quickstart_format/trial0/final" "$threads" $((steps * 10)) 8192 "$work/quickstart.jsonl" > "$work/quickstart.json"
report "(c) quickstart: one step's rows" "$work/quickstart.json"
