// areal-engine-server: an SGLang- or vLLM-protocol HTTP server over one of
// our inference plugins (normally `local`), following those servers'
// documented wire format. The launcher starts it for `launcher.servers`
// with the local engine (docs/scale-out.md); the tests use it to run the
// sglang and vllm plugins, the proxy and the RL loop through each protocol
// on CPU (issue #7).
//
//   areal-engine-server --protocol sglang|vllm [--host ADDR] [--port N] [--plugin local]
//       [--engine-config JSON] [--plugin-dir DIR] [--tokenizer DIR]
//       [--model-name NAME] [--logprobs-mode raw_logprobs|processed_logprobs]
//       [--incremental-streaming-output]
//
// Log-prob modes follow the real servers' defaults: SGLang reports
// temperature-scaled log-probs unless SGLANG_RETURN_ORIGINAL_LOGPROB=1;
// vLLM reports raw ones unless --logprobs-mode processed_logprobs.
// Prints "listening at http://127.0.0.1:PORT" once it accepts connections.
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <exception>

#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/ThreadPool.h>

#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"
#include "routes.hpp"
#include "core/plugin_host/process_heap.hpp"

namespace {

using namespace areal::engine_server;

class Handler : public Poco::Net::HTTPRequestHandler {
 public:
  explicit Handler(Routes& r) : routes_(r) {}
  void handleRequest(Request& req, Response& resp) override {
    try {
      routes_.handle(req, resp);
    } catch (const std::exception& e) {  // a bug in the engine server: say so, never hang the client
      std::cerr << "areal-engine-server: " << e.what() << "\n";
      try {
        send_json(resp, 500, {{"error", {{"message", std::string("engine server bug: ") + e.what()}}}});
      } catch (...) {
      }
    }
  }

 private:
  Routes& routes_;
};

class Factory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  explicit Factory(Routes& r) : routes_(r) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(const Request&) override { return new Handler(routes_); }

 private:
  Routes& routes_;
};

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return argv[i + 1];
  return fallback;
}
bool flag(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i)
    if (argv[i] == name) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  areal::keep_tensor_buffers_on_heap();
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  try {
    const std::string protocol = arg(argc, argv, "--protocol", "");
    if (protocol != "sglang" && protocol != "vllm") {
      std::cerr << "usage: areal-engine-server --protocol sglang|vllm [--host ADDR] [--port N] [--plugin NAME] [--engine-config JSON] [--plugin-dir DIR] "
                   "[--tokenizer DIR] [--model-name NAME] [--logprobs-mode raw_logprobs|processed_logprobs] [--incremental-streaming-output]\n";
      return 2;
    }
    ServerOptions opt;
    opt.model_name = arg(argc, argv, "--model-name", "test-model");
    opt.incremental_stream = flag(argc, argv, "--incremental-streaming-output");
    if (protocol == "sglang") {
      const char* env = std::getenv("SGLANG_RETURN_ORIGINAL_LOGPROB");
      opt.raw_logprobs = env != nullptr && (std::string(env) == "1" || std::string(env) == "true");
    } else {
      const std::string mode = arg(argc, argv, "--logprobs-mode", "raw_logprobs");
      if (mode != "raw_logprobs" && mode != "processed_logprobs") {
        std::cerr << "--logprobs-mode: raw_logprobs or processed_logprobs\n";
        return 2;
      }
      opt.raw_logprobs = mode == "raw_logprobs";
    }
    nlohmann::json engine_config = nlohmann::json::parse(arg(argc, argv, "--engine-config", "{}"));
    if (opt.raw_logprobs) engine_config["logprob_mode"] = "raw";  // the engines default to the sampling distribution
    Engine engine(arg(argc, argv, "--plugin-dir", ""), arg(argc, argv, "--plugin", "local"), engine_config.dump(), arg(argc, argv, "--tokenizer", ""));
    std::unique_ptr<Routes> routes = protocol == "sglang" ? make_sglang_routes(engine, opt) : make_vllm_routes(engine, opt);

    Poco::Net::ServerSocket socket;
    // --host 0.0.0.0 serves other nodes (a Slurm launch); the printed URL then names this machine.
    const std::string bind_host = arg(argc, argv, "--host", "127.0.0.1");
    socket.bind(Poco::Net::SocketAddress(bind_host, static_cast<Poco::UInt16>(std::stoi(arg(argc, argv, "--port", "0")))), true);
    socket.listen(1024);
    auto* params = new Poco::Net::HTTPServerParams();
    params->setMaxThreads(512);
    params->setMaxQueued(2048);
    params->setKeepAlive(true);
    Poco::ThreadPool pool(4, 512);
    Poco::Net::HTTPServer server(new Factory(*routes), pool, socket, params);
    server.start();
    std::string shown = bind_host;
    if (bind_host == "0.0.0.0" || bind_host == "::") {
      char name[256] = {0};
      shown = gethostname(name, sizeof name - 1) == 0 ? name : "127.0.0.1";
    }
    std::cout << "areal-engine-server (" << protocol << ") listening at http://" << shown << ":" << socket.address().port() << std::endl;
    int sig = 0;
    sigwait(&stop, &sig);
    // Handler threads may wait on generations (a paused engine holds them):
    // stop accepting, let the engine run, end every generation, then join.
    server.stop();
    if (engine.paused()) engine.resume();
    engine.abort_matching("");
    server.stopAll(true);
    pool.joinAll();
  } catch (const std::exception& e) {
    std::cerr << "areal-engine-server: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
