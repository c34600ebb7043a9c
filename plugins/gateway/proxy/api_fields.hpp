// The gateway's compatibility policy, one table per API: every request field
// of the current OpenAI Chat Completions, OpenAI Responses and Anthropic
// Messages schemas (plus the SGLang/vLLM extensions agents send), and whether
// the gateway honours it or accepts and ignores it. A field in no table is
// unknown: accepted as well, and counted on /metrics by name so operators
// see what agents send. Only a malformed request is a 400.
//
// docs/http-api.md's tables are generated from these (`areal-host
// api-fields`), and a test keeps them equal.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::proxy {

enum class FieldTreatment { kHonoured, kIgnored };

struct ApiField {
  const char* name;
  FieldTreatment treatment;
  const char* note;  // what honouring means, or why ignoring is safe
};

struct ApiTable {
  const char* api;    // "chat" | "responses" | "anthropic": the metrics label
  const char* title;  // for the docs
  std::vector<ApiField> fields;
};

const ApiTable& chat_completions_fields();
const ApiTable& responses_fields();
const ApiTable& anthropic_messages_fields();

// What a request sent that the gateway did not act on. Nested items are
// named by path, e.g. "messages[].content[].image_url" or
// "tools[].type=web_search".
struct FieldNotes {
  std::vector<std::string> ignored;  // in the API's table as ignored, or nested content we drop
  std::vector<std::string> unknown;  // in no table
  void ignore(const std::string& field);
  void note_unknown(const std::string& field);  // once per request, as ignore()
};

// Notes the top-level, non-null fields of `body` that `table` marks ignored
// or does not list.
void note_fields(const nlohmann::ordered_json& body, const ApiTable& table, FieldNotes& notes);

// The keys of one nested object of a request, at a fixed place the parser
// already reads (a tool, a tool's function, a content part).
struct NestedFields {
  const char* path;                    // e.g. "tools[].function": keys are noted as "<path>.<key>"
  std::vector<const char*> honoured;   // acted on: not noted
  std::vector<const char*> ignored;    // documented as accepted and ignored
};

// Notes the non-null keys of `obj` that `fields` marks ignored or does not
// list (unknown). One level only: never a walk into client JSON.
void note_nested_fields(const nlohmann::ordered_json& obj, const NestedFields& fields, FieldNotes& notes);

// The three tables as Markdown (docs/http-api.md, "Compatibility policy").
std::string api_fields_markdown();

}  // namespace areal::proxy
