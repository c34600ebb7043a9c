#include "core/recorder/recorder.hpp"
#include "core/text/json_depth.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/plugin_host/error.hpp"
#include "core/recorder/journal.hpp"

namespace areal::recorder {
namespace {

// The form two messages are compared in: key order ignored (Python dict
// equality), and what clients commonly change when echoing an assistant
// message back ignored too: `reasoning_content` dropped, empty content equal
// to absent content. (AReaL demands an exact echo; SDKs rarely give one.)
nlohmann::json comparable(const Json& m) {
  nlohmann::json j = nlohmann::json::parse(m.dump());
  if (j.is_object() && j.value("role", "") == "assistant") {
    j.erase("reasoning_content");
    if (j.contains("content") && j["content"].is_string() && j["content"].get<std::string>().empty()) j.erase("content");
    // Tool-call arguments are JSON text; SDKs re-serialize them with other spacing.
    if (j.contains("tool_calls") && j["tool_calls"].is_array())
      for (auto& call : j["tool_calls"])
        if (call.contains("function") && call["function"].contains("arguments") && call["function"]["arguments"].is_string()) {
          auto parsed = areal::text::parse_json_bounded_or_discarded(call["function"]["arguments"].get<std::string>());
          if (!parsed.is_discarded()) call["function"]["arguments"] = std::move(parsed);
        }
  }
  return j;
}
bool same(const Json& a, const Json& b) { return comparable(a) == comparable(b); }
// comparable()'s JSON has sorted keys: its text is canonical.
size_t comparable_hash(const Json& m) { return std::hash<std::string>{}(comparable(m).dump()); }

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

// True if `prefix` (an array) equals the first prefix.size() items of `all`.
bool is_prefix(const Json& prefix, const Json& all) {
  if (!prefix.is_array() || !all.is_array() || prefix.size() > all.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (!same(prefix[i], all[i])) return false;
  return true;
}

// The conversation a completed call leaves behind: its messages + reply.
Json history_of(const Interaction& it) {
  Json h = it.messages;
  if (it.output) {
    if (it.output->is_array())
      for (const auto& m : *it.output) h.push_back(m);
    else
      h.push_back(*it.output);
  }
  return h;
}

}  // namespace

void Recorder::journal_to(Journal* journal, std::string session_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  journal_ = journal;
  journal_id_ = std::move(session_id);
}

void Recorder::restore(std::vector<Interaction> calls) {
  std::lock_guard<std::mutex> lock(mutex_);
  items_.assign(std::make_move_iterator(calls.begin()), std::make_move_iterator(calls.end()));
  history_hashes_.clear();
}

uint64_t Recorder::journal_call_locked(size_t index) const {
  return journal_ ? journal_->write_call(journal_id_, index, items_[index]) : 0;
}

Json Recorder::normalize(const Json& v) {
  if (v.is_object()) {
    Json out = Json::object();
    for (const auto& [k, x] : v.items())
      if (!x.is_null()) out[k] = normalize(x);
    return out;
  }
  if (v.is_array()) {
    Json out = Json::array();
    for (const auto& x : v) out.push_back(normalize(x));
    return out;
  }
  return v;
}

const std::vector<size_t>& Recorder::history_hashes_locked(size_t index) const {
  if (history_hashes_.size() < items_.size()) history_hashes_.resize(items_.size());
  std::vector<size_t>& h = history_hashes_[index];
  if (h.empty())  // a completed call's messages and reply never change
    for (const auto& m : history_of(items_[index])) h.push_back(comparable_hash(m));
  return h;
}

int Recorder::find_parent_locked(const Json& messages) const {
  std::vector<size_t> want;
  if (messages.is_array())
    for (const auto& m : messages) want.push_back(comparable_hash(m));
  int best = -1;
  size_t best_len = 0;
  for (size_t i = 0; i < items_.size(); ++i) {
    if (!items_[i].complete()) continue;  // in flight: its reply is not known yet
    const std::vector<size_t>& h = history_hashes_locked(i);
    if (h.size() > best_len && h.size() <= want.size() && std::equal(h.begin(), h.end(), want.begin())) {
      best = static_cast<int>(i);
      best_len = h.size();
    }
  }
  // Hashes can collide: the match is confirmed in full, else every call is compared in full.
  if (best < 0 || is_prefix(history_of(items_[static_cast<size_t>(best)]), messages)) return best;
  best = -1, best_len = 0;
  for (size_t i = 0; i < items_.size(); ++i) {
    const Interaction& c = items_[i];
    if (!c.complete()) continue;  // in flight: its reply is not known yet
    const Json h = history_of(c);
    if (h.size() > best_len && h.size() <= messages.size() && is_prefix(h, messages)) {
      best = static_cast<int>(i);
      best_len = h.size();
    }
  }
  return best;
}

int Recorder::find_parent(const Json& messages) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return find_parent_locked(normalize(messages));
}

void Recorder::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
}

