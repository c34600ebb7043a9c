// areal-host subcommands. Each returns the process exit code:
// 0 success, 1 the command ran and found problems, 2 usage or load errors.
#pragma once

#include "../cli.hpp"

namespace areal::host {

int run_job(const CommandLine& cl);
int sft_job(const CommandLine& cl);
int serve_dashboard(const CommandLine& cl);
int check_config(const CommandLine& cl);
int list_plugins(const CommandLine& cl);
int conformance(const CommandLine& cl);
int config_reference(const CommandLine& cl);
int api_fields(const CommandLine& cl);
int tokenize(const CommandLine& cl);
int serve(const CommandLine& cl);
int init_model(const CommandLine& cl);
int train_rank(const CommandLine& cl);
int launch(const CommandLine& cl);
int run_service(const CommandLine& cl);
int manage_tenants(const CommandLine& cl);

}  // namespace areal::host
