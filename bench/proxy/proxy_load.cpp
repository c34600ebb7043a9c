// proxy_load: the load generator of bench/proxy/run.sh. One thread per
// concurrent client, each on its own keep-alive connection, talking to a
// gateway (directly, through areal's router, or through nginx).
//
//   proxy_load latency  URL ADMIN_KEY CONCURRENCY REQUESTS
//     Each client starts a session, then sends chat completions
//     (max_tokens 1) back to back; prints latency p50/p99 and requests/s.
//   proxy_load sessions URL ADMIN_KEY SESSIONS
//     SESSIONS clients at once, each: start_session, one chat completion,
//     set_reward (a value unique to the session), end_session; then every
//     session is exported and checked: one row, one sampled token, its own
//     reward. Prints errors, lost interactions, chat latency and requests/s
//     (the four requests per session, over the wall time before export).
//   proxy_load journal URL ADMIN_KEY CLIENTS LOG
//     CLIENTS clients, each repeating start_session, one chat completion,
//     set_reward, end_session until the gateway stops answering (the fault
//     test kills it). Every acknowledged step is appended to LOG as it is
//     answered: "started ID KEY", "rewarded ID KEY R", "ended ID KEY R".
//   proxy_load verify URL ADMIN_KEY LOG
//     Against the restarted gateway: every ended session exports with its
//     reward; every started one that had not ended still takes its key (it
//     is ended here, and a rewarded one exports its reward). Prints what was
//     lost; exits 1 unless nothing was.
// Output: one JSON object on stdout.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <exception>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <Poco/URI.h>
#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Client {
  Poco::Net::HTTPClientSession session;
  explicit Client(const Poco::URI& u) : session(u.getHost(), u.getPort()) {
    session.setKeepAlive(true);
    session.setTimeout(Poco::Timespan(600, 0));
  }
  // Returns the status; the body in `out`.
  int post(const std::string& path, const std::string& key, const json& body, std::string& out) {
    const std::string text = body.dump();
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        Poco::Net::HTTPRequest req(Poco::Net::HTTPRequest::HTTP_POST, path, Poco::Net::HTTPMessage::HTTP_1_1);
        req.setContentType("application/json");
        req.set("Authorization", "Bearer " + key);
        req.setContentLength(static_cast<std::streamsize>(text.size()));
        req.setKeepAlive(true);
        session.sendRequest(req) << text;
        Poco::Net::HTTPResponse resp;
        std::istream& in = session.receiveResponse(resp);
        out.clear();
        Poco::StreamCopier::copyToString(in, out);
        return static_cast<int>(resp.getStatus());
      } catch (const std::exception&) {
        session.reset();  // a closed keep-alive connection: one retry on a fresh one
        if (attempt == 1) return 0;
      }
    }
    return 0;
  }
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

const json kChat = {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"max_tokens", 1}};

int latency(const Poco::URI& url, const std::string& admin, int concurrency, int requests) {
  std::atomic<int> next{0}, errors{0};
  std::mutex mutex;
  std::vector<double> all;
  std::vector<std::thread> threads;
  const int warmup = std::min(200, requests / 10);
  Clock::time_point start;
  std::atomic<int> ready{0};
  for (int t = 0; t < concurrency; ++t)
    threads.emplace_back([&, t] {
      Client c(url);
      std::string body;
      if (c.post("/rl/start_session", admin, {{"task_id", "bench-" + std::to_string(t)}}, body) != 200) {
        errors++;
        ready++;
        return;
      }
      const std::string key = json::parse(body)["api_key"];
      for (int i = 0; i < warmup / concurrency + 1; ++i) c.post("/v1/chat/completions", key, kChat, body);
      ready++;
      while (ready < concurrency) std::this_thread::yield();
      std::vector<double> mine;
      while (next++ < requests) {
        const auto t0 = Clock::now();
        const int status = c.post("/v1/chat/completions", key, kChat, body);
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        if (status != 200) errors++;
      }
      c.post("/rl/end_session", key, json::object(), body);
      std::lock_guard<std::mutex> lock(mutex);
      all.insert(all.end(), mine.begin(), mine.end());
    });
  while (ready < concurrency) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  start = Clock::now();
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  double sum = 0;
  for (double x : all) sum += x;
  std::cout << json{{"mode", "latency"},
                    {"concurrency", concurrency},
                    {"requests", all.size()},
                    {"errors", errors.load()},
                    {"p50_ms", percentile(all, 0.50)},
                    {"p99_ms", percentile(all, 0.99)},
                    {"mean_ms", all.empty() ? 0 : sum / static_cast<double>(all.size())},
                    {"rps", static_cast<double>(all.size()) / wall}}
                   .dump()
            << std::endl;
  return 0;
}

