// `areal-host tenants`: the managed service's users and API keys, in its
// state directory (the service may be running: SQLite takes both).
//   areal-host tenants (--config SERVICE.yaml | --state-dir DIR) add-user NAME
//   ... create-key USER     prints the key once; it is stored hashed
//   ... revoke-key KEY_ID
//   ... list [--json]       users, their keys (ids and prefixes) and jobs
#include <iostream>
#include <string>
#include <exception>

#include <nlohmann/json.hpp>

#include "../service/service_settings.hpp"
#include "core/tenants/tenant_store.hpp"
#include "commands.hpp"

namespace areal::host {

int manage_tenants(const CommandLine& cl) {
  const std::string usage = command_usage("tenants");
  std::string dir;
  try {
    if (cl.flags.count("state-dir")) dir = cl.flags.at("state-dir");
    else if (cl.flags.count("config")) dir = service::load_service_settings(cl.flags.at("config")).state_dir;
    if (dir.empty() || cl.positional.empty()) {
      std::cerr << usage;
      return 2;
    }
    tenants::TenantStore store(dir);
    const std::string& verb = cl.positional[0];
    const std::string arg = cl.positional.size() > 1 ? cl.positional[1] : "";
    if ((verb == "add-user" || verb == "create-key" || verb == "revoke-key") && arg.empty()) {
      std::cerr << "areal-host tenants " << verb << ": which one?\n" << usage;
      return 2;
    }
    if (verb == "add-user") {
      store.add_user(arg);
      std::cout << "user " << arg << " added; give them a key with: areal-host tenants ... create-key " << arg << "\n";
      return 0;
    }
    if (verb == "create-key") {
      const auto [k, secret] = store.create_key(arg);
      if (cl.flags.count("json")) std::cout << nlohmann::json{{"id", k.id}, {"user", k.user}, {"key", secret}}.dump() << "\n";
      else std::cout << secret << "\n";
      std::cerr << "key " << k.id << " for " << k.user << ": shown once, stored only as its SHA-256 hash\n";
      return 0;
    }
    if (verb == "revoke-key") {
      const auto k = store.revoke_key(arg);
      std::cout << "key " << k.id << " of " << k.user << " revoked\n";
      return 0;
    }
    if (verb == "list") {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& u : store.users()) {
        nlohmann::json keys = nlohmann::json::array(), jobs = nlohmann::json::array();
        for (const auto& k : store.keys(u.name)) keys.push_back({{"id", k.id}, {"prefix", k.prefix}, {"revoked", k.revoked}});
        for (const auto& j : store.jobs(u.name)) jobs.push_back({{"id", j.id}, {"model", j.experiment + "/" + j.trial}, {"state", job_state_name(j.state)}});
        out.push_back({{"user", u.name}, {"keys", keys}, {"jobs", jobs}});
      }
      if (cl.flags.count("json")) {
        std::cout << out.dump(2) << "\n";
        return 0;
      }
      for (const auto& u : out) {
        std::cout << u["user"].get<std::string>() << "\n";
        for (const auto& k : u["keys"])
          std::cout << "  key " << k["id"].get<std::string>() << " " << k["prefix"].get<std::string>() << "..." << (k["revoked"].get<bool>() ? " (revoked)" : "") << "\n";
        for (const auto& j : u["jobs"])
          std::cout << "  job " << j["id"].get<std::string>() << " " << j["model"].get<std::string>() << " " << j["state"].get<std::string>() << "\n";
      }
      return 0;
    }
    std::cerr << "areal-host tenants: unknown action '" << verb << "'\n" << usage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "areal-host tenants: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace areal::host
