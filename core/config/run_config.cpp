#include "core/config/run_config.hpp"

#include <algorithm>
#include <filesystem>
#include <exception>

#include "core/config/config_schema.hpp"
#include "core/plugin_host/error.hpp"

namespace areal {

const std::vector<PluginSection>& plugin_sections() {
  static const std::vector<PluginSection> sections = {
      {"inference", AREAL_KIND_INFERENCE, "mock_inference", false,
       "The inference backend that generates every token: local, sglang, vllm or mock_inference (docs/backends.md)."},
      {"gateway", AREAL_KIND_GATEWAY, "gateway", true,
       "The HTTP gateway agents talk to; `plugin: none` runs without one."},
      {"workflow", AREAL_KIND_WORKFLOW, "", false, "The rollout workflow run once per dataset item."},
      {"train", AREAL_KIND_TRAIN, "", false,
       "The training backend (fsdp). With a train section, `areal-host run` trains (needs `algorithm`); without, it only collects rollouts."},
      {"algorithm", AREAL_KIND_ALGORITHM, "", false, "The RL algorithm: advantages and loss (grpo, dr_grpo, rloo, ppo, sft)."},
      {"ref", AREAL_KIND_TRAIN, "", false,
       "(optional) A frozen reference model for KL penalties (algorithm.kl_ctl > 0): a train plugin (fsdp with the reference model_path) whose compute_logprobs gives ref_logprobs; never stepped."},
  };
  return sections;
}

const Json& host_schema() {
  static const Json schema = Json::parse(R"({"type": "object", "keys": {
    "experiment": {"type": "object", "doc": "Naming and seeding of a run.", "keys": {
      "name": {"type": "string", "default": "areal", "doc": "Experiment name; outputs go to output_dir/name/trial."},
      "trial": {"type": "string", "default": "trial0", "doc": "Trial name within the experiment."},
      "seed": {"type": "integer", "default": 1, "doc": "Base seed; episode i uses seed + i where a workflow samples."},
      "output_dir": {"type": "string", "default": "runs", "doc": "Root of all outputs; relative to the config file's directory."}}},
    "log": {"type": "object", "doc": "Console logging.", "keys": {
      "level": {"type": "string", "enum": ["trace", "debug", "info", "warn", "error", "critical", "off"],
                "default": "info", "doc": "Lowest level printed (to stderr)."}}},
    "plugins": {"type": "object", "doc": "Where plugins are found.", "keys": {
      "search_paths": {"type": "array", "items": {"type": "string"}, "default": [],
                       "doc": "Extra directories searched for libareal-NAME.so, after $AREAL_PLUGIN_PATH; relative to the config file's directory."}}},
    "rollout": {"type": "object", "doc": "The rollout job run by `areal-host --config`.", "keys": {
      "dataset": {"type": "string", "default": "", "doc": "JSONL file, one JSON object (an episode's data) per line; relative to the config file's directory. Required to run."},
      "episodes": {"type": "integer", "default": 0, "minimum": 0, "doc": "Episodes to run, cycling through the dataset; 0 runs each item once."},
      "concurrency": {"type": "integer", "default": 4, "minimum": 1, "maximum": 4096, "doc": "Episodes in flight at once."},
      "output": {"type": "string", "default": "", "doc": "JSONL file receiving one record per episode; empty means output_dir/name/trial/rollouts.jsonl."},
      "n_samples": {"type": "integer", "default": 1, "minimum": 1, "maximum": 1024, "doc": "Training: episodes per dataset item, forming one group (GRPO's group size; AReaL's gconfig.n_samples)."},
      "max_head_offpolicyness": {"type": "integer", "default": 0, "minimum": 0, "doc": "Training: how many versions a trained sample may lag the trained weights; 0 is synchronous RL."},
      "max_concurrent_rollouts": {"type": "integer", "default": 0, "minimum": 0, "doc": "Training: groups generating at once; 0 means trainer.batch_size."},
      "record_routing": {"type": "boolean", "default": false, "doc": "Mixture-of-experts models: a workflow's api->generate calls ask the inference backend for the experts each position was routed to and keep them in the episode's rows, for routing replay (train.moe.routing_replay: rollout). A backend without routing ignores it. Calls through the gateway follow gateway.record_routing."},
      "dynamic_filter": {"type": "string", "enum": ["none", "mixed_rewards"], "default": "none", "doc": "Training: mixed_rewards drops groups whose rewards are all equal (no learning signal) and generates more."},
      "max_failed_groups_in_a_row": {"type": "integer", "default": 16, "minimum": 0, "doc": "Training, inline and subproc modes: the run stops with the last episode's error once this many groups in a row had no successful episode (a broken workflow, agent or backend), instead of retrying forever. 0: never stop."},
      "openai": {"type": "object", "doc": "Agent-side settings, named as AReaL's rollout.openai.*.", "keys": {
        "mode": {"type": "string", "enum": ["inline", "subproc", "online"], "default": "inline", "doc": "inline: the workflow plugin runs episodes over the dataset; subproc: the same, with the agent in worker processes (workflow agent_pool for run(data) agents, or subproc for a command per episode); online: external agents drive the gateway's sessions and the trainer trains each session that ends (no workflow, no dataset)."},
        "online_agent_command": {"type": "string", "default": "", "doc": "Online mode: a shell command started once the gateway listens (env AREAL_GATEWAY_URL, AREAL_ADMIN_KEY, OPENAI_BASE_URL, ANTHROPIC_BASE_URL; cwd: the config's directory; output: <run dir>/agent.log) and stopped at the end, or by a watchdog process if areal-host dies. Empty: start your agents yourself."},
        "turn_discount": {"type": "number", "default": 1.0, "minimum": 0, "maximum": 1, "doc": "Rewards flow back over an episode's completions: r_i += turn_discount * r_{i+1} (the gateway's sessions too, when training)."},
        "export_style": {"type": "string", "enum": ["individual", "concat"], "default": null, "doc": "Sets gateway.export_style: a row per call, or a row per conversation."},
        "admin_api_key": {"type": "string", "default": null, "doc": "Sets gateway.admin_api_key."},
        "session_timeout_seconds": {"type": "number", "default": null, "minimum": 1, "doc": "Sets gateway.session_timeout_seconds."},
        "subproc_max_workers": {"type": "integer", "default": null, "minimum": 0, "doc": "Worker processes: sets workflow.workers of agent_pool (0 is not allowed there) or workflow.max_workers of subproc (commands running at once)."}}}}},
    "trainer": {"type": "object", "doc": "The RL loop run by `areal-host run` when a train section is configured.", "keys": {
      "total_steps": {"type": "integer", "default": 20, "minimum": 1, "doc": "Training steps (one weight update and version each; ppo_n_minibatches optimizer updates each)."},
      "batch_size": {"type": "integer", "default": 8, "minimum": 1, "doc": "Groups per step (AReaL's train_dataset.batch_size); each holds rollout.n_samples episodes."},
      "temperature": {"type": "number", "default": 1.0, "minimum": 0.01, "doc": "Log-probs for training are of logits / temperature; keep it equal to the workflow's sampling temperature."},
      "recompute_logprob": {"type": "boolean", "default": false, "doc": "Recompute the batch's log-probs with the current weights before each step (proximal policy of the decoupled loss)."},
      "ppo_n_minibatches": {"type": "integer", "default": 1, "minimum": 1, "doc": "Optimizer updates per step (AReaL's actor.ppo_n_minibatches): the batch's rows are cut into this many minibatches of whole sequences, balanced by tokens (fewer when a batch has fewer rows), after log-probs and advantages are computed over the whole batch. Each update advances the train plugin's LR schedule: its warmup_steps and total_steps count updates."},
      "checkpoint_every": {"type": "integer", "default": 0, "minimum": 0, "doc": "Save weights, optimizer and loop state every N steps and at the last step; 0 disables."},
      "resume": {"type": "boolean", "default": false, "doc": "Continue from the newest checkpoint of this experiment and trial."},
      "save_final": {"type": "boolean", "default": true, "doc": "Save the final model as a Hugging Face folder at output_dir/name/trial/final."},
      "weight_update": {"type": "string", "enum": ["auto", "adapter", "memory", "disk"], "default": "auto", "doc": "How new weights reach the inference backend: adapter (a LoRA-trained policy's adapter alone, train.export_adapter -> inference.load_adapter as the default adapter, both in this process: megabytes a step, the base weights never move), memory (the whole model, train.export_weights -> inference.update_weights_from_tensors, merged when LoRA-trained), disk (HF files the backend reloads), auto (the first of these both plugins can)."}}},
    "evaluation": {"type": "object", "doc": "Evaluation during an `areal-host run` that trains: the agent in eval mode, run every_steps steps and at the end, beside training (it never blocks a step). Its calls use the gateway's admin key, so nothing it does is recorded or trained.", "keys": {
      "agent_command": {"type": "string", "default": "", "doc": "Shell command that runs one evaluation and prints a JSON object as its last stdout line, with at least reward_mean (every numeric key becomes an eval_ metric). Env: AREAL_GATEWAY_URL, AREAL_ADMIN_KEY, OPENAI_BASE_URL, OPENAI_API_KEY (the admin key), ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY (the admin key), AREAL_EVAL_DATASET, AREAL_EVAL_GREEDY, AREAL_EVAL_TEMPERATURE, AREAL_EVAL_N_SAMPLES, AREAL_EVAL_STEP; cwd: the config's directory. Empty: no evaluation (the other evaluation keys are then unused)."},
      "dataset": {"type": "string", "default": "", "doc": "JSONL file of evaluation items handed to the command as AREAL_EVAL_DATASET (absolute); relative to the config file's directory. Empty: the command's own."},
      "every_steps": {"type": "integer", "default": 0, "minimum": 0, "doc": "Start an evaluation after every N training steps (skipped, with a log line, while the previous one still runs); 0: only at the end."},
      "at_end": {"type": "boolean", "default": true, "doc": "Evaluate the final weights after the last step (the run waits for it)."},
      "greedy": {"type": "boolean", "default": true, "doc": "Ask the command for greedy decoding (AREAL_EVAL_GREEDY=1); false: sampling at temperature."},
      "temperature": {"type": "number", "default": 1.0, "minimum": 0, "doc": "Sampling temperature when greedy is false (AREAL_EVAL_TEMPERATURE)."},
      "n_samples": {"type": "integer", "default": 1, "minimum": 1, "maximum": 1024, "doc": "Answers per evaluation item (AREAL_EVAL_N_SAMPLES)."},
      "timeout_seconds": {"type": "number", "default": 600, "minimum": 1, "doc": "An evaluation running longer is stopped and counted as failed (eval_failed in metrics.jsonl)."}}},
    "dashboard": {"type": "object", "doc": "The web dashboard served beside a training run (curves, evaluation, latest sessions); `areal-host dashboard RUN_DIR` serves it afterwards.", "keys": {
      "enabled": {"type": "boolean", "default": true, "doc": "Serve it while `areal-host run` trains; its URL is logged at start."},
      "host": {"type": "string", "default": "127.0.0.1", "doc": "Address to bind."},
      "port": {"type": "integer", "default": 0, "minimum": 0, "maximum": 65535, "doc": "Port; 0 picks a free one."}}},
    "launcher": {"type": "object", "doc": "How the processes of a run start (docs/scale-out.md): train ranks when train.world_size > 1, and inference servers when launcher.servers.count > 0.", "keys": {
      "type": {"type": "string", "enum": ["local", "slurm"], "default": "local", "doc": "local: `areal-host run` starts ranks and servers on this machine; slurm: `areal-host launch` submits the run with sbatch and the run starts them with srun inside the allocation."},
      "rank_start_timeout_seconds": {"type": "integer", "default": 300, "minimum": 1, "doc": "How long the controller waits for every train rank to connect and create its plugins."},
      "servers": {"type": "object", "doc": "Inference servers started for the run (for the sglang and vllm plugins); their URLs become inference.servers. A server that dies leaves the pool; the run ends when none is left.", "keys": {
        "count": {"type": "integer", "default": 0, "minimum": 0, "doc": "Servers to start; 0: use inference.servers as given."},
        "command": {"type": "string", "default": "", "doc": "Shell command starting one server, with {host}, {port}, {index} and {model_path} filled in, e.g. `python3 -m sglang.launch_server --model-path {model_path} --host {host} --port {port}`; its URL is http://{host}:{port}. Empty: areal-engine-server over the local engine (CPU or CUDA), whose printed URL is used."},
        "model_path": {"type": "string", "default": "", "format": "path", "doc": "The model the servers start with; empty: train.model_path."},
        "port": {"type": "integer", "default": 30000, "minimum": 0, "maximum": 65535, "doc": "With a command: server i listens on port + i (0: free ports, local launcher only). The local engine picks a free port."},
        "engine": {"type": "object", "default": {}, "doc": "Extra local-engine config for the default server (e.g. {\"max_batch\": 64, \"device\": \"cuda\"})."},
        "start_timeout_seconds": {"type": "integer", "default": 600, "minimum": 1, "doc": "How long to wait for each launched server: a local-engine one to listen, one started by command (SGLang, vLLM: imports, weight loading, graph capture) to answer /health. A server that exits meanwhile fails the start at once."}}},
      "slurm": {"type": "object", "doc": "launcher.type slurm: the sbatch job `areal-host launch` submits.", "keys": {
        "nodes": {"type": "integer", "default": 1, "minimum": 1, "doc": "sbatch --nodes."},
        "train_nodes": {"type": "integer", "default": 0, "minimum": 0, "doc": "Nodes for the train ranks (the first ones; the controller runs on the first); servers go on the nodes after them. 0: ranks and servers share all nodes."},
        "ntasks_per_node": {"type": "integer", "default": 0, "minimum": 0, "doc": "sbatch --ntasks-per-node; 0: --ntasks = train.world_size (when > 1) plus one task per server, placed by Slurm."},
        "gpus_per_task": {"type": "integer", "default": 0, "minimum": 0, "doc": "GPUs per train rank (srun --gpus-per-task); 0: none requested."},
        "gpus_per_server": {"type": "integer", "default": 0, "minimum": 0, "doc": "GPUs per inference server (srun --gpus)."},
        "cpus_per_task": {"type": "integer", "default": 0, "minimum": 0, "doc": "sbatch --cpus-per-task, repeated on every srun step (ranks, servers), which Slurm 22.05 to 23.02 do not inherit; 0: Slurm's default."},
        "partition": {"type": "string", "default": "", "doc": "sbatch --partition; empty: the cluster's default."},
        "time": {"type": "string", "default": "", "doc": "sbatch --time (e.g. 04:00:00); empty: the partition's limit."},
        "account": {"type": "string", "default": "", "doc": "sbatch --account."},
        "job_name": {"type": "string", "default": "", "doc": "sbatch --job-name; empty: areal-<experiment>-<trial>."},
        "extra_sbatch": {"type": "array", "items": {"type": "string"}, "default": [], "doc": "More #SBATCH lines, as written after `#SBATCH ` (e.g. \"--exclusive\", \"--mem=0\")."},
        "srun_args": {"type": "array", "items": {"type": "string"}, "default": [], "doc": "Extra arguments for every srun step (e.g. \"--mpi=none\")."},
        "url_file": {"type": "string", "default": "", "doc": "Where the gateway URL is written once it listens; empty: <run dir>/gateway_url. Relative to the config file's directory."},
        "poll_seconds": {"type": "number", "default": 2, "minimum": 0.1, "doc": "How often `areal-host launch` checks the job."}}}}},
    "sft": {"type": "object", "doc": "The supervised stage run by `areal-host sft` (train and algorithm sections as for RL; algorithm defaults to sft).", "keys": {
      "dataset": {"type": "string", "default": "", "doc": "JSONL file, one {\"messages\": [...]} per line whose last message is the assistant's reply to train on; relative to the config file's directory. Required by `areal-host sft`."},
      "tokenizer": {"type": "string", "default": "", "doc": "Folder with tokenizer.json and tokenizer_config.json (chat template); empty: train.model_path."},
      "chat_template_kwargs": {"type": "object", "default": {}, "doc": "Passed to the chat template, e.g. {\"enable_thinking\": false}."},
      "max_length": {"type": "integer", "default": 0, "minimum": 0, "doc": "Examples longer than this many tokens (prompt and reply) are left out, with a count in the log, as AReaL filters them: one long example would otherwise fail a step (its log-prob head is tokens x vocabulary) when the shuffle reaches it. 0: no limit."}}}
  }})");
  return schema;
}

