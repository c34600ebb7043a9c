#include "http_server.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string_view>

#include <Poco/AutoPtr.h>
#include <Poco/Exception.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/SocketAddress.h>

#include "core/telemetry/guarded_thread.hpp"
#include "exchange.hpp"

namespace areal::gateway::server {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration ticks(std::chrono::duration<double> d) { return std::chrono::duration_cast<Clock::duration>(d); }

void set_blocking(int fd, bool blocking) {
  const int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, blocking ? (flags & ~O_NONBLOCK) : (flags | O_NONBLOCK));
}

std::string address_text(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET) inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, text, sizeof text);
  if (a.ss_family == AF_INET6) inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, text, sizeof text);
  return text;
}

std::string seconds_text(std::chrono::duration<double> d) {
  std::string s = std::to_string(d.count());
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

struct Connection {
  enum class Phase { kReading, kServing, kDraining };
  int fd = -1;
  std::string client;  // the peer's address, the per-client cap's key
  Poco::Net::SocketAddress peer;
  RequestReader reader;
  Phase phase = Phase::kReading;
  Clock::time_point deadline;
  size_t drained = 0;
  explicit Connection(const RequestLimits& limits) : reader(limits) {}
};

struct Job {
  std::shared_ptr<Connection> connection;
  ParsedRequest request;
};

struct HttpServer::Impl {
  ServerOptions options;
  Handler handler;
  ErrorBody error_body;
  OnRefusal on_refusal;
  Poco::AutoPtr<Poco::Net::HTTPServerParams> params{new Poco::Net::HTTPServerParams};

  Poco::Net::ServerSocket listener;
  Poco::Net::SocketAddress local;
  int epoll_fd = -1, wake_fd = -1;
  std::thread loop_thread;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> open{0};
  Clock::time_point listen_paused_until{};  // out of file descriptors: accept again after a pause

  // Owned by the loop thread (and by stop() once the loop has ended).
  std::unordered_map<int, std::shared_ptr<Connection>> connections;
  std::unordered_map<std::string, size_t> per_client;

  // Shared with the workers.
  std::mutex mutex;
  std::condition_variable work_ready;
  std::deque<Job> jobs;
  std::vector<std::pair<std::shared_ptr<Connection>, bool>> returned;  // served; whether to keep the connection
  size_t idle_workers = 0;
  std::vector<std::thread> workers;

  void loop();
  void accept_all(Clock::time_point now);
  void on_readable(const std::shared_ptr<Connection>& c, Clock::time_point now);
  void after_read(const std::shared_ptr<Connection>& c, RequestReader::State before, Clock::time_point now);
  void dispatch(const std::shared_ptr<Connection>& c);
  void refuse(const std::shared_ptr<Connection>& c, int status, const std::string& message, const std::string& method = "",
              const std::string& target = "");
  void close_connection(int fd);
  void take_returned(Clock::time_point now);
  void sweep(Clock::time_point now);
  void worker();
  void serve(Job& job);
  void wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
  }
  std::string respond_with(int status, const std::string& body) const {
    const auto reason = Poco::Net::HTTPResponse::getReasonForStatus(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(status));
    return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n" + (status == 503 ? "Retry-After: 1\r\n" : "") + "Connection: close\r\n\r\n" + body;
  }
};

HttpServer::HttpServer(ServerOptions options, Handler handler, ErrorBody error_body, OnRefusal on_refusal)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
  impl_->error_body = std::move(error_body);
  impl_->on_refusal = std::move(on_refusal);
}

HttpServer::~HttpServer() { stop(); }

size_t HttpServer::connections() const { return impl_->open.load(); }

uint16_t HttpServer::start() {
  Impl& s = *impl_;
  try {
    s.listener.bind(Poco::Net::SocketAddress(s.options.host, static_cast<Poco::UInt16>(s.options.port)), true);
    s.listener.listen(4096);
  } catch (const Poco::Exception& e) {
    throw std::runtime_error("cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) + ": " + e.displayText());
  }
  s.local = s.listener.address();
  s.listener.setBlocking(false);
  s.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  s.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.epoll_fd < 0 || s.wake_fd < 0) throw std::runtime_error(std::string("cannot create the event loop: ") + std::strerror(errno));
  for (int fd : {static_cast<int>(s.listener.impl()->sockfd()), s.wake_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }
  s.loop_thread = areal::guarded_thread("gateway.server", [&s] { s.loop(); });
  return s.local.port();
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (!s.loop_thread.joinable()) return;
  s.stopping = true;
  s.wake();
  s.loop_thread.join();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.jobs.clear();
  }
  s.work_ready.notify_all();
  for (auto& w : s.workers) w.join();
  s.workers.clear();
  for (auto& [fd, c] : s.connections) ::close(fd);
  s.connections.clear();
  s.per_client.clear();
  s.open = 0;
  s.listener.close();
  ::close(s.epoll_fd);
  ::close(s.wake_fd);
}