size_t Recorder::insert_locked(const std::string& id, Json messages, int parent) {
  if (closed_) throw SessionClosed("the session was exported while this call arrived: it is not recorded (start a new session)");
  for (const auto& it : items_)
    if (it.id == id) throw Error(AREAL_CODE_ALREADY_EXISTS, "interaction '" + id + "' already exists");
  Interaction it;
  it.id = id;
  it.messages = std::move(messages);
  it.parent = parent;
  items_.push_back(std::move(it));
  journal_call_locked(items_.size() - 1);  // in flight: not waited for (a crash marks it failed)
  return items_.size() - 1;
}

size_t Recorder::insert(const std::string& id, Json messages) {
  std::lock_guard<std::mutex> lock(mutex_);
  Json normal = normalize(messages);
  const int parent = find_parent_locked(normal);
  return insert_locked(id, std::move(normal), parent);
}

size_t Recorder::insert_next_turn(const std::string& id_prefix) {
  std::lock_guard<std::mutex> lock(mutex_);
  int parent = static_cast<int>(items_.size()) - 1;
  while (parent >= 0 && items_[static_cast<size_t>(parent)].failed) --parent;  // a failed call is no link in the chain
  return insert_locked(id_prefix + "-c" + std::to_string(items_.size()), Json(), parent);
}

const Interaction& Recorder::complete(size_t index, Json output, std::vector<int32_t> prompt_ids, std::vector<int32_t> output_ids,
                                      std::vector<float> logprobs, std::vector<int64_t> versions, std::string finish_reason,
                                      bool concat, ExpertRouting routing) {
  uint64_t ticket = 0;
  const Interaction* done = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done = &complete_locked(index, std::move(output), std::move(prompt_ids), std::move(output_ids), std::move(logprobs),
                            std::move(versions), std::move(finish_reason), concat, std::move(routing));
    ticket = journal_call_locked(index);
  }
  if (ticket == 0) return *done;
  try {
    journal_->wait(ticket);  // the client sees its answer only once the call is committed
  } catch (const StateUnavailable&) {
    fail(index);  // not recorded, so not trained on: like a call whose backend failed
    throw;
  }
  return *done;
}

const Interaction& Recorder::complete_locked(size_t index, Json output, std::vector<int32_t> prompt_ids, std::vector<int32_t> output_ids,
                                             std::vector<float> logprobs, std::vector<int64_t> versions, std::string finish_reason,
                                             bool concat, ExpertRouting routing) {
  if (index >= items_.size()) throw Error(AREAL_CODE_INTERNAL, "complete: no interaction " + std::to_string(index));
  if (logprobs.size() != output_ids.size() || versions.size() != output_ids.size())
    throw Error(AREAL_CODE_INTERNAL, "complete: output ids, logprobs and versions differ in length");
  if (!routing.empty() && routing.positions() + 1 != prompt_ids.size() + output_ids.size())
    throw Error(AREAL_CODE_INTERNAL, "complete: routing of " + std::to_string(routing.positions()) + " positions for " +
                                         std::to_string(prompt_ids.size() + output_ids.size()) + " tokens");
  Interaction& it = items_[index];
  it.output = normalize(output);
  if (index < history_hashes_.size()) history_hashes_[index].clear();  // made again from the new reply when needed
  it.prompt_ids = std::move(prompt_ids);
  it.output_ids = std::move(output_ids);
  it.output_logprobs = std::move(logprobs);
  it.output_versions = std::move(versions);
  it.finish_reason = std::move(finish_reason);
  it.routing = std::move(routing);
  // A concat link holds only if the prompt literally extends the parent's
  // prompt + sampled ids; otherwise the parent keeps its own export row.
  it.concat = false;
  if (concat && it.parent >= 0) {
    const Interaction& p = items_[static_cast<size_t>(it.parent)];
    const size_t n = p.prompt_ids.size() + p.output_ids.size();
    it.concat = p.complete() && it.prompt_ids.size() >= n &&
                std::equal(p.prompt_ids.begin(), p.prompt_ids.end(), it.prompt_ids.begin()) &&
                std::equal(p.output_ids.begin(), p.output_ids.end(), it.prompt_ids.begin() + static_cast<std::ptrdiff_t>(p.prompt_ids.size()));
  }
  return it;
}

