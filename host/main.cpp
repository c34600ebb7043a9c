// areal-host: loads plugins through the C ABI and runs what the YAML says.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"
#include "core/plugin_host/plugin_loader.hpp"
#include "cli.hpp"
#include "commands/commands.hpp"
#include "launcher/process_set.hpp"
#include "gateway_builtin.h"
#include "core/plugin_host/process_heap.hpp"

int main(int argc, char** argv) {
  using namespace areal::host;
  areal::keep_tensor_buffers_on_heap();
  // A write to a pipe whose reader died (an agent worker, a server's log
  // pipe) is an EPIPE error for its caller, never the end of the host.
  // Children get the default back (restore_child_signals).
  signal(SIGPIPE, SIG_IGN);
  areal::register_builtin("gateway", &areal_builtin_gateway_init);
  try {
    CommandLine cl = parse_command_line(argc, argv);
    if (const char* level = std::getenv("AREAL_LOG_LEVEL")) areal::logging::set_level(level);
    if (cl.flags.count("help")) {
      std::cout << command_usage(cl.command);
      return 0;
    }
    if (cl.flags.count("version")) {
      std::cout << "areal-host " << AREAL_VERSION << " (plugin ABI " << AREAL_ABI_MAJOR << "." << AREAL_ABI_MINOR << ")\n";
      return 0;
    }
    if (cl.command == "run") {
      if (!cl.flags.count("config")) throw areal::Error(AREAL_CODE_INVALID_ARGUMENT, "run needs --config FILE.yaml");
      return run_job(cl);
    }
    if (cl.command == "sft") {
      if (!cl.flags.count("config")) throw areal::Error(AREAL_CODE_INVALID_ARGUMENT, "sft needs --config FILE.yaml");
      return sft_job(cl);
    }
    if (cl.command == "dashboard") return serve_dashboard(cl);
    if (cl.command == "check-config") return check_config(cl);
    if (cl.command == "plugins") return list_plugins(cl);
    if (cl.command == "conformance") return conformance(cl);
    if (cl.command == "config-reference") return config_reference(cl);
    if (cl.command == "api-fields") return api_fields(cl);
    if (cl.command == "tokenize") return tokenize(cl);
    if (cl.command == "serve") return serve(cl);
    if (cl.command == "init-model") return init_model(cl);
    if (cl.command == "train-rank") return train_rank(cl);
    if (cl.command == "launch") return launch(cl);
    if (cl.command == "service") return run_service(cl);
    if (cl.command == "tenants") return manage_tenants(cl);
    if (cl.command == "reap-process-groups") return launcher::reap_process_groups();  // internal: see launcher/process_set.hpp
    std::cerr << (cl.command.empty() ? std::string("areal-host: no command given") : "areal-host: unknown command '" + cl.command + "'")
              << "\n\n" << usage();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "areal-host: " << e.what() << "\n";
    return 2;
  }
}
