# Shared by the trainer's shell tests (sourced): a fresh work folder with a
# byte-vocabulary model, and a run of a shipped config against that model.

# fresh_model_workdir WORK SEED [INIT-MODEL FLAGS...]: empties WORK and writes WORK/model.
fresh_model_workdir() {
  local dir=$1 seed=$2
  shift 2
  rm -rf "$dir" && mkdir -p "$dir"
  "$host" init-model --family qwen3 --preset tiny --tokenizer bytes --out "$dir/model" --seed "$seed" "$@" >/dev/null
}

# format_warmup SRC WORK: the quickstart's first stage (areal-host sft with
# configs/quickstart_format.yaml) on WORK/model, which it then replaces.
format_warmup() {
  "$host" sft --config "$1/configs/quickstart_format.yaml" train.model_path="$2/model" experiment.output_dir="$2/runs" \
    experiment.trial=t 2> "$2/format.log" || { tail -30 "$2/format.log"; exit 1; }
  rm -rf "$2/model" && mv "$2/runs/quickstart_format/t/final" "$2/model"
}

# require_agent_modules SRC: the example agent's npm packages (scripts/setup.sh installs them).
require_agent_modules() {
  if [ ! -d "$1/examples/quickstart_agent/node_modules/openai" ]; then
    echo "examples/quickstart_agent/node_modules is missing: run scripts/setup.sh" >&2
    exit 1
  fi
}

# run_config CONFIG WORK LOG [overrides...]: areal-host run with the model
# paths pointed at WORK/model and outputs under WORK/runs; prints the log's
# tail and fails if the run fails.
run_config() {
  local config=$1 work=$2 log=$3
  shift 3
  "$host" run --config "$config" experiment.output_dir="$work/runs" inference.model_path="$work/model" \
    train.model_path="$work/model" gateway.tokenizer="$work/model" "$@" 2> "$log" || { tail -30 "$log"; exit 1; }
}

# rollout_only NAME WORKFLOW DATA [ROLLOUT_KEYS]: `areal-host run` without
# training over DATA (JSONL lines) with WORKFLOW (a YAML flow mapping) on
# WORK/model; records in WORK/runs/NAME/t/rollouts.jsonl, log in WORK/NAME.log.
# With ALLOW_FAILED=1 a run whose episodes failed (it exits 1 and says so) is expected.
rollout_only() {
  local name=$1 workflow=$2 data=$3 keys=${4:-concurrency: 2}
  printf '%s\n' "$data" > "$work/$name.jsonl"
  cat > "$work/$name.yaml" <<YAML
experiment: {name: $name, trial: t, output_dir: $work/runs}
inference: {plugin: local, model_path: $work/model}
gateway: {plugin: gateway, port: 0, tokenizer: $work/model, default_max_tokens: 4}
workflow: $workflow
rollout: {dataset: $work/$name.jsonl, $keys}
YAML
  "$host" run --config "$work/$name.yaml" 2> "$work/$name.log" ||
    { [ "${ALLOW_FAILED:-0}" = 1 ] && grep -q "episode(s) failed" "$work/$name.log"; } || { tail -30 "$work/$name.log"; exit 1; }
}