int sessions(const Poco::URI& url, const std::string& admin, int n) {
  std::atomic<int> errors{0}, answered{0};  // answered: requests that got 200
  std::vector<std::string> ids(static_cast<size_t>(n));
  std::vector<double> chat_ms(static_cast<size_t>(n), 0);
  std::vector<std::thread> threads;
  std::mutex error_mutex;
  std::string first_error;
  auto fail = [&](const std::string& what) {
    errors++;
    std::lock_guard<std::mutex> lock(error_mutex);
    if (first_error.empty()) first_error = what;
  };
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      Client c(url);
      std::string body;
      int st = c.post("/rl/start_session", admin, {{"task_id", "s-" + std::to_string(i)}}, body);
      if (st != 200) return fail("start_session " + std::to_string(st) + " " + body);
      answered++;
      const json started = json::parse(body);
      const std::string key = started["api_key"];
      const auto t0 = Clock::now();
      st = c.post("/v1/chat/completions", key, kChat, body);
      chat_ms[static_cast<size_t>(i)] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (st != 200) return fail("chat " + std::to_string(st) + " " + body);
      answered++;
      if (c.post("/rl/set_reward", key, {{"reward", i / 1000.0}}, body) != 200) return fail("set_reward " + body);
      answered++;
      if (c.post("/rl/end_session", key, json::object(), body) != 200) return fail("end_session " + body);
      answered++;
      ids[static_cast<size_t>(i)] = started["session_id"];
    });
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  // Every ended session must export exactly what happened in it.
  int lost = 0;
  Client c(url);
  for (int i = 0; i < n; ++i) {
    if (ids[static_cast<size_t>(i)].empty()) continue;  // counted as an error already
    std::string body;
    const int st = c.post("/export_trajectories", admin, {{"session_id", ids[static_cast<size_t>(i)]}}, body);
    bool whole = false;
    if (st == 200) {
      const json e = json::parse(body);
      whole = e["rows"].size() == 1 && e["rows"][0]["reward"].get<double>() == i / 1000.0;
      int sampled = 0;
      if (whole)
        for (int m : e["rows"][0]["loss_mask"]) sampled += m;
      whole = whole && sampled == 1;
    }
    if (!whole) lost++;
  }
  std::cout << json{{"mode", "sessions"},
                    {"sessions", n},
                    {"errors", errors.load()},
                    {"lost", lost},
                    {"wall_s", wall},
                    {"rps", answered.load() / wall},
                    {"chat_p50_ms", percentile(chat_ms, 0.5)},
                    {"chat_p99_ms", percentile(chat_ms, 0.99)},
                    {"first_error", first_error}}
                   .dump()
            << std::endl;
  return errors == 0 && lost == 0 ? 0 : 1;
}

