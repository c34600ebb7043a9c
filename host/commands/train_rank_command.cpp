// `areal-host train-rank --controller HOST:PORT [--rank K]`: one rank of a
// multi-process training run. The launcher starts N of these (locally, or
// with srun, where K defaults to $SLURM_PROCID); each connects to the
// controller, is told which train and algorithm plugins to create and with
// what config, and then serves the controller's calls until it says stop
// or the connection ends (the controller died: a rank never outlives it).
// The protocol is host/train_ranks/rank_messages.hpp; the controller's side
// is host/train_ranks/remote_train_ranks.cpp.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <cstdint>
#include <string>
#include <vector>
#include <exception>

#include "../train_ranks/rank_messages.hpp"
#include "commands.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_api.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/plugin_loader.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "core/telemetry/logging.hpp"
#include "core/trainer/algorithm_loss.hpp"

namespace areal::host {

namespace {

using nlohmann::json;
using ranks::Message;
using ranks::OwnedTensor;

std::shared_ptr<LoadedPlugin> load_named(const json& spec) {
  const std::string path = spec.value("path", std::string());
  if (!path.empty() && path != "<built-in>") return PluginLoader::load_file(path);
  auto builtin = load_builtin(spec.value("name", std::string()));
  if (!builtin) throw Error(AREAL_CODE_NOT_FOUND, "no plugin '" + spec.value("name", std::string()) + "' to load");
  return builtin;
}

class TrainRank {
 public:
  explicit TrainRank(int rank) : rank_(rank) {}

  Message handle(const Message& in) {
    const std::string op = in.header.value("op", "");
    Message out;
    out.header = {{"ok", true}};
    if (op == "create") {
      create(in.header);
    } else if (op == "compute_logprobs") {
      std::vector<OwnedTensor> batch = in.tensors;
      ranks::TensorMapView map(batch);
      DLManagedTensor* lp = nullptr;
      void* self = train_self();  // checks that the rank was created
      throw_if_status(train_->compute_logprobs(self, map.get(), in.header.at("temperature").get<float>(), &lp), "compute_logprobs");
      std::unique_ptr<DLManagedTensor, void (*)(DLManagedTensor*)> owned(lp, [](DLManagedTensor* t) {
        if (t && t->deleter) t->deleter(t);
      });
      out.tensors.push_back(OwnedTensor::copy_of("logprobs", lp->dl_tensor));
    } else if (op == "train_step") {
      std::vector<OwnedTensor> batch = in.tensors;
      ranks::TensorMapView map(batch);
      trainer::AlgorithmLoss loss(algorithm_->plugin().algorithm(), algorithm_->self());
      StringCollector stats;
      void* self = train_self();
      throw_if_status(train_->train_step(self, map.get(), loss.fn(), stats.writer()), "train_step");
      const json s = json::parse(stats.text.empty() ? "{}" : stats.text);
      out.header["stats"] = s;
      out.header["algorithm_stats"] = loss.sums();
      // A NaN arrives as null: shown as nan, never a failed step.
      auto num = [&](const char* k) { return s.contains(k) && s[k].is_number() ? s[k].get<double>() : std::nan(""); };
      logging::get("train-rank")->info("rank {} step {} | {} tokens of {} | loss {:.6g} | grad_norm {:.6g}", rank_, num("step"),
                                       token_count(batch), num("tokens"), num("loss"), num("grad_norm"));
    } else if (op == "save" || op == "load") {
      const std::string spec = in.header.at("spec").get<std::string>();
      const areal_str s{spec.data(), spec.size()};
      throw_if_status(op == "save" ? train_->save(train_self(), s) : train_->load(train_self(), s), "");  // the plugin names the operation
    } else if (op == "set_version") {
      throw_if_status(train_->set_version(train_self(), in.header.at("version").get<int64_t>()), "set_version");
    } else if (op == "get_version") {
      int64_t v = 0;
      throw_if_status(train_->get_version(train_self(), &v), "get_version");
      out.header["version"] = v;
    } else if (op == "export_weights") {
      if (train_->export_weights == nullptr) throw Error(AREAL_CODE_UNSUPPORTED, "the train plugin has no export_weights");
      struct Sink {
        bool keep;
        std::vector<OwnedTensor>* out;
      } sink{in.header.value("send", false), &out.tensors};
      auto fn = [](void* ctx, const areal_tensor_map* w) -> areal_status* {
        auto* s = static_cast<Sink*>(ctx);
        if (!s->keep) return nullptr;  // this rank only takes part in the gather
        try {
          for (size_t i = 0; i < w->count; ++i)
            s->out->push_back(OwnedTensor::copy_of(std::string(w->names[i].data, w->names[i].size), *w->tensors[i]));
        } catch (const std::exception& e) {
          return make_status(AREAL_CODE_INTERNAL, e.what());
        }
        return nullptr;
      };
      throw_if_status(train_->export_weights(train_self(), fn, &sink), "export_weights");
    } else if (op == "export_adapter") {
      // A LoRA adapter (its config and tensors) from rank 0; every rank takes part in case the plugin gathers.
      out.header["adapter"] = false;
      if (train_->struct_size < AREAL_OFFSET_OF_END(areal_train_vtable, export_adapter) || train_->export_adapter == nullptr) return out;
      struct Sink {
        bool keep;
        Message* out;
      } sink{in.header.value("send", false), &out};
      auto fn = [](void* ctx, areal_str config, const areal_tensor_map* w) -> areal_status* {
        auto* s = static_cast<Sink*>(ctx);
        if (!s->keep) return nullptr;
        try {
          s->out->header["config"] = std::string(config.data, config.size);
          for (size_t i = 0; i < w->count; ++i)
            s->out->tensors.push_back(OwnedTensor::copy_of(std::string(w->names[i].data, w->names[i].size), *w->tensors[i]));
        } catch (const std::exception& e) {
          return make_status(AREAL_CODE_INTERNAL, e.what());
        }
        return nullptr;
      };
      StatusPtr st(train_->export_adapter(train_self(), fn, &sink));
      if (st && status_code(st.get()) == AREAL_CODE_NOT_FOUND) return out;  // it trains every weight
      if (st) throw Error(status_code(st.get()), "export_adapter: " + std::string(status_message(st.get())));
      out.header["adapter"] = true;
    } else {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "unknown operation '" + op + "'");
    }
    return out;
  }

