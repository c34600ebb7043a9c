#!/usr/bin/env bash
# check-config must accept the shipped configs and reject mistakes with
# clear, specific lines and a nonzero exit, without running anything.
set -uo pipefail
host=$1 src=$2
fail() { echo "FAIL: $*"; exit 1; }
expect_error() {  # expect_error "<substring>" args...
  local want=$1; shift
  local err rc
  err=$("$host" check-config "$src/configs/rollout_token_match.yaml" "$@" 2>&1 >/dev/null); rc=$?
  echo "--- $*"; echo "$err"
  [ "$rc" -eq 1 ] || fail "expected exit 1, got $rc"
  grep -qF -- "$want" <<<"$err" || fail "missing: $want"
}
"$host" check-config "$src/configs/rollout_token_match.yaml" > /dev/null || fail "quickstart.yaml must validate"
expect_error "unknown key 'rollout.episods' (did you mean 'rollout.episodes'?)" rollout.episods=3
expect_error "unknown key 'gateway.prot' (did you mean 'gateway.port'?)" gateway.prot=1
expect_error "'gateway.port' must be <= 65535" gateway.port=70000
expect_error "'rollout.concurrency' must be an integer, got string" rollout.concurrency=many
expect_error "no plugin named 'tokn_match' (did you mean 'token_match'?)" workflow.plugin=tokn_match
expect_error "is a algorithm plugin, but a workflow plugin is needed here" workflow.plugin=sft
expect_error "'log.level' must be one of" log.level=loud
# A broken YAML file names the line.
bad=$(mktemp --suffix=.yaml); printf 'inference:\n  plugin: [oops\n' > "$bad"
err=$("$host" check-config "$bad" 2>&1 >/dev/null); rc=$?
echo "$err"; [ "$rc" -eq 1 ] && grep -q "$bad:3:" <<<"$err" || fail "YAML error must name file and line"
# `run` with a bad config starts nothing and exits 2.
"$host" --config "$src/configs/rollout_token_match.yaml" rollout.episods=3 2>/dev/null; [ $? -eq 2 ] || fail "run must exit 2"
# Valid keys that make no job (one rule list, config/run_config.cpp): every problem named, exit 2.
expect_run_refusal() {  # expect_run_refusal "<substring>" args...
  local want=$1; shift
  local err rc
  err=$("$host" run --config "$src/configs/rollout_token_match.yaml" "$@" 2>&1 >/dev/null); rc=$?
  echo "--- run $*"; echo "$err"
  [ "$rc" -eq 2 ] || fail "expected exit 2, got $rc"
  grep -qF -- "$want" <<<"$err" || fail "missing: $want"
}
expect_run_refusal "rollout.openai.mode online is a training mode: configure a 'train' section" rollout.openai.mode=online
expect_run_refusal "rollout.openai.mode online takes no workflow" rollout.openai.mode=online
expect_run_refusal "rollout.n_samples must be 1 in online mode" rollout.openai.mode=online rollout.n_samples=2
expect_run_refusal "rollout.dynamic_filter works on groups of a workflow's episodes" rollout.openai.mode=online rollout.dynamic_filter=mixed_rewards
expect_run_refusal "use workflow.plugin agent_pool (run(data) agents) or subproc" rollout.openai.mode=subproc
expect_run_refusal "'rollout.dataset' is required to run" "rollout.dataset=''"
# gateway.record_routing with a backend that cannot report routing (a dense model) is refused at start, not left to train unrouted rows.
dense=$(mktemp -d)
"$host" init-model --family qwen3 --preset tiny --tokenizer bytes --out "$dense/model" --seed 1 >/dev/null || fail "init-model"
err=$(timeout 60 "$host" serve --model "$dense/model" --port 0 gateway.record_routing=true "gateway.state_dir=none" 2>&1 >/dev/null); rc=$?
echo "--- serve gateway.record_routing=true on a dense model"; echo "$err" | tail -3
rm -rf "$dense"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "serve with record_routing on a dense model must exit with an error, got $rc"
grep -qF "does not report expert routing" <<<"$err" || fail "missing: does not report expert routing"
echo OK
