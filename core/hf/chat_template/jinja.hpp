// A Jinja2 engine for chat templates, written to render the real
// `chat_template` strings of Hugging Face models byte for byte, with the
// environment transformers uses (trim_blocks, lstrip_blocks, loopcontrols,
// Python semantics for values, filters and string methods).
//
// Unsupported syntax is an error at parse time naming line and column;
// runtime errors (raise_exception, type errors, undefined access) name them
// too. Rendering never silently produces different text.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/hf/chat_template/value.hpp"

namespace areal::jinja {

struct Stmt;

class Template {
 public:
  // Throws areal::Error(INVALID_ARGUMENT) "template:LINE:COL: ...".
  explicit Template(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;

  // Renders with the given global variables. Thread-safe.
  std::string render(const Object& globals) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

}  // namespace areal::jinja