void HttpServer::Impl::loop() {
  std::vector<epoll_event> events(512);
  const int listen_fd = static_cast<int>(listener.impl()->sockfd());
  auto last_sweep = Clock::now();
  while (!stopping) {
    // One failed round (memory, a bug) is logged and counted; the loop, and
    // every other connection, goes on.
    areal::contain("gateway.server", [&] {
      const int n = epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), 100);
      const auto now = Clock::now();
      for (int i = 0; i < n; ++i) {
        const int fd = events[static_cast<size_t>(i)].data.fd;
        if (fd == listen_fd) {
          accept_all(now);
        } else if (fd == wake_fd) {
          uint64_t count;
          [[maybe_unused]] const ssize_t r = ::read(wake_fd, &count, sizeof count);
        } else if (auto it = connections.find(fd); it != connections.end()) {
          on_readable(it->second, now);
        }
      }
      take_returned(now);
      if (now - last_sweep >= std::chrono::milliseconds(100)) {
        sweep(now);
        last_sweep = now;
      }
    });
  }
  // Handlers still running get their sockets shut, so a stream to a client ends now.
  for (auto& [fd, c] : connections) {
    if (c->phase == Connection::Phase::kServing) ::shutdown(fd, SHUT_RDWR);
  }
}

void HttpServer::Impl::accept_all(Clock::time_point now) {
  const int listen_fd = static_cast<int>(listener.impl()->sockfd());
  while (true) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop watching the listener for a moment rather than spin on it.
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
        listen_paused_until = now + std::chrono::milliseconds(200);
        if (on_refusal) on_refusal({503, "out of file descriptors: not accepting for 200 ms", "", "", ""});
      }
      return;
    }
    auto c = std::make_shared<Connection>(options.limits);
    c->fd = fd;
    c->client = address_text(addr);
    c->peer = Poco::Net::SocketAddress(reinterpret_cast<const sockaddr*>(&addr), len);
    c->deadline = now + ticks(options.idle_timeout);
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // streamed tokens leave at once
    connections[fd] = c;
    ++open;
    const size_t from_client = ++per_client[c->client];
    if (connections.size() > options.max_connections) {
      refuse(c, 503, "Too many connections: " + std::to_string(options.max_connections) + " are open (gateway.max_connections); retry shortly");
      continue;
    }
    if (from_client > options.max_connections_per_client) {
      refuse(c, 503, "Too many connections from " + c->client + ": " + std::to_string(options.max_connections_per_client) +
                         " are open (gateway.max_connections_per_client); retry shortly");
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }
}

void HttpServer::Impl::on_readable(const std::shared_ptr<Connection>& c, Clock::time_point now) {
  char buffer[16384];
  // At most 256 KiB per wake-up, so one fast sender cannot starve the others (epoll is level-triggered).
  for (int round = 0; round < 16; ++round) {
    const ssize_t n = ::recv(c->fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      // The client closed (or reset): a request it left half-sent has no one to answer.
      close_connection(c->fd);
      return;
    }
    if (c->phase == Connection::Phase::kDraining) {
      c->drained += static_cast<size_t>(n);
      if (c->drained > (4u << 20)) close_connection(c->fd);
      if (c->drained > (4u << 20)) return;
      continue;
    }
    const auto before = c->reader.state();
    c->reader.feed(std::string_view(buffer, static_cast<size_t>(n)));
    after_read(c, before, now);
    if (c->phase != Connection::Phase::kReading) return;
  }
}

void HttpServer::Impl::after_read(const std::shared_ptr<Connection>& c, RequestReader::State before, Clock::time_point now) {
  using State = RequestReader::State;
  const State state = c->reader.state();
  // Total deadlines: the head from its first byte, the body from the end of the head.
  if (before == State::kIdle && (state == State::kHead || state == State::kBody)) c->deadline = now + ticks(options.head_timeout);
  if (state == State::kBody && before != State::kBody) c->deadline = now + ticks(options.body_timeout);
  if (c->reader.wants_continue()) {
    static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    [[maybe_unused]] const ssize_t sent = ::send(c->fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    c->reader.continue_sent();
  }
  if (state == State::kError) return refuse(c, c->reader.error().status, c->reader.error().message, c->reader.method(), c->reader.target());
  if (state == State::kReady) dispatch(c);
}

void HttpServer::Impl::dispatch(const std::shared_ptr<Connection>& c) {
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, nullptr);  // the worker owns the socket until it hands it back
  Job job{c, c->reader.take()};
  {
    std::unique_lock<std::mutex> lock(mutex);
    if (jobs.size() >= options.max_queued) {
      lock.unlock();
      const std::string method = job.request.method, target = job.request.target;
      return refuse(c, 503, "Too many requests waiting: " + std::to_string(options.max_threads) + " being served and " +
                                std::to_string(options.max_queued) + " waiting (gateway.max_threads, gateway.max_queued); retry shortly",
                    method, target);
    }
    c->phase = Connection::Phase::kServing;
    jobs.push_back(std::move(job));
    if (idle_workers == 0 && workers.size() < static_cast<size_t>(options.max_threads)) {
      try {
        workers.push_back(areal::guarded_thread("gateway.server", [this] { worker(); }));
      } catch (const std::system_error& e) {
        // No thread to be had (the process's limit): a worker that exists takes
        // the job when it is free; with none, the client is told to retry.
        if (workers.empty()) {
          const Job refused = std::move(jobs.back());
          jobs.pop_back();
          lock.unlock();
          return refuse(c, 503, std::string("cannot start a request thread (") + e.what() + "); retry shortly", refused.request.method,
                        refused.request.target);
        }
      }
    }
  }
  work_ready.notify_one();
}

