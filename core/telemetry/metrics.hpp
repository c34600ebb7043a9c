// Process-wide metrics (counters and gauges) rendered as Prometheus text.
// Plugins reach it through areal_host_api.metric_set/metric_add.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace areal {

class Metrics {
 public:
  static Metrics& global();

  // `name` may carry labels: `areal_requests_total{endpoint="chat"}`.
  // Throws areal::Error(INVALID_ARGUMENT) for a malformed name.
  void set(std::string_view name, double value);
  void add(std::string_view name, double delta);
  double get(std::string_view name) const;  // 0 when absent

  // Prometheus text exposition format 0.0.4, series sorted by name.
  std::string render_prometheus() const;

 private:
  enum class Type { kGauge, kCounter };
  struct Series {
    Type type;
    double value;
  };
  mutable std::mutex mutex_;
  std::map<std::string, Series, std::less<>> series_;
};

}  // namespace areal
