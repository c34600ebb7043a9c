#include "request.hpp"

#include <algorithm>
#include <istream>

#include "core/text/json_depth.hpp"
#include "core/text/utf8.hpp"
#include "http_error.hpp"

namespace areal::gateway {


std::string read_body(Poco::Net::HTTPServerRequest& request, size_t max_bytes) {
  std::string body;
  std::istream& in = request.stream();
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    body.append(buf, static_cast<size_t>(in.gcount()));
    if (body.size() > max_bytes)
      throw HttpError(413, "Request body exceeds the limit of " + std::to_string(max_bytes) + " bytes (gateway.max_request_bytes)");
  }
  return body;
}

nlohmann::ordered_json parse_json_object(const std::string& body, const std::string& type) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return nlohmann::ordered_json::object();
  if (!type.empty() && type.find("json") == std::string::npos)
    throw HttpError(415, "Content-Type must be application/json, got '" + type + "'");
  // JSON text is UTF-8 (RFC 8259); say where it is not, before the parser does in its own words.
  if (const size_t bad = text::first_invalid_utf8(body); bad != std::string::npos)
    throw HttpError(400, "Request body is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  nlohmann::ordered_json j;
  try {
    j = text::parse_json_bounded<nlohmann::ordered_json>(body);
  } catch (const text::JsonTooDeep& e) {
    throw HttpError(400, std::string("Request body: ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw HttpError(400, std::string("Request body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw HttpError(400, "Request body must be a JSON object");
  return j;
}

std::string bearer_token(const Poco::Net::HTTPServerRequest& request) {
  const std::string auth = request.get("Authorization", "");
  if (auth.size() > 7) {
    std::string scheme = auth.substr(0, 7);
    std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char c) { return std::tolower(c); });
    if (scheme == "bearer ") {
      std::string token = auth.substr(7);
      const auto b = token.find_first_not_of(" \t"), e = token.find_last_not_of(" \t");
      if (b != std::string::npos) return token.substr(b, e - b + 1);
    }
  }
  const std::string key = request.get("x-api-key", "");
  if (!key.empty()) return key;
  throw HttpError(401, "Missing or malformed Authorization header. Expected 'Bearer <token>' or 'x-api-key: <token>'.");
}

bool known_top_segment(const std::string& path) {
  if (path.size() < 2 || path[0] != '/') return false;
  const size_t slash = path.find('/', 1);
  const std::string first = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
  for (const char* top : {"v1", "rl", "chat", "responses", "messages", "models", "health", "metrics", "grant_capacity", "export_trajectories", "generate"})
    if (first == top) return true;
  return false;
}

bool split_session_path(const std::string& path, std::string& session, std::string& rest) {
  const size_t slash = path.find('/', 1);
  if (path.size() < 2 || slash == std::string::npos) return false;
  session = path.substr(1, slash - 1);
  rest = path.substr(slash);
  if (known_top_segment(path)) return false;
  return rest.rfind("/v1/", 0) == 0 || rest.rfind("/rl/", 0) == 0 || rest == "/chat/completions" || rest == "/responses" ||
         rest == "/messages" || rest == "/models";
}

}  // namespace areal::gateway