std::string ResolvedConfig::section_json(const std::string& section) const {
  Json s = effective.contains(section) ? effective[section] : Json::object();
  s.erase("plugin");
  return s.dump();
}

std::string ResolvedConfig::path(const std::string& value) const {
  std::filesystem::path p(value);
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  return p.lexically_normal().string();
}

namespace {

// Keys a plugin marks {"format": "path"} are made absolute against the
// config file's directory, like the host's own paths, so a config works
// from any working directory.
void resolve_path_keys(const Json& schema, Json& section, const ResolvedConfig& rc) {
  if (!schema.contains("keys") || !section.is_object()) return;
  for (const auto& [k, sub] : schema["keys"].items()) {
    if (!section.contains(k)) continue;
    if (sub.value("format", "") == "path" && section[k].is_string() && !section[k].get<std::string>().empty())
      section[k] = rc.path(section[k].get<std::string>());
    else if (sub.contains("items") && sub["items"].value("format", "") == "path" && section[k].is_array()) {
      for (auto& item : section[k])
        if (item.is_string() && !item.get<std::string>().empty()) item = rc.path(item.get<std::string>());
    } else if (sub.contains("keys")) {
      resolve_path_keys(sub, section[k], rc);
    }
  }
}

}  // namespace

ResolvedConfig resolve_config(Json raw, const std::string& base_dir) {
  ResolvedConfig rc;
  rc.base_dir = base_dir;
  if (!raw.is_object()) {
    rc.errors.push_back("the config must be a mapping at the top level");
    return rc;
  }
  // Split plugin sections from host keys so each is checked by its schema.
  std::map<std::string, Json> sections;
  for (const auto& s : plugin_sections()) {
    if (raw.contains(s.name)) {
      sections[s.name] = raw[s.name];
      raw.erase(s.name);
    }
  }
  Json host_part = raw;
  // Unknown top-level keys should suggest plugin sections too.
  Json schema = host_schema();
  for (const auto& s : plugin_sections()) schema["keys"][s.name] = Json{{"type", "any"}, {"default", nullptr}};
  config::validate(schema, host_part, "", rc.errors);
  for (const auto& s : plugin_sections()) host_part.erase(s.name);
  rc.effective = host_part;
  if (rc.errors.empty()) rc.host = HostSettings::read(rc.effective);  // types and defaults are settled now

  std::vector<std::string> dirs;
  // Read only where well formed: a malformed section is already among rc.errors.
  if (host_part.contains("plugins") && host_part["plugins"].is_object() && host_part["plugins"].contains("search_paths") &&
      host_part["plugins"]["search_paths"].is_array())
    for (const auto& d : host_part["plugins"]["search_paths"])
      if (d.is_string()) dirs.push_back(rc.path(d.get<std::string>()));
  PluginCatalog catalog(dirs);

  for (const auto& s : plugin_sections()) {
    Json section = sections.count(s.name) ? sections[s.name] : Json::object();
    if (section.is_null()) section = Json::object();
    if (!section.is_object()) {
      rc.errors.push_back("'" + std::string(s.name) + "' must be a mapping, got " + section.dump());
      continue;
    }
    std::string plugin_name = s.default_plugin;
    if (section.contains("plugin")) {
      if (!section["plugin"].is_string()) {
        rc.errors.push_back("'" + std::string(s.name) + ".plugin' must be a string");
        continue;
      }
      plugin_name = section["plugin"].get<std::string>();
    }
    if (plugin_name == "none" && s.optional) {
      rc.effective[s.name] = Json{{"plugin", "none"}};
      continue;
    }
    if (plugin_name.empty() || plugin_name == "none") {
      if (!sections.count(s.name)) continue;  // absent and required: the job that needs it reports it
      rc.errors.push_back("'" + std::string(s.name) + ".plugin' is required (a plugin name or a path to a .so)");
      continue;
    }
    std::shared_ptr<LoadedPlugin> plugin;
    try {
      plugin = catalog.resolve(plugin_name, s.kind, base_dir);
    } catch (const std::exception& e) {
      rc.errors.push_back(std::string(s.name) + ".plugin: " + e.what());
      continue;
    }
    section.erase("plugin");
    if (const char* schema_text = plugin->info().config_schema_json) {
      try {
        Json plugin_schema = Json::parse(schema_text);
        config::check_schema(plugin_schema, plugin->name());
        // Servers the launcher starts (launcher.servers.count) are a remote
        // backend's servers: their URLs are filled in once they listen.
        if (s.name == std::string("inference") && rc.errors.empty() && rc.host.launcher.servers.count > 0 && !section.contains("servers") &&
            plugin_schema.contains("keys") && plugin_schema["keys"].contains("servers"))
          section["servers"] = Json::array();
        config::validate(plugin_schema, section, s.name, rc.errors);
        resolve_path_keys(plugin_schema, section, rc);
      } catch (const std::exception& e) {
        rc.errors.push_back(std::string(s.name) + ": plugin '" + plugin->name() + "' has an invalid config schema: " + e.what());
      }
    }
    section["plugin"] = plugin_name;
    rc.effective[s.name] = section;
    rc.plugins[s.name] = plugin;
  }
  return rc;
}