void HttpServer::Impl::refuse(const std::shared_ptr<Connection>& c, int status, const std::string& message, const std::string& method,
                              const std::string& target) {
  const Refusal refusal{status, message, method, target, c->client};
  if (on_refusal) on_refusal(refusal);
  const std::string response = respond_with(status, error_body ? error_body(refusal) : std::string("{}"));
  [[maybe_unused]] const ssize_t sent = ::send(c->fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  // Closing with unread input would reset the connection and could destroy the
  // answer before the client reads it: stop sending, read and drop what comes
  // for a moment, then close.
  ::shutdown(c->fd, SHUT_WR);
  c->phase = Connection::Phase::kDraining;
  c->deadline = Clock::now() + std::chrono::seconds(2);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c->fd;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) != 0) epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev);
}

void HttpServer::Impl::close_connection(int fd) {
  auto it = connections.find(fd);
  if (it == connections.end()) return;
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  if (auto pc = per_client.find(it->second->client); pc != per_client.end() && --pc->second == 0) per_client.erase(pc);
  connections.erase(it);
  --open;
}

void HttpServer::Impl::take_returned(Clock::time_point now) {
  std::vector<std::pair<std::shared_ptr<Connection>, bool>> done;
  {
    std::lock_guard<std::mutex> lock(mutex);
    done.swap(returned);
  }
  for (auto& [c, keep] : done) {
    if (!keep || stopping) {
      close_connection(c->fd);
      continue;
    }
    c->phase = Connection::Phase::kReading;
    c->deadline = now + ticks(options.idle_timeout);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = c->fd;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev);
    // A pipelined request may be buffered already.
    const auto before = c->reader.state();
    c->reader.advance();
    after_read(c, before, now);
  }
  if (listen_paused_until != Clock::time_point{} && now >= listen_paused_until) {
    listen_paused_until = {};
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = static_cast<int>(listener.impl()->sockfd());
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, ev.data.fd, &ev);
  }
}

void HttpServer::Impl::sweep(Clock::time_point now) {
  std::vector<std::shared_ptr<Connection>> late;
  for (auto& [fd, c] : connections)
    if (c->phase != Connection::Phase::kServing && now >= c->deadline) late.push_back(c);
  for (auto& c : late) {
    using State = RequestReader::State;
    if (c->phase == Connection::Phase::kDraining || c->reader.state() == State::kIdle) {
      close_connection(c->fd);  // drained, or idle between requests: nothing to answer
    } else if (c->reader.state() == State::kHead) {
      refuse(c, 408, "Request line and headers not received within " + seconds_text(options.head_timeout) + " s (gateway.client_timeout_s)",
             c->reader.method(), c->reader.target());
    } else {
      refuse(c, 408, "Request body not received within " + seconds_text(options.body_timeout) + " s of its headers (gateway.client_timeout_s)",
             c->reader.method(), c->reader.target());
    }
  }
}

void HttpServer::Impl::worker() {
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    ++idle_workers;
    work_ready.wait(lock, [&] { return stopping || !jobs.empty(); });
    --idle_workers;
    if (jobs.empty()) return;  // stopping
    Job job = std::move(jobs.front());
    jobs.pop_front();
    lock.unlock();
    serve(job);
    lock.lock();
  }
}

void HttpServer::Impl::serve(Job& job) {
  const int fd = job.connection->fd;
  set_blocking(fd, true);
  const auto send_us = std::chrono::duration_cast<std::chrono::microseconds>(options.send_timeout).count();
  timeval tv{static_cast<time_t>(send_us / 1000000), static_cast<suseconds_t>(send_us % 1000000)};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  bool keep = false;
  {
    const bool head = job.request.method == "HEAD";
    ServerResponse response(fd, job.request.keep_alive && !stopping, head);
    ServerRequest request(std::move(job.request), job.connection->peer, local, *params, response);
    try {
      handler(request, response);
    } catch (...) {
      // The handler answers every error it knows; this is the last line.
    }
    if (!response.sent()) {
      const std::string body = error_body ? error_body({500, "the request handler sent no response", request.getMethod(), request.getURI(), job.connection->client}) : "{}";
      response.setStatusAndReason(Poco::Net::HTTPResponse::HTTP_INTERNAL_SERVER_ERROR);
      response.setContentType("application/json");
      response.setKeepAlive(false);
      response.sendBuffer(body.data(), body.size());
    }
    keep = response.finish() && !stopping;
  }
  set_blocking(fd, false);
  {
    std::lock_guard<std::mutex> lock(mutex);
    returned.emplace_back(job.connection, keep);
  }
  wake();
}

}  // namespace areal::gateway::server
