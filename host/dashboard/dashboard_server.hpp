// The dashboard's web server: the page (bundled into the binary at build
// time, nothing fetched from the network) and the JSON it polls, read from
// one run directory. `areal-host run` starts one beside training (the
// `dashboard` config section); `areal-host dashboard RUN_DIR` serves a
// finished (or running) run's files.
//
//   GET /                  the page
//   GET /dashboard.js, /dashboard.css
//   GET /api/run           {"run_dir", "name", "live"}
//   GET /api/metrics?offset=B   metrics.jsonl rows from byte B (run_data.hpp)
//   GET /api/sessions?limit=N   the latest sessions as text
#pragma once

#include <memory>
#include <string>

#include "core/hf/tokenizer/tokenizer.hpp"

namespace areal::host::dashboard {

struct ServerOptions {
  std::string run_dir;
  std::string host = "127.0.0.1";
  int port = 0;       // 0: any free port
  bool live = false;  // a run is writing run_dir now
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;  // may be null: sessions show ids
};

class DashboardServer {
 public:
  explicit DashboardServer(ServerOptions options);
  ~DashboardServer();
  DashboardServer(const DashboardServer&) = delete;
  DashboardServer& operator=(const DashboardServer&) = delete;

  // Listens; returns http://HOST:PORT. Throws areal::Error (UNAVAILABLE) when it cannot.
  std::string start();
  void stop();
  // The run has ended: the page stops polling after its next update.
  void set_live(bool live);

  struct State;  // shared with the request handlers (defined in the .cpp)

 private:
  std::shared_ptr<State> state_;
  struct Running;
  std::unique_ptr<Running> running_;
};

}  // namespace areal::host::dashboard