int train_world_size(const ResolvedConfig& rc) {
  if (!rc.effective.contains("train") || !rc.effective["train"].is_object()) return 1;
  const Json& w = rc.effective["train"].value("world_size", Json(1));
  return w.is_number_integer() ? std::max(1, w.get<int>()) : 1;
}

std::vector<std::string> run_job_problems(const ResolvedConfig& rc) {
  std::vector<std::string> problems;
  auto has = [&](const char* section) { return rc.plugins.count(section) > 0; };
  const HostSettings& h = rc.host;
  const bool training = has("train");
  if (training && !has("algorithm")) problems.push_back("training needs 'algorithm.plugin' (grpo, dr_grpo, rloo, ppo or sft)");
  // Only the trained model runs as rank processes; the reference model is computed in the controller.
  if (has("ref") && rc.effective["ref"].value("world_size", 1) > 1)
    problems.push_back("ref.world_size must be 1: the reference model runs in the controller (train.world_size sets the train ranks)");
  if (const int world = train_world_size(rc); training && world > 1) {
    const size_t sequences = h.trainer.batch_size * h.rollout.n_samples;
    if (sequences < static_cast<size_t>(world))
      problems.push_back("trainer.batch_size x rollout.n_samples is " + std::to_string(sequences) + " sequences per step, fewer than train.world_size (" +
                         std::to_string(world) + "): every rank needs at least one");
  }
  if (rc.host.launcher.servers.count > 0 && has("inference") && !rc.effective["inference"].contains("servers"))
    problems.push_back("launcher.servers starts SGLang- or vLLM-protocol servers: set inference.plugin to sglang or vllm");
  // An empty evaluation.agent_command turns evaluation off (the section's other keys then go unused).
  if (!h.evaluation.agent_command.empty()) {
    if (!training) problems.push_back("evaluation runs during training: configure a 'train' section, or drop evaluation.agent_command");
    if (!has("gateway")) problems.push_back("evaluation.agent_command talks to the gateway: do not set gateway.plugin to none");
  }
  if (h.online()) {
    if (!training) problems.push_back("rollout.openai.mode online is a training mode: configure a 'train' section");
    if (!has("gateway")) problems.push_back("rollout.openai.mode online needs the gateway (agents talk to it)");
    if (has("workflow")) problems.push_back("rollout.openai.mode online takes no workflow: agents drive the sessions");
    if (h.rollout.n_samples != 1)
      problems.push_back("rollout.n_samples must be 1 in online mode: each session is one sample; agents group sessions with group_id");
    if (h.rollout.dynamic_filter != "none")
      problems.push_back("rollout.dynamic_filter works on groups of a workflow's episodes; in online mode each session is its own task");
    return problems;
  }
  if (!has("workflow")) {
    problems.push_back("'workflow.plugin' is required to run");
  } else {
    const std::string wf = rc.plugins.at("workflow")->name();
    if (h.rollout.openai.mode == "subproc" && wf != "agent_pool" && wf != "subproc")
      problems.push_back("rollout.openai.mode subproc runs the agent in worker processes: use workflow.plugin agent_pool (run(data) agents) or subproc (a command per episode), not '" + wf + "'");
    if (wf == "agent_pool" && h.rollout.openai.subproc_max_workers && *h.rollout.openai.subproc_max_workers < 1)
      problems.push_back("rollout.openai.subproc_max_workers must be >= 1 for agent_pool");
  }
  if (h.rollout.dataset.empty()) problems.push_back("'rollout.dataset' is required to run (a JSONL file of episode data)");
  return problems;
}

