// Fuzz target: the gateway's whole request path. One gateway runs in this
// process (the mock engine behind it, the real Qwen3 tokenizer and chat
// template), listening on loopback; every input goes to it over a real
// socket. The first byte picks how: 0 - the input is the raw HTTP bytes
// (framing, limits, routing); else the rest is the JSON body of a request
// to one of the model or session routes (second byte), sent with the
// session's key, the admin key, the session in the URL, or no key. Any
// answer is fine except a 5xx other than 503 (a client's bytes must never
// be a server error) - and, under the sanitizers, any crash or leak.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "gateway_builtin.h"

namespace {

struct Gateway {
  std::shared_ptr<areal::LoadedPlugin> inference_plugin, gateway_plugin;
  std::string inf_name = "fuzz-inference", gw_name = "fuzz-gateway";
  areal_services inf_services{}, gw_services{};
  std::unique_ptr<areal::PluginInstance> inference, gateway;
  areal_inference_ref ref{};
  uint16_t port = 0;
  std::string key, session_id;
};

// One exchange on a fresh connection: the answer's status, 0 for none.
int round_trip(uint16_t port, const std::string& bytes, std::string* body = nullptr) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // libFuzzer's timer signals interrupt system calls: an interrupted connect goes on in the background.
  while (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno == EISCONN) break;
    if (errno == EINTR || errno == EALREADY) continue;
    std::perror("connect");
    std::abort();
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server answered and closed early (a 4xx on the head)
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);  // no more bytes: a half-sent request ends here, not at a timeout
  std::string answer;
  char buf[65536];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) answer.append(buf, static_cast<size_t>(n));
  close(fd);
  if (body) *body = answer.substr(answer.find("\r\n\r\n") == std::string::npos ? answer.size() : answer.find("\r\n\r\n") + 4);
  if (answer.rfind("HTTP/1.1 ", 0) != 0 || answer.size() < 12) return 0;
  return std::atoi(answer.c_str() + 9);
}

std::string post(const std::string& path, const std::string& auth, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: fuzz\r\n" + (auth.empty() ? "" : "Authorization: Bearer " + auth + "\r\n") +
         "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

Gateway& gateway() {
  static Gateway* g = [] {
    auto* g = new Gateway;  // lives for the process: the fuzzer exits without tearing it down
    areal::register_builtin("gateway", &areal_builtin_gateway_init);
    areal::PluginCatalog catalog({AREAL_FUZZ_PLUGIN_DIR});
    g->inference_plugin = catalog.resolve("mock_inference", AREAL_KIND_INFERENCE);
    g->inf_services = areal::make_services(g->inf_name);
    const nlohmann::json inf_cfg = {{"model", "mock-qwen"}, {"vocab_size", 151669}, {"eos_token_id", -1}, {"max_context", 4096},
                                    {"token_delay_ms", 0}, {"workers", 1}, {"weights_seed", 0}};
    g->inference = std::make_unique<areal::PluginInstance>(g->inference_plugin, inf_cfg.dump(), &g->inf_services);
    g->ref = {AREAL_OFFSET_OF_END(areal_inference_ref, self), g->inference_plugin->inference(), g->inference->self()};
    g->gateway_plugin = areal::load_builtin("gateway");
    g->gw_services = areal::make_services(g->gw_name);
    g->gw_services.inference = &g->ref;
    const nlohmann::json cfg = {{"host", "127.0.0.1"}, {"port", 0}, {"admin_api_key", "fuzz-admin"}, {"max_request_bytes", 1 << 20},
                                {"tokenizer", AREAL_FUZZ_QWEN3_TOKENIZER}, {"default_max_tokens", 4}, {"max_completion_tokens", 8},
                                {"client_timeout_s", 2}, {"idle_timeout_s", 2}, {"state_dir", "none"}};
    g->gateway = std::make_unique<areal::PluginInstance>(g->gateway_plugin, cfg.dump(), &g->gw_services);
    areal::StringCollector url;
    areal::throw_if_status(g->gateway_plugin->gateway()->start(g->gateway->self(), url.writer()), "start");
    g->port = static_cast<uint16_t>(std::stoi(url.text.substr(url.text.rfind(':') + 1)));
    std::string body;
    if (round_trip(g->port, post("/rl/start_session", "fuzz-admin", R"({"task_id": "fuzz"})"), &body) != 200) std::abort();
    const auto started = nlohmann::json::parse(body);
    g->key = started["api_key"];
    g->session_id = started["session_id"];
    return g;
  }();
  return *g;
}

}  // namespace

// The gateway starts here, outside every input's -timeout: loading the
// Qwen3 tokenizer under the sanitizers takes seconds.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gateway();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Gateway& g = gateway();
  if (size < 2) return 0;
  const std::string rest(reinterpret_cast<const char*>(data + 2), size - 2);
  std::string bytes;
  if (data[0] % 4 == 0) {
    bytes = std::string(reinterpret_cast<const char*>(data + 1), size - 1);
  } else {
    const std::string routes[] = {"/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens", "/rl/set_reward",
                                  "/" + g.session_id + "/v1/chat/completions", "/" + g.key + "/v1/messages", "/rl/v1/set_reward"};
    const std::string auth[] = {g.key, "fuzz-admin", ""};
    bytes = post(routes[data[1] % 8], auth[(data[0] % 4) - 1], rest);
  }
  const int status = round_trip(g.port, bytes);
  if (status >= 500 && status != 503) {
    std::fprintf(stderr, "a client's bytes got HTTP %d\n", status);
    std::abort();
  }
  return 0;
}
