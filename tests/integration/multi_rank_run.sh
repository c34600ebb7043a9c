#!/usr/bin/env bash
# `areal-host run` with train.world_size 2 (issue #14), on one machine:
#  1. same batches, same results: an inline run whose episodes are
#     deterministic (one at a time, seeded sampling) gives, step by step,
#     the same rewards as one rank and the same loss, gradient norm and
#     algorithm stats within 1e-3 (relative; float32 sums in another order,
#     over 8 AdamW steps: 1.4e-4 at step 8 with OpenBLAS's Zen kernels,
#     whose rows round by their place in a product, docs/gpu.md)
#  2. both ranks trained (their logs), checkpoints resume with the same
#     world size, and another world size is refused, naming the right one
#  3. killing a rank ends the run with a message naming it, and leaves no
#     process behind; killing the controller (kill -9) leaves none either
#  4. launched inference servers (launcher.servers): one killed leaves the
#     pool and the run finishes on the other; with none left the run ends
#   multi_rank_run.sh AREAL_HOST SOURCE_DIR WORK
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
# The end-of-turn token is likely at the start (logit 4), so rewards are mixed from step 1.
"$host" init-model --family qwen3 --preset tiny --tokenizer bytes --out model --seed 2 --end-turn-logit 4 >/dev/null
/usr/bin/python3 - data.jsonl <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for d in range(10):
        prompt = [257] + list(f"user\nSay {d}".encode()) + [258, 10, 257] + list(b"assistant\n")
        f.write(json.dumps({"input_ids": prompt, "target_ids": [258]}) + "\n")
PY
cat > cfg.yaml <<YAML
experiment: {name: dp, seed: 3, output_dir: runs}
inference: {plugin: local, model_path: model}
gateway: {plugin: none}
workflow: {plugin: token_match, temperature: 1.0}
train: {plugin: fsdp, model_path: model, lr: 0.003}
algorithm: {plugin: grpo}
rollout: {dataset: data.jsonl, n_samples: 4, concurrency: 1, max_concurrent_rollouts: 1}
trainer: {total_steps: 8, batch_size: 2, recompute_logprob: true}
dashboard: {enabled: false}
YAML
# Every process this test starts carries the mark; none may outlive its run.
export AREAL_TEST_MARK=$work
no_leftovers() {
  /usr/bin/python3 "$src/tests/support/leftover_processes.py" "$work" > left.txt || { echo "FAIL: processes left $1:"; cat left.txt; exit 1; }
}

# 1 + 2: one rank, then two.
"$host" run --config cfg.yaml experiment.trial=one 2> one.log || { tail -20 one.log; exit 1; }
"$host" run --config cfg.yaml experiment.trial=two train.world_size=2 trainer.checkpoint_every=4 2> two.log || { tail -30 two.log; exit 1; }
/usr/bin/python3 - runs/dp <<'PY'
import json, sys
root = sys.argv[1]
one = [json.loads(l) for l in open(f"{root}/one/metrics.jsonl")]
two = [json.loads(l) for l in open(f"{root}/two/metrics.jsonl")]
assert len(one) == len(two) == 8, (len(one), len(two))
assert any(r["grad_norm"] > 0 for r in one), "no step had a learning signal: the comparison would be empty"
worst = 0.0
for a, b in zip(one, two):
    assert a["reward_mean"] == b["reward_mean"], ("the ranks' weights sampled other tokens", a["step"], a["reward_mean"], b["reward_mean"])
    assert b["train_ranks"] == 2 and b["world_size"] == 2, b
    for k in ("loss", "grad_norm", "tokens", "loss_tokens", "algo_pg_loss", "algo_approx_kl", "algo_clip_fraction", "algo_importance_weight",
              "algo_advantage_mean"):
        d = abs(a[k] - b[k]) / max(1.0, abs(a[k]))
        worst = max(worst, d)
        assert d <= 1e-3, (a["step"], k, a[k], b[k])
print(f"2 ranks match 1 rank over {len(one)} steps: rewards equal, largest relative difference {worst:.2e}")
PY
for r in 0 1; do
  grep -q "rank $r step 8 " runs/dp/two/logs/rank$r.log || { echo "FAIL: rank $r did not train 8 steps"; cat runs/dp/two/logs/rank$r.log; exit 1; }
