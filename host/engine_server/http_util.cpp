#include "http_util.hpp"

#include <sstream>

#include <Poco/URI.h>

namespace areal::engine_server {

Json read_json(Request& req) {
  std::ostringstream ss;
  ss << req.stream().rdbuf();
  const std::string text = ss.str();
  if (text.empty()) return Json::object();
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw HttpError{400, "the body is not a JSON object"};
  return j;
}

void send_json(Response& resp, int status, const Json& body) {
  const std::string text = body.dump();
  resp.setStatus(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(status));
  resp.setContentType("application/json");
  resp.setContentLength(static_cast<std::streamsize>(text.size()));
  resp.send() << text;
}

void send_text(Response& resp, int status, const std::string& text) {
  resp.setStatus(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(status));
  resp.setContentType("text/plain");
  resp.setContentLength(static_cast<std::streamsize>(text.size()));
  resp.send() << text;
}

SseWriter::SseWriter(Response& resp) {
  resp.setStatus(Poco::Net::HTTPResponse::HTTP_OK);
  resp.setContentType("text/event-stream");
  resp.setChunkedTransferEncoding(true);
  resp.set("Cache-Control", "no-cache");
  out_ = &resp.send();
}

bool SseWriter::event(const std::string& data) {
  *out_ << "data: " << data << "\n\n";
  out_->flush();
  return out_->good();
}

std::map<std::string, std::string> query(const Request& req) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : Poco::URI(req.getURI()).getQueryParameters()) out[k] = v;
  return out;
}

std::string path_of(const Request& req) { return Poco::URI(req.getURI()).getPath(); }

}  // namespace areal::engine_server