void Recorder::fail(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  Interaction& it = items_.at(index);
  it.failed = true;
  it.output.reset();  // a reply that could not be recorded is no parent either
  if (index < history_hashes_.size()) history_hashes_[index].clear();
  // A reward set for "the last call" while this one was still in flight was
  // meant for the last call that answers: move it there unless that call has
  // its own.
  if (it.reward.has_value()) {
    for (size_t k = index; k-- > 0;)
      if (!items_[k].failed && items_[k].complete()) {
        if (!items_[k].reward.has_value()) {
          items_[k].reward = it.reward;
          if (journal_) journal_->write_reward(journal_id_, k, it.reward);
        }
        break;
      }
    it.reward.reset();
  }
  journal_call_locked(index);
}

void Recorder::set_reward(const std::string& id, double reward) {
  if (!std::isfinite(reward)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "reward must be a finite number, got " + number_text(reward));
  size_t index = 0;
  std::optional<double> before;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) throw SessionClosed("the session was exported while this reward arrived: it is not recorded");
    index = reward_target_locked(id);
    // Bounded before anything changes: the sum of the magnitudes bounds every
    // return however calls link or fail (fail() moves a reward, never copies
    // it). Summed in long double so the sum itself cannot overflow.
    long double magnitude = std::fabs(static_cast<long double>(reward));
    for (size_t k = 0; k < items_.size(); ++k)
      if (k != index && items_[k].reward) magnitude += std::fabs(static_cast<long double>(*items_[k].reward));
    if (magnitude > kMaxRewardMagnitude)
      throw Error(AREAL_CODE_INVALID_ARGUMENT,
                  "reward " + number_text(reward) + " would bring the session's rewards to a total magnitude of " +
                      number_text(static_cast<double>(std::min<long double>(magnitude, std::numeric_limits<double>::max()))) +
                      ", past the limit of " + number_text(kMaxRewardMagnitude) +
                      " (the discounted returns an export sums must stay finite numbers); nothing was changed");
    before = items_[index].reward;
    items_[index].reward = reward;
    if (journal_) ticket = journal_->write_reward(journal_id_, index, reward);
  }
  if (ticket == 0) return;
  try {
    journal_->wait(ticket);
  } catch (const StateUnavailable&) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (items_[index].reward == reward) items_[index].reward = before;  // undone unless changed again meanwhile
    throw;
  }
}

size_t Recorder::reward_target_locked(const std::string& id) const {
  if (items_.empty()) throw Error(AREAL_CODE_FAILED_PRECONDITION, "No interactions in session");
  if (id.empty()) {
    for (size_t k = items_.size(); k-- > 0;)
      if (!items_[k].failed) return k;
    throw Error(AREAL_CODE_FAILED_PRECONDITION, "Every interaction in the session failed; there is nothing to reward");
  }
  for (size_t k = 0; k < items_.size(); ++k)
    if (items_[k].id == id) {
      if (items_[k].failed)
        throw Error(AREAL_CODE_FAILED_PRECONDITION, "Interaction " + id + " failed (the backend returned an error); it has nothing to reward");
      return k;
    }
  throw Error(AREAL_CODE_NOT_FOUND, "Interaction " + id + " not found");
}

std::vector<double> Recorder::returns_locked(double gamma) const {
  // Children arrive after parents, so one reverse pass sees every child
  // first; each parent takes the return of its latest child.
  std::vector<double> ret(items_.size(), 0.0);
  std::vector<bool> has_child(items_.size(), false);
  std::vector<double> child_return(items_.size(), 0.0);
  for (size_t k = items_.size(); k-- > 0;) {
    const Interaction& it = items_[k];
    if (it.failed) continue;  // not a child that could pass a return back
    ret[k] = it.reward.value_or(0.0) + (has_child[k] ? gamma * child_return[k] : 0.0);
    if (it.parent >= 0 && !has_child[it.parent]) {  // the latest child of that parent
      has_child[it.parent] = true;
      child_return[it.parent] = ret[k];
    }
  }
  return ret;
}

std::vector<double> Recorder::returns(double gamma) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return returns_locked(gamma);
}