 private:
  static int64_t token_count(const std::vector<OwnedTensor>& batch) {
    for (const auto& t : batch)
      if (t.name == "input_ids") return t.numel();
    return 0;
  }
  void* train_self() const {
    if (!train_instance_) throw Error(AREAL_CODE_INVALID_ARGUMENT, "the rank was not created yet");
    return train_instance_->self();
  }
  void create(const json& h) {
    logging::set_level(h.value("log_level", std::string("info")));
    const json& t = h.at("train");
    const json& a = h.at("algorithm");
    auto train_plugin = load_named(t);
    auto algo_plugin = load_named(a);
    if (train_plugin->kind() != AREAL_KIND_TRAIN) throw Error(AREAL_CODE_INVALID_ARGUMENT, train_plugin->name() + " is not a train plugin");
    if (algo_plugin->kind() != AREAL_KIND_ALGORITHM)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, algo_plugin->name() + " is not an algorithm plugin");
    train_services_ = make_services(train_name_);
    algo_services_ = make_services(algo_name_);
    train_instance_ = std::make_unique<PluginInstance>(train_plugin, t.at("config").dump(), &train_services_);
    algorithm_ = std::make_unique<PluginInstance>(algo_plugin, a.at("config").dump(), &algo_services_);
    train_ = train_plugin->train();
    logging::get("train-rank")->info("rank {} of {}: {} {} ready (rendezvous {})", rank_, t.at("config").value("world_size", 1),
                                     train_plugin->name(), train_plugin->version(), t.at("config").value("init_method", std::string()));
  }

  int rank_;
  std::string train_name_ = "train", algo_name_ = "algorithm";
  areal_services train_services_{}, algo_services_{};
  std::unique_ptr<PluginInstance> train_instance_, algorithm_;
  const areal_train_vtable* train_ = nullptr;
};

}  // namespace

int train_rank(const CommandLine& cl) {
  if (!cl.flags.count("controller")) throw Error(AREAL_CODE_INVALID_ARGUMENT, "train-rank needs --controller HOST:PORT");
  auto number = [](const std::string& text, const char* what) {
    try {
      size_t used = 0;
      const int v = std::stoi(text, &used);
      if (used == text.size()) return v;
    } catch (const std::exception&) {
    }
    throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string(what) + " must be an integer, got '" + text + "'");
  };
  int rank = -1;
  if (cl.flags.count("rank")) rank = number(cl.flags.at("rank"), "--rank");
  else if (const char* procid = std::getenv("SLURM_PROCID")) rank = number(procid, "$SLURM_PROCID");
  if (rank < 0) throw Error(AREAL_CODE_INVALID_ARGUMENT, "train-rank needs --rank K (or $SLURM_PROCID under srun)");
  const std::string address = cl.flags.at("controller");
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) throw Error(AREAL_CODE_INVALID_ARGUMENT, "--controller needs HOST:PORT, got '" + address + "'");
  const int timeout = cl.flags.count("connect-timeout") ? number(cl.flags.at("connect-timeout"), "--connect-timeout") : 120;
  const int fd = ranks::connect_to(address.substr(0, colon), number(address.substr(colon + 1), "--controller's port"), timeout);
  const std::string controller = "the controller at " + address;
  Message hello;
  hello.header = {{"op", "hello"}, {"rank", rank}, {"host", ranks::host_name()}, {"pid", static_cast<int64_t>(::getpid())}};
  if (rank == 0) hello.header["free_port"] = ranks::free_port();  // for the rendezvous store rank 0 serves
  ranks::write_message(fd, hello, controller);
  TrainRank worker(rank);
  while (true) {
    Message in;
    try {
      in = ranks::read_message(fd, controller);
    } catch (const std::exception& e) {
      std::cerr << "areal-host train-rank " << rank << ": " << e.what() << "; exiting\n";
      return 1;
    }
    if (in.header.value("op", "") == "shutdown") return 0;
    if (!in.header.contains("op") && in.header.value("ok", true) == false) {  // refused at hello
      std::cerr << "areal-host train-rank " << rank << ": " << in.header.value("error", std::string()) << "\n";
      return 2;
    }
    Message out;
    try {
      out = worker.handle(in);
    } catch (const Error& e) {
      out.header = {{"ok", false}, {"code", e.code()}, {"error", e.what()}};
    } catch (const std::exception& e) {
      out.header = {{"ok", false}, {"code", AREAL_CODE_INTERNAL}, {"error", e.what()}};
    }
    if (!out.header.value("ok", false))
      logging::get("train-rank")->error("rank {}: {} failed: {}", rank, in.header.value("op", ""), out.header.value("error", std::string()));
    ranks::write_message(fd, out, controller);
  }
}

}  // namespace areal::host
