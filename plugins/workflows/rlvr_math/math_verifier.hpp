// The math verifier of the rlvr_math workflow: finds the final answer in a
// model's reply and compares it with the reference.
//
// The final answer is the last \boxed{...} if there is one, else the text
// after the last "answer:" (any case), else the last number in the reply.
// Two answers match when both parse as numbers (integers, decimals,
// fractions a/b, thousands separators, a leading $ or trailing %/period)
// equal within 1e-6 relative, else when their trimmed, lower-cased text is
// equal.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace areal::workflows {

std::optional<std::string> extract_final_answer(std::string_view reply);
std::optional<double> parse_number(std::string_view text);
bool answers_match(std::string_view given, std::string_view reference);

}  // namespace areal::workflows
