// `areal-host sft --config x.yaml [key=value ...]`: the supervised stage
// real pipelines run before RL. Trains the `train` section's model on the
// replies of `sft.dataset` with the algorithm plugin (sft unless the config
// names another), and writes output_dir/name/trial/final, the RL run's
// model_path. trainer.total_steps steps of trainer.batch_size examples.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>
#include <exception>

#include "../config_loading.hpp"
#include "../sft_dataset.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_api.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/telemetry/logging.hpp"
#include "core/trainer/sft_loop.hpp"
#include "commands.hpp"

namespace areal::host {

int sft_job(const CommandLine& cl) {
  const std::string path = cl.flags.at("config");
  ResolvedConfig rc = load_config(path, cl.overrides);
  if (rc.errors.empty() && !rc.plugins.count("algorithm")) {
    std::vector<std::string> with_sft = {"algorithm.plugin=sft"};
    with_sft.insert(with_sft.end(), cl.overrides.begin(), cl.overrides.end());
    rc = load_config(path, with_sft);
  }
  if (report_config_errors(path, rc)) return 2;
  const HostSettings& h = rc.host;
  logging::set_level(h.log_level);
  set_effective_config(rc.effective);
  std::vector<std::string> problems;
  if (!rc.plugins.count("train")) problems.push_back("areal-host sft needs a 'train' section (the model to fine-tune)");
  if (rc.plugins.count("train") && train_world_size(rc) > 1)
    problems.push_back("areal-host sft trains in one process: set train.world_size=1 (rank processes are areal-host run's, docs/scale-out.md)");
  if (h.sft.dataset.empty()) problems.push_back("'sft.dataset' is required (JSONL of {\"messages\": [...]} ending with the reply)");
  // The in-tree RL algorithms give every SFT row advantage 0 (one reward,
  // no behaviour log-probs): the run would train nothing and save final/ as if trained.
  if (rc.plugins.count("algorithm"))
    for (const char* rl : {"grpo", "dr_grpo", "rloo", "ppo"})
      if (rc.plugins.at("algorithm")->name() == rl)
        problems.push_back(std::string("algorithm.plugin is ") + rl + ", an RL algorithm, which trains nothing on SFT examples: set algorithm.plugin=sft "
                           "(a config that extends the RL run's can override it)");
  if (!problems.empty()) {
    for (const auto& p : problems) std::cerr << path << ": " << p << " (see docs/configuration.md)\n";
    return 2;
  }
  auto log = logging::get("sft");
  try {
    const std::string tok_dir = h.sft.tokenizer.empty() ? rc.effective["train"].value("model_path", std::string())
                                                        : rc.path(h.sft.tokenizer);
    const auto tok = tokenizer::Tokenizer::from_dir(tok_dir);
    const auto chat = jinja::ChatTemplate::from_tokenizer_config(tok->config());
    const nlohmann::ordered_json kwargs = nlohmann::ordered_json::parse(h.sft.chat_template_kwargs.dump());
    size_t too_long = 0;
    const auto examples = read_sft_dataset(rc.path(h.sft.dataset), *tok, chat, kwargs, static_cast<size_t>(h.sft.max_length), &too_long);
    if (too_long > 0)
      log->warn("sft: {} example(s) longer than sft.max_length ({} tokens) left out", too_long, h.sft.max_length);
    size_t completion_tokens = 0;
    for (const auto& e : examples) completion_tokens += e.input_ids.size() - e.prompt_tokens;

    std::string train_name = "train", algorithm_name = "algorithm";
    areal_services train_services = make_services(train_name);
    PluginInstance train(rc.plugins.at("train"), rc.section_json("train"), &train_services);
    areal_services algo_services = make_services(algorithm_name);
    PluginInstance algorithm(rc.plugins.at("algorithm"), rc.section_json("algorithm"), &algo_services);

    trainer::SftOptions opt;
    opt.total_steps = h.trainer.total_steps;
    opt.batch_size = h.trainer.batch_size;
    opt.seed = h.experiment.seed;
    opt.save_final = h.trainer.save_final;
    opt.run_dir = rc.path(h.run_dir_relative());
    trainer::StepPlugins plugins;
    plugins.train = rc.plugins.at("train")->train(), plugins.train_self = train.self();
    plugins.algorithm = rc.plugins.at("algorithm")->algorithm(), plugins.algorithm_self = algorithm.self();
    log->info("sft: {} examples ({} reply tokens) from {} | {} steps x {} examples | algorithm {} | run dir {}", examples.size(),
              completion_tokens, rc.path(h.sft.dataset), opt.total_steps, opt.batch_size, rc.plugins.at("algorithm")->name(),
              opt.run_dir);
    const trainer::SftSummary s = trainer::run_sft(opt, plugins, examples);
    const size_t window = std::min<size_t>(10, std::max<size_t>(1, s.step_losses.size() / 2));
    double first = 0, last = 0;
    for (size_t i = 0; i < window; ++i) first += s.step_losses[i], last += s.step_losses[s.step_losses.size() - 1 - i];
    log->info("done: {} steps in {:.1f} s | loss {:.4f} (first {} steps) -> {:.4f} (last {} steps) | metrics {}/metrics.jsonl",
              s.steps_run, s.seconds, first / window, window, last / window, window, opt.run_dir);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal-host sft: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace areal::host
