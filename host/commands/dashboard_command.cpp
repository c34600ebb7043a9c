// `areal-host dashboard RUN_DIR [--port N] [--host H] [--tokenizer DIR] [--follow]`:
// the dashboard of a run directory (output_dir/name/trial), after the run or
// beside it (--follow: keep polling as a running one writes). Sessions are
// shown as text with RUN_DIR/final's tokenizer, or --tokenizer's. Runs
// until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <stdexcept>
#include <exception>

#include "../dashboard/dashboard_server.hpp"
#include "../stop_signals.hpp"
#include "commands.hpp"

namespace areal::host {

int serve_dashboard(const CommandLine& cl) {
  namespace fs = std::filesystem;
  static const std::set<std::string> kFlags = {"port", "host", "tokenizer", "follow"};
  for (const auto& [flag, _] : cl.flags)
    if (!kFlags.count(flag)) {
      std::cerr << "areal-host dashboard: unknown flag --" << flag << " (flags: --port N, --host H, --tokenizer DIR, --follow)\n";
      return 2;
    }
  if (cl.positional.size() != 1) {
    std::cerr << "usage: areal-host dashboard RUN_DIR [--port N] [--host H] [--tokenizer DIR] [--follow]\n"
                 "  RUN_DIR: a run's output directory, e.g. runs/quickstart/trial0 (it holds metrics.jsonl)\n";
    return 2;
  }
  dashboard::ServerOptions o;
  o.run_dir = fs::absolute(cl.positional[0]).lexically_normal().string();
  if (!fs::exists(fs::path(o.run_dir) / "metrics.jsonl")) {
    std::cerr << "areal-host dashboard: " << o.run_dir << " has no metrics.jsonl: name a run directory (output_dir/name/trial)\n";
    return 2;
  }
  o.host = cl.flags.count("host") ? cl.flags.at("host") : "127.0.0.1";
  try {
    o.port = cl.flags.count("port") ? std::stoi(cl.flags.at("port")) : 0;
  } catch (const std::exception&) {
    std::cerr << "areal-host dashboard: --port needs a number\n";
    return 2;
  }
  o.live = cl.flags.count("follow") > 0;
  const std::string tok_dir = cl.flags.count("tokenizer") ? cl.flags.at("tokenizer") : (fs::path(o.run_dir) / "final").string();
  try {
    if (fs::exists(fs::path(tok_dir) / "tokenizer.json")) o.tokenizer = tokenizer::Tokenizer::from_dir(tok_dir);
    else if (cl.flags.count("tokenizer")) throw std::runtime_error(tok_dir + " has no tokenizer.json");
    else std::cerr << "areal-host dashboard: no tokenizer in " << tok_dir << "; sessions are shown as token ids (--tokenizer DIR)\n";
  } catch (const std::exception& e) {
    std::cerr << "areal-host dashboard: " << e.what() << "\n";
    return 2;
  }

  const sigset_t stop_signals = block_stop_signals();
  try {
    dashboard::DashboardServer server(o);
    const std::string url = server.start();
    std::cout << "dashboard of " << o.run_dir << " at " << url << "/ (Ctrl-C stops it)" << std::endl;
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal-host dashboard: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace areal::host
