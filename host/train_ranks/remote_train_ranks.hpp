// The controller's side of multi-process training (train.world_size > 1):
// N `areal-host train-rank` processes connect here, each creates the train
// plugin as its rank (and the algorithm plugin, for the loss), and this
// class drives them through a train vtable of its own, so the trainer loop
// trains on N ranks exactly as on one plugin instance:
//
//   compute_logprobs, train_step   the batch is split by whole sequences
//                                  (batch_split), every rank gets its slice,
//                                  the results are joined in order
//   save, load, set_version        sent to every rank (collective)
//   export_weights                 every rank gathers; rank 0 sends the full
//                                  weights here, handed to fn as CPU tensors
//   export_adapter                 the same for a LoRA adapter (NOT_FOUND
//                                  when the plugin trains every weight)
//
// The ranks evaluate the loss with their own algorithm instance (same
// plugin, same config); the areal_loss_fn given to train_step is unused.
// A rank that ends, loses its connection or fails a call fails the call
// with a message naming it, at once (the other ranks may wait in a
// collective for it); every later call fails with the same message, and
// the caller ends the run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "areal/plugin_api.h"
#include "batch_split.hpp"
#include "rank_messages.hpp"

namespace areal::host::ranks {

struct RankPlugin {
  std::string path;     // the shared library (empty for a built-in)
  std::string name;     // the built-in's name, or for messages
  nlohmann::json config = nlohmann::json::object();
};

class RemoteTrainRanks {
 public:
  // Listens on bind_host (port 0: any free one).
  RemoteTrainRanks(int world_size, const std::string& bind_host);
  ~RemoteTrainRanks();
  RemoteTrainRanks(const RemoteTrainRanks&) = delete;
  RemoteTrainRanks& operator=(const RemoteTrainRanks&) = delete;

  int port() const { return port_; }
  int world_size() const { return world_; }

  // Waits for every rank to connect (each says its rank), calling
  // `check()` between waits: it throws to give up (a rank process ended).
  void accept_ranks(int timeout_seconds, const std::function<void()>& check);
  // Every rank creates its train and algorithm instances. The rendezvous of
  // the ranks' collectives is train.init_method when set, else
  // tcp://<rank 0's host>:<a port free there>. Returns that init_method.
  std::string create(const RankPlugin& train, const RankPlugin& algorithm, const std::string& log_level);
  // Asks every rank to exit; quietly gives up on ranks already gone.
  void shutdown();

  // Rank r's host and pid, for messages.
  std::string describe(int rank) const;

  // The trainer's view: a train vtable over the ranks (self is this).
  const areal_train_vtable* vtable() const;
  void* self() { return this; }

  // The operations, as the vtable calls them (throw areal::Error).
  std::vector<float> compute_logprobs(const areal_tensor_map& batch, float temperature);
  std::string train_step(const areal_tensor_map& batch);
  // The same request to every rank; their replies in rank order.
  std::vector<Message> broadcast(const nlohmann::json& request);
  int64_t version();
  std::vector<OwnedTensor> export_weights();
  // The LoRA adapter (every rank takes part, rank 0 sends it): false when
  // the train plugin trains none.
  bool export_adapter(std::string& config_json, std::vector<OwnedTensor>& tensors);

 private:
  struct Rank {
    int fd = -1;
    std::string host;
    int64_t pid = 0;
    int free_port = 0;  // a port free on its host when it connected (rank 0's serves the rendezvous)
  };
  // Sends requests[r] to rank r, then reads every reply, whichever comes
  // first; the first failed reply or lost rank throws and breaks the group.
  std::vector<Message> call_all(std::vector<Message> requests);
  // `request` to every rank with its slice of the batch (batch_split).
  std::vector<Message> scatter(const areal_tensor_map& batch, const nlohmann::json& request, std::vector<BatchSlice>* slices);
  std::string peer(int rank) const;

  int world_ = 1, listen_fd_ = -1, port_ = 0;
  bool loopback_ = false;  // the controller listens on loopback: every rank is on this machine
  std::string broken_;  // the first failure, once there was one
  std::vector<Rank> ranks_;
};

}  // namespace areal::host::ranks
