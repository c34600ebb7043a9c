#include "session_routes.hpp"

#include "core/recorder/areal_interactions.hpp"

#include <cmath>
#include <fstream>
#include <memory>
#include <optional>

#include "areal/sdk.hpp"
#include "core/plugin_host/error.hpp"
#include "core/recorder/recorder.hpp"
#include "http_error.hpp"
#include "request.hpp"

namespace areal::gateway {
namespace {

// Sets a reward, naming the body field in a refusal (a total past the
// recorder's bound is a 400 that changes nothing).
void set_reward(proxy::Session& session, const std::string& id, double reward, const char* field) {
  try {
    session.record.set_reward(id, reward);
  } catch (const Error& e) {
    if (e.code() == AREAL_CODE_INVALID_ARGUMENT) throw HttpError(400, std::string("'") + field + "': " + e.what());
    throw;
  }
}

std::string optional_string(const nlohmann::ordered_json& body, const char* key) {
  if (!body.contains(key) || body[key].is_null()) return "";
  if (!body[key].is_string()) throw HttpError(400, std::string("'") + key + "' must be a string");
  return body[key].get<std::string>();
}

}  // namespace

SessionRoutes::SessionRoutes(proxy::SessionStore& store, SessionSettings settings) : store_(store), settings_(std::move(settings)) {}

void SessionRoutes::require_admin(const Poco::Net::HTTPServerRequest& req) const {
  if (!store_.is_admin(bearer_token(req))) throw HttpError(403, "Invalid admin API key.");
}

std::shared_ptr<proxy::Session> SessionRoutes::session_of(const Poco::Net::HTTPServerRequest& req) const {
  const std::string token = bearer_token(req);
  try {
    auto s = store_.authorize(token);
    s->touch();
    return s;
  } catch (const Error& e) {
    if (e.code() == AREAL_CODE_FAILED_PRECONDITION) throw HttpError(410, e.what());
    if (store_.is_admin(token)) throw HttpError(401, "The admin key cannot act as a session; start a session and use its api_key.");
    throw HttpError(401, e.what());
  }
}

void SessionRoutes::append_jsonl(const nlohmann::ordered_json& exported) {
  if (settings_.trajectories_jsonl.empty()) return;
  const std::string line = exported.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(jsonl_mutex_);
  std::ofstream out(settings_.trajectories_jsonl, std::ios::app);
  if (out) out << line << std::flush;
  if (out) return;
  // The session has left the store by now and still reaches whoever took it
  // (the HTTP answer, the trainer): failing here would lose it for the sake
  // of its copy.
  sdk::log(AREAL_LOG_ERROR, "gateway",
           "could not append session " + exported.value("session_id", std::string("?")) + " to " + settings_.trajectories_jsonl +
               " (full disk?): it was delivered, but this copy of it is missing");
  sdk::host().metric_add(sdk::str("areal_gateway_trajectories_jsonl_errors_total"), 1.0);
}

bool SessionRoutes::handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& raw_body,
                           Poco::Net::HTTPServerResponse& res) {
  using J = nlohmann::ordered_json;
  const bool known = path == "/rl/start_session" || path == "/rl/end_session" || path == "/rl/set_reward" ||
                     path == "/grant_capacity" || path == "/export_trajectories" || path == "/rl/v1/start_session" ||
                     path == "/rl/v1/set_reward" || path == "/rl/v1/finalize";
  if (!known) return false;
  const bool get_allowed = path == "/rl/v1/start_session";  // the seed-000 design starts sessions with GET
  if (req.getMethod() != "POST" && !(get_allowed && req.getMethod() == "GET")) {
    res.set("Allow", "POST");
    throw HttpError(405, "Method " + req.getMethod() + " is not allowed on " + path);
  }
  try {
    if (path == "/rl/start_session" || path == "/rl/v1/start_session") {
      require_admin(req);
      J body = parse_json_object(raw_body, req.getContentType());
      if (path == "/rl/v1/start_session" && !body.contains("task_id")) body["task_id"] = "session";  // seed-000: no task id
      if (!body.contains("task_id") || !body["task_id"].is_string())
        throw HttpError(400, "'task_id' (a string) is required");
      store_.expire_idle();
      auto started = store_.start(body["task_id"].get<std::string>(), optional_string(body, "api_key"), optional_string(body, "group_id"));
      J out = {{"session_id", started.session->id}, {"api_key", started.session->api_key}, {"group_id", started.session->group_id}};
      if (!started.ended_session_id.empty()) out["ended_session_id"] = started.ended_session_id;
      send_json(res, 200, out.dump());
      return true;
    }
    if (path == "/grant_capacity") {
      require_admin(req);
      parse_json_object(raw_body, req.getContentType());
      send_json(res, 200, J{{"capacity", store_.grant_capacity(1)}}.dump());
      return true;
    }
    if (path == "/export_trajectories") {
      require_admin(req);
      const J body = parse_json_object(raw_body, req.getContentType());
      if (!body.contains("session_id") || !body["session_id"].is_string())
        throw HttpError(400, "'session_id' (a string) is required");
      double discount = settings_.turn_discount;
      if (body.contains("discount") && !body["discount"].is_null()) {
        if (!body["discount"].is_number()) throw HttpError(400, "'discount' must be a number in [0, 1]");
        discount = body["discount"].get<double>();
      }
      const std::string style = body.contains("style") && !body["style"].is_null() ? optional_string(body, "style") : settings_.export_style;
      const recorder::ExportStyle export_style = recorder::export_style_from(style);  // 400 before any state change
      std::string format = optional_string(body, "format");
      if (format.empty()) format = settings_.export_format;
      if (format != "rows" && format != "areal" && format != "both")
        throw HttpError(400, "'format' must be \"rows\", \"areal\" or \"both\", got \"" + format + "\"");
      store_.expire_idle();
      const auto exported = store_.export_session(body["session_id"].get<std::string>(), discount, export_style);
      J out = format == "areal" ? J{{"session_id", exported.session_id}} : exported.to_json();
      // The JSONL file always holds the rows form: the answer's when it has it.
      if (format != "areal") append_jsonl(out);
      else if (!settings_.trajectories_jsonl.empty()) append_jsonl(exported.to_json());
      if (format != "rows") out["interactions"] = recorder::areal_interactions(exported);
      send_json(res, 200, out.dump());
      return true;
    }
    // Session-key endpoints.
    auto session = session_of(req);
    const J body = parse_json_object(raw_body, req.getContentType());
    if (path == "/rl/end_session" || path == "/rl/v1/finalize") {
      // seed-000's finalize: the terminal reward goes to the last completion, then the session ends.
      if (path == "/rl/v1/finalize" && body.contains("final_reward") && !body["final_reward"].is_null()) {
        if (!body["final_reward"].is_number() || !std::isfinite(body["final_reward"].get<double>()))
          throw HttpError(400, "'final_reward' must be a finite number");
        try {
          // The last call that answered: a call still in flight at the end
          // (a side call) is skipped by the export, and its reward with it.
          const std::optional<std::string> target = session->record.last_answered_id();
          set_reward(*session, target.value_or(""), body["final_reward"].get<double>(), "final_reward");
        } catch (const Error& e) {
          // No call answered (none made, or every one failed): the session still
          // ends - it must not hold capacity - and the answer says the reward
          // had nowhere to go.
          if (e.code() != AREAL_CODE_FAILED_PRECONDITION) throw;
          const size_t n = store_.end(session);
          send_json(res, 200, J{{"message", "success"}, {"session_id", session->id}, {"interaction_count", n},
                                {"final_reward_applied", false}, {"reason", e.what()}}.dump());
          return true;
        }
      }
      const size_t n = store_.end(session);
      send_json(res, 200, J{{"message", "success"}, {"session_id", session->id}, {"interaction_count", n}}.dump());
      return true;
    }
    // /rl/set_reward (interaction_id) and seed-000's /rl/v1/set_reward (completion_id)
    if (!body.contains("reward") || !body["reward"].is_number() || !std::isfinite(body["reward"].get<double>()))
      throw HttpError(400, "'reward' must be a finite number");
    const std::string id = path == "/rl/v1/set_reward" ? optional_string(body, "completion_id") : optional_string(body, "interaction_id");
    set_reward(*session, id, body["reward"].get<double>(), "reward");
    send_json(res, 200, J{{"message", "success"}}.dump());
    return true;
  } catch (const recorder::SessionClosed& e) {
    throw HttpError(410, e.what());  // exported while this request was on its way
  } catch (const Error& e) {
    // Ending a session that ended meanwhile is "gone" (AReaL: 410); a reward
    // with no call to land on is the client's mistake (400). Finalize's own
    // reward refusals are answered above, so its conflicts are all ends.
    if (e.code() == AREAL_CODE_FAILED_PRECONDITION && (path == "/rl/end_session" || path == "/rl/v1/finalize")) throw HttpError(410, e.what());
    if (e.code() == AREAL_CODE_FAILED_PRECONDITION && (path == "/rl/set_reward" || path == "/rl/v1/set_reward")) throw HttpError(400, e.what());
    throw;
  }
}

}  // namespace areal::gateway