TrajectoryRow Recorder::row_of(size_t index, bool with_chain, const std::vector<double>& returns) const {
  const Interaction& it = items_[index];
  TrajectoryRow row;
  row.interaction_id = it.id;
  row.reward = returns[index];
  if (with_chain && it.concat) {  // checked at complete(): prompt_ids extend the parent's chain
    TrajectoryRow prefix = row_of(static_cast<size_t>(it.parent), true, returns);
    {
      row.input_ids = std::move(prefix.input_ids);
      row.loss_mask = std::move(prefix.loss_mask);
      row.logprobs = std::move(prefix.logprobs);
      row.versions = std::move(prefix.versions);
      row.routing = std::move(prefix.routing);
      row.turns = prefix.turns + 1;
      const size_t extra = it.prompt_ids.size() - row.input_ids.size();
      row.input_ids.insert(row.input_ids.end(), it.prompt_ids.begin() + static_cast<std::ptrdiff_t>(row.input_ids.size()), it.prompt_ids.end());
      row.loss_mask.insert(row.loss_mask.end(), extra, 0);
      row.logprobs.insert(row.logprobs.end(), extra, 0.0f);
      row.versions.insert(row.versions.end(), extra, -1);
    }
  }
  if (row.input_ids.empty()) {  // a root, or a chain that does not extend: the prompt is context only
    row.input_ids = it.prompt_ids;
    row.loss_mask.assign(it.prompt_ids.size(), 0);
    row.logprobs.assign(it.prompt_ids.size(), 0.0f);
    row.versions.assign(it.prompt_ids.size(), -1);
  }
  row.input_ids.insert(row.input_ids.end(), it.output_ids.begin(), it.output_ids.end());
  row.loss_mask.insert(row.loss_mask.end(), it.output_ids.size(), 1);
  row.logprobs.insert(row.logprobs.end(), it.output_logprobs.begin(), it.output_logprobs.end());
  row.versions.insert(row.versions.end(), it.output_versions.begin(), it.output_versions.end());
  extend_routing(row.routing, it.routing, row.input_ids.size() - 1);
  return row;
}

void Recorder::extend_routing(ExpertRouting& row, const ExpertRouting& call, size_t positions) {
  if (row.empty() && call.empty()) return;
  if (row.empty() || !row.same_shape(call)) {
    // A chain whose earlier calls were not recorded (or, never in one run,
    // were recorded for another model) keeps this call's routing alone.
    if (!row.empty() && !call.empty()) row.experts.clear();
    if (row.empty()) row.moe_layers = call.moe_layers, row.top_k = call.top_k, row.num_experts = call.num_experts;
  }
  const size_t have = row.positions(), per = row.per_position();
  if (have >= positions) return;
  // Positions this call computed first; those it did not record stay unrecorded.
  const size_t from_call = call.empty() ? 0 : std::min(call.positions(), positions);
  if (from_call > have)
    row.experts.insert(row.experts.end(), call.experts.begin() + static_cast<std::ptrdiff_t>(have * per),
                       call.experts.begin() + static_cast<std::ptrdiff_t>(from_call * per));
  row.experts.resize(positions * per, ExpertRouting::kNotRecorded);
}

std::vector<TrajectoryRow> Recorder::export_rows(ExportStyle style, double gamma, size_t* skipped) const {
  if (!(gamma >= 0.0 && gamma <= 1.0)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "discount must be in [0, 1]");
  std::lock_guard<std::mutex> lock(mutex_);
  const std::vector<double> ret = returns_locked(gamma);
  std::vector<bool> is_parent(items_.size(), false);
  for (const auto& it : items_)
    if (it.complete() && it.concat && it.parent >= 0) is_parent[it.parent] = true;
  std::vector<TrajectoryRow> rows;
  size_t incomplete = 0;
  for (size_t k = 0; k < items_.size(); ++k) {
    if (items_[k].failed) continue;
    if (!items_[k].complete()) {
      ++incomplete;
      continue;
    }
    if (style == ExportStyle::kConcat && is_parent[k]) continue;  // included in its children's rows
    rows.push_back(row_of(k, style == ExportStyle::kConcat, ret));
  }
  if (skipped) *skipped = incomplete;
  return rows;
}

size_t Recorder::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return items_.size();
}

size_t Recorder::completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(std::count_if(items_.begin(), items_.end(), [](const Interaction& it) { return it.complete() && !it.failed; }));
}

size_t Recorder::unrewarded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(std::count_if(items_.begin(), items_.end(), [](const Interaction& it) { return it.complete() && !it.failed && !it.reward; }));
}

std::optional<std::string> Recorder::last_answered_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t k = items_.size(); k-- > 0;)
    if (!items_[k].failed && items_[k].complete()) return items_[k].id;
  return std::nullopt;
}

size_t Recorder::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(std::count_if(items_.begin(), items_.end(), [](const Interaction& it) { return !it.complete() && !it.failed; }));
}

std::vector<double> Recorder::rewards() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<double> out;
  for (const auto& it : items_)
    if (it.reward) out.push_back(*it.reward);
  return out;
}

std::string Recorder::last_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return items_.empty() ? std::string() : items_.back().id;
}

int Recorder::index_of(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = items_.size(); i-- > 0;)
    if (items_[i].id == id) return static_cast<int>(i);
  return -1;
}

Interaction Recorder::get(size_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index >= items_.size()) throw Error(AREAL_CODE_NOT_FOUND, "no interaction " + std::to_string(index));
  return items_[index];
}

}  // namespace areal::recorder
