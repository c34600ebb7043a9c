// The servers behind one inference plugin: health, load and request
// affinity. A session's calls go to the server that served it before (its
// prefix cache); otherwise to the healthy server with the fewest requests in
// flight. A server that failed a call or a health check is skipped until a
// health check passes; one that missed a weight update is skipped until the
// next update reaches it; one that did not take a resume, until one does.
#pragma once

#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "http_client.hpp"

namespace areal::remote {

class ServerPool {
 public:
  explicit ServerPool(std::vector<Url> servers);

  size_t size() const { return servers_.size(); }
  const Url& url(size_t i) const { return servers_[i].url; }

  // A server for a call, counted as in flight until release(); -1 when none
  // is usable. With `adapter` (a served name): only a server that has it.
  int acquire(const std::string& affinity_key, const std::string& adapter = "");
  void release(int server);

  void mark_down(int server, const std::string& why);
  bool mark_up(int server);                            // true if it was down
  bool healthy(int server);
  void set_stale(int server, bool stale);
  // A server that failed to load an adapter (or lost it in a restart) gets
  // no request that needs it; the others still go there.
  void set_missing_adapter(int server, const std::string& adapter, bool missing);
  void forget_adapter(const std::string& adapter);  // unloaded everywhere
  // Paused on the server because a resume failed; cleared when one succeeds.
  void set_held(int server, bool held);
  bool held(int server);

  std::string describe() const;  // "http://a (down: ...), http://b (up)"

 private:
  struct Server {
    Url url;
    bool healthy = true;
    bool stale = false;
    bool held = false;
    int inflight = 0;
    std::string last_error;
    std::set<std::string> missing_adapters;  // served names it does not have
  };
  bool usable(const Server& s) const { return s.healthy && !s.stale && !s.held; }
  bool usable_for(const Server& s, const std::string& adapter) const { return usable(s) && (adapter.empty() || !s.missing_adapters.count(adapter)); }

  mutable std::mutex mutex_;
  std::vector<Server> servers_;
  std::unordered_map<std::string, int> affinity_;
  std::deque<std::string> affinity_order_;  // oldest first, for eviction
  size_t next_ = 0;                         // round-robin among equals
};

}  // namespace areal::remote