done
grep -q "^\[rank1\] .*rank 1 step 8 " two.log || { echo "FAIL: rank 1's log lines are not in the run's output behind [rank1]"; exit 1; }
"$host" run --config cfg.yaml experiment.trial=two train.world_size=2 trainer.checkpoint_every=4 trainer.total_steps=12 \
  trainer.resume=true 2> resume.log || { tail -30 resume.log; exit 1; }
grep -q "resumed from .*step_8 at step 8" resume.log || { echo "FAIL: did not resume at step 8"; tail resume.log; exit 1; }
[ "$(wc -l < runs/dp/two/metrics.jsonl)" = 12 ] || { echo "FAIL: the resumed run did not reach step 12"; exit 1; }
if "$host" run --config cfg.yaml experiment.trial=two train.world_size=3 trainer.total_steps=16 trainer.resume=true 2> wrong.log; then
  echo "FAIL: resuming 2 ranks' checkpoint with 3 ranks was accepted"; exit 1
fi
grep -q "was saved by 2 rank(s) and this run has 3: resume with train.world_size=2" wrong.log || { echo "FAIL: unclear error"; tail wrong.log; exit 1; }
# A fresh run in that folder sets the old run's checkpoints aside: a later
# resume continues the fresh run, not the old run's newer step_12.
"$host" run --config cfg.yaml experiment.trial=two train.world_size=2 trainer.checkpoint_every=1 trainer.total_steps=2 2> fresh.log ||
  { tail -30 fresh.log; exit 1; }
grep -q "previous run's checkpoints moved to .*checkpoints.previous" fresh.log || { echo "FAIL: the fresh run did not say it set the checkpoints aside"; exit 1; }
[ -f runs/dp/two/checkpoints.previous/step_12/host_state.json ] && [ ! -e runs/dp/two/checkpoints/step_12 ] ||
  { echo "FAIL: the old run's checkpoints were not set aside"; ls runs/dp/two/checkpoints*; exit 1; }
"$host" run --config cfg.yaml experiment.trial=two train.world_size=2 trainer.checkpoint_every=1 trainer.total_steps=3 trainer.resume=true 2> fresh_resume.log ||
  { tail -30 fresh_resume.log; exit 1; }
grep -q "resumed from .*step_2 at step 2" fresh_resume.log || { echo "FAIL: the resume did not continue the fresh run"; grep resumed fresh_resume.log; exit 1; }
no_leftovers "after the runs"
echo "checkpoint resume with 2 ranks, 3 ranks refused, a fresh run sets old checkpoints aside: ok"

# 3: kill rank 1 in the middle of a long run.
"$host" run --config cfg.yaml experiment.trial=kill train.world_size=2 trainer.total_steps=100000 2> kill.log & run=$!
for _ in $(seq 300); do grep -q "rank 1 step 3 " runs/dp/kill/logs/rank1.log 2>/dev/null && break; sleep 0.1; done
pid=$(grep -o "train rank 1 started (pid [0-9]*" kill.log | grep -o "[0-9]*$")
kill -9 "$pid"
start=$(date +%s)
if wait $run; then echo "FAIL: the run succeeded without rank 1"; exit 1; fi
echo "the run ended $(( $(date +%s) - start )) s after rank 1 was killed"
grep -q "rank1 (pid $pid) was killed by signal 9 (SIGKILL); ending the run" kill.log &&
  grep -q "^areal-host: the run ended because rank1 (pid $pid) was killed by signal 9" kill.log || { echo "FAIL: no clear message"; tail kill.log; exit 1; }
grep "^areal-host: " kill.log
sleep 1
no_leftovers "after killing a rank"

cat > servers.yaml <<YAML
extends: cfg.yaml
inference: {plugin: sglang}
launcher: {servers: {count: 2}}
trainer: {weight_update: disk, total_steps: 40, recompute_logprob: false}
YAML
# 3b: kill -9 the controller itself: its reaper ends the ranks and servers it started.
"$host" run --config servers.yaml experiment.trial=controller train.world_size=2 trainer.total_steps=100000 2> controller.log & run=$!
for _ in $(seq 300); do grep -q "rank 1 step 2 " runs/dp/controller/logs/rank1.log 2>/dev/null && break; sleep 0.1; done
kill -9 $run
wait $run || true
for _ in $(seq 100); do /usr/bin/python3 "$src/tests/support/leftover_processes.py" "$work" > /dev/null && break; sleep 0.1; done
no_leftovers "after kill -9 of the controller"
echo "kill -9 of the controller: its ranks and servers ended too"

