// The gateway's HTTP/1.1 server: one event loop (epoll) owns every
// connection while it is idle or sending its request, and a pool of worker
// threads runs only requests that arrived whole. A slow or silent client
// therefore costs a socket and a few bytes, never a thread: the loop enforces
// total deadlines on each request's head and body, closes idle keep-alive
// connections, and caps connections per client address and in all.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "request_reader.hpp"

namespace areal::gateway::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  int max_threads = 256;                 // requests served at once
  size_t max_queued = 1024;              // whole requests waiting for a thread; 503 beyond
  std::chrono::duration<double> head_timeout{60.0};   // first byte of a request -> end of its headers
  std::chrono::duration<double> body_timeout{60.0};   // end of headers -> end of body
  std::chrono::duration<double> idle_timeout{60.0};   // no byte of a next request for this long: closed
  std::chrono::duration<double> send_timeout{60.0};   // a client that reads nothing of a response for this long is dropped
  size_t max_connections = 10000;         // open at once; 503 beyond
  size_t max_connections_per_client = 1024;  // open at once from one address; 503 beyond
  RequestLimits limits;
};

// Why a connection is answered by the server itself (never reaching a handler).
struct Refusal {
  int status;           // 400, 408, 413, 414, 417, 431, 503
  std::string message;
  std::string method;   // the request's method when known, else ""
  std::string target;   // the request target when known (the route's error shape), else ""
  std::string client;   // the client's address
};

class HttpServer {
 public:
  using Handler = std::function<void(Poco::Net::HTTPServerRequest&, Poco::Net::HTTPServerResponse&)>;
  // The JSON error body for a refusal (the API's own shape for its target).
  using ErrorBody = std::function<std::string(const Refusal&)>;
  // Told of every refusal (logs and metrics).
  using OnRefusal = std::function<void(const Refusal&)>;

  HttpServer(ServerOptions options, Handler handler, ErrorBody error_body, OnRefusal on_refusal);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the loop; returns the bound port. Throws
  // std::runtime_error when the address cannot be bound.
  uint16_t start();
  // Stops accepting, closes every connection (a response being sent is cut
  // off) and waits for the handlers running to return.
  void stop();

  // Connections open now (all states).
  size_t connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace areal::gateway::server
