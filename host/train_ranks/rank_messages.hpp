// The controller <-> train rank channel: framed messages over a connected
// TCP socket. A message is a JSON header plus named tensors, sent as
//   u64 header length | header JSON | each tensor's bytes, in header order
// where header["tensors"] lists {name, code, bits, shape} (DLPack dtype).
// Both ends are areal-host processes of one build, so the framing is this
// build's (host byte order), not a public protocol.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>
#include <nlohmann/json.hpp>

#include "areal/tensors.h"
#include "core/plugin_host/host_tensor.hpp"

namespace areal::host::ranks {

// A tensor that owns its bytes (CPU, contiguous).
struct OwnedTensor {
  std::string name;
  DLDataType dtype{kDLFloat, 32, 1};
  std::vector<int64_t> shape;
  std::vector<char> bytes;

  int64_t numel() const;
  size_t element_size() const { return dtype.bits / 8; }
  // A DLTensor over bytes (valid while this lives and is not resized).
  DLTensor view();
  // A copy of a CPU tensor (any dtype, contiguous or not strided).
  static OwnedTensor copy_of(const std::string& name, const DLTensor& t);
};

struct Message {
  nlohmann::json header = nlohmann::json::object();
  std::vector<OwnedTensor> tensors;
};

// A set of owned tensors as an areal_tensor_map (valid while it lives).
class TensorMapView {
 public:
  explicit TensorMapView(std::vector<OwnedTensor>& tensors);
  const areal_tensor_map* get() { return builder_.get(); }

 private:
  std::vector<DLTensor> views_;
  TensorMapBuilder builder_;
};

// Whole-message I/O; throw areal::Error(UNAVAILABLE) when the peer closed
// the connection or the socket failed (`peer` names it in the message).
void write_message(int fd, const Message& m, const std::string& peer);
Message read_message(int fd, const std::string& peer);

// TCP helpers. listen_on returns a listening socket and the port it got
// (port 0: any free one).
int listen_on(const std::string& host, int port, int* bound_port);
int connect_to(const std::string& host, int port, int timeout_seconds);
// This machine's name as other nodes reach it (gethostname).
std::string host_name();
// A port free on this machine now (on `host`; empty: every interface), for
// a server that starts next. Another process may take it first: rare, and
// the server's bind error says so.
int free_port(const std::string& host = "");

}  // namespace areal::host::ranks
