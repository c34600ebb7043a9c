// The host's own keys (experiment, log, rollout, trainer) as types, read
// once from the validated effective config (config/run_config.cpp's schema
// gives every key its type and default), so no command reads settings by
// string key. run_job_problems() holds every cross-key rule of `run`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal {

struct HostSettings {
  struct Experiment {
    std::string name, trial, output_dir;
    uint64_t seed = 1;
  } experiment;
  std::string log_level = "info";

  // rollout.openai.*: AReaL's names for the agent side.
  struct OpenAI {
    std::string mode = "inline";  // inline | subproc | online
    std::string online_agent_command;
    double turn_discount = 1.0;
    // These set the gateway's / workflow's own keys when given.
    std::optional<std::string> export_style, admin_api_key;
    std::optional<double> session_timeout_seconds;
    std::optional<int64_t> subproc_max_workers;
  };
  struct Rollout {
    std::string dataset, output;
    size_t episodes = 0, concurrency = 4, n_samples = 1, max_concurrent_rollouts = 0;
    bool record_routing = false;
    int64_t max_head_offpolicyness = 0, max_failed_groups_in_a_row = 16;
    std::string dynamic_filter = "none";
    OpenAI openai;
  } rollout;

  struct Trainer {
    int64_t total_steps = 20, checkpoint_every = 0, ppo_n_minibatches = 1;
    size_t batch_size = 8;
    float temperature = 1.0f;
    bool recompute_logprob = false, resume = false, save_final = true;
    std::string weight_update = "auto";
  } trainer;

  // evaluation.*: the agent in eval mode during training.
  struct Evaluation {
    std::string agent_command, dataset;
    int64_t every_steps = 0, n_samples = 1;
    bool at_end = true, greedy = true;
    double temperature = 1.0, timeout_seconds = 600;
  } evaluation;

  // dashboard.*: the web page beside training.
  struct Dashboard {
    bool enabled = true;
    std::string host = "127.0.0.1";
    int port = 0;
  } dashboard;

  // launcher.*: how ranks and servers start (local processes or Slurm).
  struct Launcher {
    std::string type = "local";
    int rank_start_timeout_seconds = 300;
    struct Servers {
      int count = 0;
      std::string command, model_path;
      int port = 30000, start_timeout_seconds = 600;
      nlohmann::json engine = nlohmann::json::object();
    } servers;
    struct Slurm {
      int nodes = 1, train_nodes = 0, ntasks_per_node = 0, gpus_per_task = 0, gpus_per_server = 0, cpus_per_task = 0;
      std::string partition, time, account, job_name, url_file;
      std::vector<std::string> extra_sbatch, srun_args;
      double poll_seconds = 2;
    } slurm;
  } launcher;

  // sft.*: `areal-host sft`.
  struct Sft {
    std::string dataset, tokenizer;
    nlohmann::json chat_template_kwargs = nlohmann::json::object();
    int64_t max_length = 0;
  } sft;

  bool online() const { return rollout.openai.mode == "online"; }
  // output_dir/name/trial, relative to the config's directory until resolved.
  std::string run_dir_relative() const { return experiment.output_dir + "/" + experiment.name + "/" + experiment.trial; }

  // Reads the host keys of an effective config that passed the schema.
  static HostSettings read(const nlohmann::json& effective);
};

}  // namespace areal