std::string configuration_reference(const PluginCatalog& catalog) {
  std::string out;
  out += "### Host keys\n\n| key | type | default | description |\n|---|---|---|---|\n";
  config::describe(host_schema(), "", out);
  out += "\n### Plugin sections\n\n| section | kind | default plugin | description |\n|---|---|---|---|\n";
  for (const auto& s : plugin_sections())
    out += std::string("| `") + s.name + "` | " + kind_name(s.kind) + " | " +
           (s.default_plugin[0] ? std::string("`") + s.default_plugin + "`" : std::string("required")) + " | " + s.doc +
           " Key `" + s.name + ".plugin` names the plugin (name or path" + (s.optional ? ", or `none`" : "") + "). |\n";
  std::vector<std::string> errors;
  auto plugins = catalog.load_all(errors);
  std::sort(plugins.begin(), plugins.end(), [](const auto& a, const auto& b) { return a->name() < b->name(); });
  for (const auto& p : plugins) {
    out += "\n### Plugin `" + p->name() + "` (" + kind_name(p->kind()) + ")\n\n" + p->info().description + "\n\n";
    if (p->info().config_schema_json == nullptr) {
      out += "This plugin declares no config schema; its section is passed through unchecked.\n";
      continue;
    }
    std::string rows;
    config::describe(Json::parse(p->info().config_schema_json), "<section>", rows);
    out += rows.empty() ? "No keys.\n" : "| key | type | default | description |\n|---|---|---|---|\n" + rows;
  }
  return out;
}

}  // namespace areal