# 3c: a controller started with SIGTERM and SIGINT blocked (serve and service
# block them for sigwait) starts its ranks with them unblocked: the mask
# survives exec, and a rank that never sees SIGTERM is only ever SIGKILLed.
/usr/bin/python3 -c 'import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT}); os.execv(sys.argv[1], sys.argv[1:])' \
  "$host" run --config cfg.yaml experiment.trial=mask train.world_size=2 trainer.total_steps=100000 2> mask.log & run=$!
for _ in $(seq 300); do grep -q "rank 1 step 2 " runs/dp/mask/logs/rank1.log 2>/dev/null && break; sleep 0.1; done
rank_pid=$(grep -o "train rank 1 started (pid [0-9]*" mask.log | grep -o "[0-9]*$")
blocked=$(grep SigBlk "/proc/$rank_pid/status" | awk '{print $2}')
kill -9 $run
wait $run || true
# SIGINT is bit 1 and SIGTERM bit 14 of the mask (0x4002).
(( (16#$blocked & 16#4002) == 0 )) || { echo "FAIL: a train rank started with SIGTERM/SIGINT blocked (SigBlk $blocked)"; exit 1; }
for _ in $(seq 100); do /usr/bin/python3 "$src/tests/support/leftover_processes.py" "$work" > /dev/null && break; sleep 0.1; done
no_leftovers "after kill -9 of the masked controller"
echo "ranks start with the stop signals unblocked"

# 4: two launched SGLang-protocol servers over the local engine; kill one.
"$host" run --config servers.yaml experiment.trial=servers train.world_size=2 2> servers.log & run=$!
for _ in $(seq 300); do grep -q "rank 1 step 5 " runs/dp/servers/logs/rank1.log 2>/dev/null && break; sleep 0.1; done
kill -9 "$(grep -o "inference server0 started (pid [0-9]*" servers.log | grep -o "[0-9]*$")"
wait $run || { echo "FAIL: the run did not finish on the remaining server"; tail -20 servers.log; exit 1; }
grep -q "server0 .* leaves the pool (1 of 2 servers left" servers.log || { echo "FAIL: no word of server0 leaving"; exit 1; }
[ "$(wc -l < runs/dp/servers/metrics.jsonl)" = 40 ] || { echo "FAIL: not every step ran"; exit 1; }
"$host" run --config servers.yaml experiment.trial=none launcher.servers.count=1 trainer.total_steps=100000 2> none.log & run=$!
for _ in $(seq 300); do grep -q "step 3/" none.log 2>/dev/null && break; sleep 0.1; done
kill -9 "$(grep -o "inference server0 started (pid [0-9]*" none.log | grep -o "[0-9]*$")"
if wait $run; then echo "FAIL: the run went on without servers"; exit 1; fi
grep -q "every inference server the launcher started has ended" none.log || { echo "FAIL: unclear end"; tail none.log; exit 1; }
sleep 1
no_leftovers "after the servers ended"

# 5: a server started by launcher.servers.command that takes longer to come
# up than the plugin's own startup_timeout_s (as SGLang loading a real model
# does): the launcher waits for its /health for start_timeout_seconds.
cat > slow.yaml <<YAML
extends: cfg.yaml
inference: {plugin: sglang, startup_timeout_s: 1}
launcher:
  servers:
    count: 1
    port: 0
    start_timeout_seconds: 60
    command: >-
      /bin/sh -c 'sleep 3; exec $(dirname "$host")/areal-engine-server --protocol sglang --host {host} --port {port} --plugin local
      --engine-config "{\"model_path\": \"$work/model\"}"'
trainer: {weight_update: disk, total_steps: 2, recompute_logprob: false}
YAML
"$host" run --config slow.yaml experiment.trial=slow 2> slow.log || { echo "FAIL: a slow command server was not waited for"; tail -20 slow.log; exit 1; }
grep -q "inference server0 answers http://127.0.0.1:[0-9]*/health" slow.log || { echo "FAIL: no word of the server answering"; exit 1; }
# One that exits before it answers fails the start at once, naming its log.
if "$host" run --config slow.yaml experiment.trial=dead "launcher.servers.command=/bin/sh -c 'sleep 1; exit 3'" 2> dead.log; then
  echo "FAIL: a run started without its server"; exit 1
fi
grep -q "inference server0 ended before it answered" dead.log || { echo "FAIL: unclear error"; tail dead.log; exit 1; }
sleep 1
no_leftovers "after the command servers"
echo OK
