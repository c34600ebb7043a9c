// The dashboard's pages and JSON for one run directory, answered wherever
// they are mounted: at / by the dashboard server (dashboard_server.hpp), and
// under a job's dashboard link by the managed service (docs/service.md). The
// page asks for its data relative to where it was loaded (api/metrics, ...).
#pragma once

#include <memory>
#include <string>

#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/URI.h>

#include "core/hf/tokenizer/tokenizer.hpp"

namespace areal::host::dashboard {

struct RunView {
  std::string run_dir;
  bool live = false;  // a run is writing run_dir now
  const tokenizer::Tokenizer* tokenizer = nullptr;  // may be null: sessions show ids
};

// Answers `path` (relative to the mount: "/", "/dashboard.js", "/api/metrics",
// ...; the query from `uri`). Returns false for a path it does not serve.
// Throws areal::Error INVALID_ARGUMENT for a bad query value.
bool answer_page(const std::string& path, const Poco::URI& uri, const RunView& view, Poco::Net::HTTPServerResponse& res);

}  // namespace areal::host::dashboard
