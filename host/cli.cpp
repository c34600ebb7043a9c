#include "cli.hpp"

#include <cctype>

#include "core/plugin_host/error.hpp"

namespace areal::host {

bool is_switch(const std::string& flag) {
  return flag == "json" || flag == "help" || flag == "version" || flag == "decode" || flag == "no-special-tokens" ||
         flag == "no-parse-special" || flag == "skip-special-tokens" || flag == "follow";
}

namespace {

const char* const kCommands[] = {"run", "check-config", "plugins", "conformance", "config-reference", "api-fields", "tokenize", "serve", "init-model", "sft", "dashboard", "launch", "train-rank", "reap-process-groups", "service", "tenants"};

bool is_command(const std::string& w) {
  for (const char* c : kCommands)
    if (w == c) return true;
  return false;
}

// "a.b_c=value": an override. A path or JSON that happens to contain '='
// does not start with a bare dotted key.
bool is_override(const std::string& w) {
  auto eq = w.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  for (size_t i = 0; i < eq; ++i) {
    char c = w[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  }
  return true;
}

}  // namespace

CommandLine parse_command_line(int argc, char** argv) {
  CommandLine cl;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h") a = "--help";
    if (a.rfind("--", 0) == 0) {
      std::string name = a.substr(2), value;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      } else if (!is_switch(name)) {
        if (i + 1 >= argc) throw Error(AREAL_CODE_INVALID_ARGUMENT, "flag --" + name + " needs a value");
        value = argv[++i];
      }
      cl.flags[name] = value;
    } else if (cl.command.empty() && cl.positional.empty() && is_command(a)) {
      cl.command = a;
    } else if (is_override(a)) {
      cl.overrides.push_back(a);
    } else {
      cl.positional.push_back(a);
    }
  }
  if (cl.command.empty() && cl.flags.count("config")) cl.command = "run";
  return cl;
}

std::string usage() {
  return R"(areal-host: train any LLM agent with RL (plugin host)

Usage:
  areal-host --config FILE.yaml [dotted.key=value ...]   run the job the config describes
                                                        (a train section: the RL trainer; else rollouts only;
                                                        also `areal-host run --config FILE.yaml`)
  areal-host launch --config FILE.yaml [dotted.key=value ...]
                                                        submit the run to Slurm (launcher.type slurm) and follow
                                                        it: sbatch, srun for ranks and servers, the gateway URL
  areal-host train-rank --controller HOST:PORT [--rank K]
                                                        one train rank of a multi-process run (train.world_size
                                                        > 1); started by the launcher, not by hand
  areal-host sft --config FILE.yaml [dotted.key=value ...]
                                                        supervised fine-tuning of the train section's model on
                                                        sft.dataset's replies (a stage before RL); writes final/
  areal-host dashboard RUN_DIR [--port N] [--host H] [--tokenizer DIR] [--follow]
                                                        the web dashboard of a run directory
                                                        (curves, evaluation, latest sessions)
  areal-host serve [--config FILE.yaml] [--model DIR] [--host H] [--port N] [--admin-key K] [--tokenizer DIR] [key=value ...]
                                                        serve the gateway and its inference backend, no training
                                                        (--model: a Hugging Face folder on the CPU engine)
  areal-host service --config SERVICE.yaml
                                                        the managed multi-tenant service: users' API keys,
                                                        RL jobs on demand on shared engines, their models
                                                        served by experiment/trial (docs/service.md)
  areal-host tenants (--config SERVICE.yaml | --state-dir DIR) add-user NAME | create-key USER |
                      revoke-key KEY_ID | list [--json]
                                                        the service's users and API keys (also while it runs)
  areal-host check-config FILE.yaml [dotted.key=value ...]
                                                        validate a config (loads its plugins)
  areal-host plugins [--json]                           list every plugin found
  areal-host conformance PLUGIN [--config JSON] [--data JSON]
                                                        run the conformance suite on a plugin
                                                        (a name, or a path to a .so)
  areal-host config-reference                           print every config key with its default
  areal-host api-fields                                 the gateway's field-by-field compatibility policy
  areal-host tokenize --tokenizer DIR [--chat FILE.json | --decode] [--no-special-tokens]
                      [--no-parse-special] [--skip-special-tokens]
                                                        text on stdin -> {"ids": [...]} (or back);
                                                        --chat: OpenAI request -> {"ids", "prompt"}
  areal-host init-model --family qwen3|qwen3_moe|gpt_oss|qwen2|llama3 --preset tiny|tiny-hd32|small|agent|0.6b|4b|30b-a3b|20b
                      --tokenizer DIR|bytes --out DIR
                      [--seed N] [--dtype float32|bfloat16|float16] [--shard-mb N]
                      [--max-position-embeddings N] [--end-turn-logit L] [--initializer-range S]
                                                        write a random-initialised HF model folder
  areal-host --version | --help

Plugins are found by name in $AREAL_PLUGIN_PATH, plugins.search_paths and
<prefix>/lib/areal/plugins. Docs: docs/configuration.md, docs/plugin-guide.md.
)";
}

std::string command_usage(const std::string& command) {
  const std::string text = usage(), head = "  areal-host " + command + " ";
  const size_t begin = text.find(head);
  if (command.empty() || begin == std::string::npos) return text;
  // The command's block runs to the next command's line (or the end of the list).
  size_t end = text.find("\n  areal-host ", begin + head.size());
  end = end == std::string::npos ? text.find("\n\n", begin) : end;
  return "Usage:\n" + text.substr(begin, end - begin + 1);
}

}  // namespace areal::host
