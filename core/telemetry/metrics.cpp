#include "core/telemetry/metrics.hpp"

#include <cctype>
#include <cmath>
#include <sstream>

#include "core/plugin_host/error.hpp"

namespace areal {
namespace {

// Metric name: [a-zA-Z_:][a-zA-Z0-9_:]*, optionally followed by {labels}.
std::string_view base_name(std::string_view name) {
  auto brace = name.find('{');
  return brace == std::string_view::npos ? name : name.substr(0, brace);
}

void check_name(std::string_view name) {
  std::string_view base = base_name(name);
  bool ok = !base.empty() && !std::isdigit(static_cast<unsigned char>(base[0]));
  for (char c : base) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':');
  if (base.size() != name.size()) ok = ok && name.back() == '}';
  if (!ok) throw Error(AREAL_CODE_INVALID_ARGUMENT, "invalid metric name '" + std::string(name) + "'");
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

Metrics& Metrics::global() {
  static Metrics m;
  return m;
}

void Metrics::set(std::string_view name, double value) {
  check_name(name);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = series_.find(name);
  if (it == series_.end()) series_.emplace(std::string(name), Series{Type::kGauge, value});
  else it->second.value = value;
}

void Metrics::add(std::string_view name, double delta) {
  check_name(name);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = series_.find(name);
  if (it == series_.end()) series_.emplace(std::string(name), Series{Type::kCounter, delta});
  else it->second.value += delta;
}

double Metrics::get(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = series_.find(name);
  return it == series_.end() ? 0.0 : it->second.value;
}

std::string Metrics::render_prometheus() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream os;
  std::string last_base;
  for (const auto& [name, series] : series_) {
    std::string base(base_name(name));
    if (base != last_base) {  // one TYPE line per metric family
      os << "# TYPE " << base << (series.type == Type::kCounter ? " counter" : " gauge") << "\n";
      last_base = base;
    }
    os << name << " " << format_value(series.value) << "\n";
  }
  return os.str();
}

}  // namespace areal
