#include <gtest/gtest.h>

#include "core/plugin_host/error.hpp"
#include "core/telemetry/metrics.hpp"

TEST(Metrics, RendersPrometheusTextWithOneTypeLinePerFamily) {
  areal::Metrics m;
  m.add("areal_requests_total{endpoint=\"chat\"}", 2);
  m.add("areal_requests_total{endpoint=\"chat\"}", 1);
  m.add("areal_requests_total{endpoint=\"models\"}", 1);
  m.set("areal_policy_version", 7);
  EXPECT_DOUBLE_EQ(m.get("areal_requests_total{endpoint=\"chat\"}"), 3);
  EXPECT_EQ(m.render_prometheus(),
            "# TYPE areal_policy_version gauge\n"
            "areal_policy_version 7\n"
            "# TYPE areal_requests_total counter\n"
            "areal_requests_total{endpoint=\"chat\"} 3\n"
            "areal_requests_total{endpoint=\"models\"} 1\n");
}

TEST(Metrics, RejectsMalformedNames) {
  areal::Metrics m;
  EXPECT_THROW(m.set("9lives", 1), areal::Error);
  EXPECT_THROW(m.set("has space", 1), areal::Error);
  EXPECT_THROW(m.set("open{label=\"x\"", 1), areal::Error);
  EXPECT_THROW(m.set("", 1), areal::Error);
}
