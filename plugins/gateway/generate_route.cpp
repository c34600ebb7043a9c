#include "generate_route.hpp"

#include <atomic>
#include <cstdint>
#include <vector>

#include "api_call.hpp"
#include "http_error.hpp"
#include "request.hpp"

namespace areal::gateway {
namespace {

using J = nlohmann::ordered_json;

// SGLang's sampling_params, on a ChatRequest (the generation fields only).
proxy::ChatRequest sampling_of(const J& p) {
  proxy::ChatRequest r;
  r.max_tokens = 128;  // SGLang's max_new_tokens default
  if (p.is_null()) return r;
  if (!p.is_object()) throw HttpError(400, "'sampling_params' must be an object");
  auto number = [&](const char* k) -> const J* {
    if (!p.contains(k) || p[k].is_null()) return nullptr;
    if (!p[k].is_number()) throw HttpError(400, std::string("'sampling_params.") + k + "' must be a number");
    return &p[k];
  };
  if (const J* v = number("max_new_tokens")) {
    if (v->get<double>() < 0) throw HttpError(400, "'sampling_params.max_new_tokens' must be >= 0");
    r.max_tokens = v->get<int64_t>();
  }
  if (const J* v = number("temperature")) r.temperature = v->get<float>() < 1e-6f ? 0.0f : v->get<float>();  // SGLang: below 1e-6 is greedy
  if (const J* v = number("top_p")) r.top_p = v->get<float>();
  if (const J* v = number("top_k")) r.top_k = v->get<int64_t>() < 0 || v->get<int64_t>() >= (int64_t{1} << 30) ? 0 : static_cast<int32_t>(v->get<int64_t>());
  if (const J* v = number("frequency_penalty")) r.frequency_penalty = v->get<float>();
  if (const J* v = number("presence_penalty")) r.presence_penalty = v->get<float>();
  if (const J* v = number("sampling_seed")) r.seed = v->get<uint64_t>();
  if (p.contains("stop") && !p["stop"].is_null()) {
    if (p["stop"].is_string()) r.stop.push_back(p["stop"].get<std::string>());
    else if (p["stop"].is_array())
      for (const auto& s : p["stop"]) {
        if (!s.is_string()) throw HttpError(400, "'sampling_params.stop' must be a string or a list of strings");
        r.stop.push_back(s.get<std::string>());
      }
    else throw HttpError(400, "'sampling_params.stop' must be a string or a list of strings");
  }
  if (p.contains("stop_token_ids") && !p["stop_token_ids"].is_null()) {
    if (!p["stop_token_ids"].is_array()) throw HttpError(400, "'sampling_params.stop_token_ids' must be a list of token ids");
    for (const auto& t : p["stop_token_ids"]) {
      if (!t.is_number_integer()) throw HttpError(400, "'sampling_params.stop_token_ids' must be a list of token ids");
      r.stop_token_ids.push_back(t.get<int32_t>());
    }
  }
  return r;
}

std::string next_rid() {
  static std::atomic<uint64_t> n{0};
  return "gen-" + std::to_string(++n);
}

}  // namespace

bool GenerateRoute::handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& raw_body,
                           Poco::Net::HTTPServerResponse& res) {
  if (path != "/generate") return false;
  if (req.getMethod() != "POST" && req.getMethod() != "PUT") {
    res.set("Allow", "POST, PUT");
    throw HttpError(405, "Method " + req.getMethod() + " is not allowed on /generate");
  }
  if (calling_session(req, sessions_, store_))
    throw HttpError(403, "/generate is served to the admin key only and records nothing; a session's calls go to /v1/chat/completions");
  require_chat(chat_, "/generate");
  const J body = parse_json_object(raw_body, req.getContentType());
  const bool has_text = body.contains("text") && !body["text"].is_null(), has_ids = body.contains("input_ids") && !body["input_ids"].is_null();
  if (has_text == has_ids) throw HttpError(400, "Exactly one of 'text' and 'input_ids' must be given");
  if (body.contains("input_embeds") && !body["input_embeds"].is_null()) throw HttpError(400, "'input_embeds' is not served here; send 'text' or 'input_ids'");
  // One prompt, or a batch (then the answer is a list).
  std::vector<std::vector<int32_t>> prompts;
  bool batch = false;
  auto ids_of = [](const J& v) {
    std::vector<int32_t> ids;
    for (const auto& t : v) {
      if (!t.is_number_integer()) throw HttpError(400, "'input_ids' must hold integer token ids");
      ids.push_back(t.get<int32_t>());
    }
    if (ids.empty()) throw HttpError(400, "'input_ids' must not be empty");
    return ids;
  };
  const auto& tok = chat_->tokenizer();
  if (has_text) {
    const J& t = body["text"];
    if (t.is_string()) prompts.push_back(tok.encode(t.get<std::string>(), true, true));
    else if (t.is_array()) {
      batch = true;
      for (const auto& x : t) {
        if (!x.is_string()) throw HttpError(400, "'text' must be a string or a list of strings");
        prompts.push_back(tok.encode(x.get<std::string>(), true, true));
      }
    } else {
      throw HttpError(400, "'text' must be a string or a list of strings");
    }
  } else {
    const J& ids = body["input_ids"];
    if (!ids.is_array() || ids.empty()) throw HttpError(400, "'input_ids' must be a non-empty list of token ids, or a list of them");
    if (ids[0].is_array()) {
      batch = true;
      for (const auto& x : ids) prompts.push_back(ids_of(x));
    } else {
      prompts.push_back(ids_of(ids));
    }
  }
  for (const auto& p : prompts)
    for (int32_t id : p)
      if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size())
        throw HttpError(400, "'input_ids' holds " + std::to_string(id) + ", outside the vocabulary of " + std::to_string(tok.vocab_size()));
  const J& sp = body.contains("sampling_params") ? body["sampling_params"] : J();
  if (batch && sp.is_array() && sp.size() != prompts.size()) throw HttpError(400, "'sampling_params' must have one entry per prompt");
  const bool logprobs = body.value("return_logprob", false) == true;
  std::vector<std::string> rids;
  if (body.contains("rid") && body["rid"].is_string()) {
    for (size_t i = 0; i < prompts.size(); ++i) rids.push_back(batch ? body["rid"].get<std::string>() + "_" + std::to_string(i) : body["rid"].get<std::string>());
  } else if (body.contains("rid") && body["rid"].is_array() && body["rid"].size() == prompts.size()) {
    for (const auto& r : body["rid"]) rids.push_back(r.is_string() ? r.get<std::string>() : next_rid());
  } else {
    for (size_t i = 0; i < prompts.size(); ++i) rids.push_back(next_rid());
  }
  J out = J::array();
  for (size_t i = 0; i < prompts.size(); ++i) {
    proxy::ChatRequest r = sampling_of(sp.is_array() ? sp[i] : sp);
    r.model = body.value("model", std::string());
    const size_t prompt_tokens = prompts[i].size();
    proxy::Generated g;
    try {
      g = chat_->generate_tokens(prompts[i], r);
    } catch (const Error& e) {
      if (e.code() == AREAL_CODE_INVALID_ARGUMENT) throw HttpError(400, e.what());
      throw;
    }
    J finish;
    if (g.finish_reason == "length") finish = {{"type", "length"}, {"length", g.output_ids.size()}};
    else if (!g.stop_string.empty()) finish = {{"type", "stop"}, {"matched", g.stop_string}};
    else finish = {{"type", "stop"}, {"matched", g.output_ids.empty() ? J() : J(g.output_ids.back())}};
    J meta = {{"id", rids[i]}, {"finish_reason", finish}, {"prompt_tokens", prompt_tokens}, {"completion_tokens", g.output_ids.size()},
              {"cached_tokens", 0}, {"weight_version", g.versions.empty() ? std::string("0") : std::to_string(g.versions.back())}};
    if (logprobs) {
      J lp = J::array();
      for (size_t k = 0; k < g.output_ids.size(); ++k) lp.push_back(J::array({g.logprobs[k], g.output_ids[k], nullptr}));
      meta["output_token_logprobs"] = lp;
    }
    out.push_back({{"text", g.text}, {"output_ids", g.output_ids}, {"meta_info", meta}});
  }
  send_json(res, 200, (batch ? out : out[0]).dump());
  return true;
}

}  // namespace areal::gateway