int journal(const Poco::URI& url, const std::string& admin, int clients, const std::string& log_path) {
  std::mutex log_mutex;
  FILE* log = std::fopen(log_path.c_str(), "a");
  if (log == nullptr) return 2;
  auto note = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mutex);
    std::fputs((line + "\n").c_str(), log);
    std::fflush(log);
  };
  std::atomic<int> ended{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&, t] {
      Client c(url);
      std::string body;
      for (int round = 0;; ++round) {
        if (c.post("/rl/start_session", admin, {{"task_id", "j" + std::to_string(t)}}, body) != 200) return;
        const json started = json::parse(body);
        const std::string id = started["session_id"], key = started["api_key"];
        note("started " + id + " " + key);
        if (c.post("/v1/chat/completions", key, kChat, body) != 200) return;
        const double reward = t * 1000 + round;  // unique per session
        if (c.post("/rl/set_reward", key, {{"reward", reward}}, body) != 200) return;
        note("rewarded " + id + " " + key + " " + std::to_string(reward));
        if (c.post("/rl/end_session", key, json::object(), body) != 200) return;
        note("ended " + id + " " + key + " " + std::to_string(reward));
        ended++;
      }
    });
  for (auto& t : threads) t.join();
  std::fclose(log);
  std::cout << json{{"mode", "journal"}, {"clients", clients}, {"ended", ended.load()}}.dump() << std::endl;
  return 0;
}

int verify(const Poco::URI& url, const std::string& admin, const std::string& log_path) {
  struct Seen {
    std::string key;
    bool rewarded = false, ended = false;
    double reward = 0;
  };
  std::map<std::string, Seen> sessions;
  std::ifstream in(log_path);
  std::string what, id, key;
  while (in >> what >> id >> key) {
    Seen& s = sessions[id];
    s.key = key;
    if (what == "rewarded" || what == "ended") in >> s.reward, s.rewarded = true;
    if (what == "ended") s.ended = true;
  }
  Client c(url);
  int ended = 0, live = 0, lost = 0;
  std::string first_loss;
  auto lose = [&](const std::string& why) {
    lost++;
    if (first_loss.empty()) first_loss = why;
  };
  for (const auto& [sid, s] : sessions) {
    std::string body;
    if (s.ended) {
      ended++;
    } else {
      // Not acknowledged as ended: it must still be active under its key
      // (410 only if its end committed and the answer died with the process).
      live++;
      const int st = c.post("/rl/end_session", s.key, json::object(), body);
      if (st != 200 && st != 410) {
        lose(sid + ": its key was refused after the restart (" + std::to_string(st) + " " + body + ")");
        continue;
      }
    }
    const int st = c.post("/export_trajectories", admin, {{"session_id", sid}}, body);
    if (st != 200) {
      lose(sid + ": export " + std::to_string(st) + " " + body);
      continue;
    }
    const json e = json::parse(body);
    if (!s.rewarded) continue;  // started only: whatever it recorded is fine
    if (e["rows"].size() != 1 || e["rows"][0]["reward"].get<double>() != s.reward)
      lose(sid + ": exported without its reward " + std::to_string(s.reward) + ": " + body.substr(0, 300));
  }
  std::cout << json{{"mode", "verify"}, {"sessions", sessions.size()}, {"ended", ended}, {"live", live}, {"lost", lost}, {"first_loss", first_loss}}.dump()
            << std::endl;
  return lost == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 6 && std::string(argv[1]) == "latency") return latency(Poco::URI(argv[2]), argv[3], std::stoi(argv[4]), std::stoi(argv[5]));
  if (argc >= 5 && std::string(argv[1]) == "sessions") return sessions(Poco::URI(argv[2]), argv[3], std::stoi(argv[4]));
  if (argc >= 6 && std::string(argv[1]) == "journal") return journal(Poco::URI(argv[2]), argv[3], std::stoi(argv[4]), argv[5]);
  if (argc >= 5 && std::string(argv[1]) == "verify") return verify(Poco::URI(argv[2]), argv[3], argv[4]);
  std::cerr << "usage: proxy_load latency URL ADMIN_KEY CONCURRENCY REQUESTS | sessions URL ADMIN_KEY SESSIONS | "
               "journal URL ADMIN_KEY CLIENTS LOG | verify URL ADMIN_KEY LOG\n";
  return 2;
}
