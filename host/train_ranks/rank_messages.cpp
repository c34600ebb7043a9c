#include "rank_messages.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/plugin_host/error.hpp"

namespace areal::host::ranks {

using nlohmann::json;

int64_t OwnedTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

DLTensor OwnedTensor::view() {
  DLTensor t{};
  t.data = bytes.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = shape.data();
  return t;
}

OwnedTensor OwnedTensor::copy_of(const std::string& name, const DLTensor& t) {
  if (t.device.device_type != kDLCPU) throw Error(AREAL_CODE_INVALID_ARGUMENT, "tensor '" + name + "' is not on the CPU");
  OwnedTensor o;
  o.name = name;
  o.dtype = t.dtype;
  o.shape.assign(t.shape, t.shape + t.ndim);
  const size_t elem = (t.dtype.bits * t.dtype.lanes + 7) / 8;
  const int64_t n = o.numel();
  o.bytes.resize(static_cast<size_t>(n) * elem);
  const char* base = static_cast<const char*>(t.data) + t.byte_offset;
  bool contiguous = t.strides == nullptr;
  if (!contiguous) {  // strides may still describe a contiguous layout
    contiguous = true;
    int64_t expect = 1;
    for (int32_t d = t.ndim - 1; d >= 0; --d) {
      if (t.shape[d] != 1 && t.strides[d] != expect) contiguous = false;
      expect *= t.shape[d];
    }
  }
  if (contiguous) {
    if (n > 0) std::memcpy(o.bytes.data(), base, o.bytes.size());
    return o;
  }
  std::vector<int64_t> index(t.ndim, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = 0;
    for (int32_t d = 0; d < t.ndim; ++d) offset += index[d] * t.strides[d];
    std::memcpy(o.bytes.data() + i * elem, base + offset * static_cast<int64_t>(elem), elem);
    for (int32_t d = t.ndim - 1; d >= 0; --d) {
      if (++index[d] < t.shape[d]) break;
      index[d] = 0;
    }
  }
  return o;
}

TensorMapView::TensorMapView(std::vector<OwnedTensor>& tensors) {
  views_.reserve(tensors.size());  // no reallocation: the builder keeps pointers
  for (auto& t : tensors) {
    views_.push_back(t.view());
    builder_.add(t.name, &views_.back());
  }
}

namespace {

void write_all(int fd, const char* p, size_t n, const std::string& peer) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) throw Error(AREAL_CODE_UNAVAILABLE, "lost the connection to " + peer + ": " + std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void read_all(int fd, char* p, size_t n, const std::string& peer) {
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k == 0) throw Error(AREAL_CODE_UNAVAILABLE, peer + " closed its connection (the process ended)");
    if (k < 0) throw Error(AREAL_CODE_UNAVAILABLE, "lost the connection to " + peer + ": " + std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

}  // namespace

void write_message(int fd, const Message& m, const std::string& peer) {
  json header = m.header;
  header["tensors"] = json::array();
  for (const auto& t : m.tensors)
    header["tensors"].push_back({{"name", t.name}, {"code", t.dtype.code}, {"bits", t.dtype.bits}, {"shape", t.shape}});
  const std::string text = header.dump();
  const uint64_t length = text.size();
  write_all(fd, reinterpret_cast<const char*>(&length), sizeof length, peer);
  write_all(fd, text.data(), text.size(), peer);
  for (const auto& t : m.tensors) write_all(fd, t.bytes.data(), t.bytes.size(), peer);
}

Message read_message(int fd, const std::string& peer) {
  uint64_t length = 0;
  read_all(fd, reinterpret_cast<char*>(&length), sizeof length, peer);
  if (length > (uint64_t{1} << 32)) throw Error(AREAL_CODE_INTERNAL, peer + " sent a malformed message (header of " + std::to_string(length) + " bytes)");
  std::string text(length, '\0');
  read_all(fd, text.data(), text.size(), peer);
  Message m;
  m.header = json::parse(text);
  for (const auto& d : m.header.at("tensors")) {
    OwnedTensor t;
    t.name = d.at("name").get<std::string>();
    t.dtype = DLDataType{d.at("code").get<uint8_t>(), d.at("bits").get<uint8_t>(), 1};
    t.shape = d.at("shape").get<std::vector<int64_t>>();
    t.bytes.resize(static_cast<size_t>(t.numel()) * t.element_size());
    read_all(fd, t.bytes.data(), t.bytes.size(), peer);
    m.tensors.push_back(std::move(t));
  }
  m.header.erase("tensors");
  return m;
}

namespace {

addrinfo* resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) throw Error(AREAL_CODE_UNAVAILABLE, "cannot resolve '" + host + "': " + gai_strerror(rc));
  return res;
}

}  // namespace

int listen_on(const std::string& host, int port, int* bound_port) {
  addrinfo* res = resolve(host, port, true);
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) throw Error(AREAL_CODE_UNAVAILABLE, "cannot listen on " + host + ":" + std::to_string(port) + ": " + why);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound_port = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                                 : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return fd;
}

int connect_to(const std::string& host, int port, int timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  std::string why;
  while (true) {  // the controller may not listen yet when a rank starts
    addrinfo* res = resolve(host, port, false);
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        ::freeaddrinfo(res);
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
      }
      why = std::strerror(errno);
      ::close(fd);
    }
    ::freeaddrinfo(res);
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(AREAL_CODE_UNAVAILABLE, "cannot reach the controller at " + host + ":" + std::to_string(port) + ": " + why);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int free_port(const std::string& host) {
  int port = 0;
  ::close(listen_on(host, 0, &port));
  return port;
}

std::string host_name() {
  char name[256] = {0};
  if (::gethostname(name, sizeof name - 1) != 0) return "127.0.0.1";
  return name;
}

}  // namespace areal::host::ranks
