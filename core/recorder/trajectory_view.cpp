#include "core/recorder/trajectory_view.hpp"

#include <string>

#include "core/plugin_host/error.hpp"

namespace areal::recorder {

namespace {

areal_str str_of(const std::string& s) { return areal_str{s.data(), s.size()}; }
std::string string_of(areal_str s) { return s.data == nullptr ? std::string() : std::string(s.data, s.size); }

template <class T>
std::vector<T> array_of(const T* p, size_t n, const char* what) {
  if (n > 0 && p == nullptr) throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string("trajectory row: ") + what + " is NULL");
  return n == 0 ? std::vector<T>() : std::vector<T>(p, p + n);
}

}  // namespace

TrajectoryView::TrajectoryView(const SessionTrajectory& t) {
  rows_.reserve(t.rows.size());
  routings_.reserve(t.rows.size());  // never reallocated: rows point into it
  for (const auto& r : t.rows) {
    areal_trajectory_row v{};
    v.struct_size = AREAL_OFFSET_OF_END(areal_trajectory_row, routing);
    v.interaction_id = str_of(r.interaction_id);
    v.count = r.input_ids.size();
    v.input_ids = r.input_ids.data();
    v.loss_mask = r.loss_mask.data();
    v.logprobs = r.logprobs.data();
    v.versions = r.versions.data();
    v.reward = r.reward;
    v.turns = r.turns;
    if (!r.routing.empty()) v.routing = &routings_.emplace_back(routing_view(r.routing));
    rows_.push_back(v);
  }
  view_.struct_size = AREAL_OFFSET_OF_END(areal_session_trajectory, skipped_incomplete);
  view_.session_id = str_of(t.session_id);
  view_.task_id = str_of(t.task_id);
  view_.group_id = str_of(t.group_id);
  view_.end_reason = str_of(t.end_reason);
  view_.concat = t.style == ExportStyle::kConcat ? 1 : 0;
  view_.discount = t.discount;
  view_.rows = rows_.data();
  view_.rows_count = rows_.size();
  view_.skipped_incomplete = t.skipped_incomplete;
}

SessionTrajectory copy_trajectory(const areal_session_trajectory& v) {
  if (v.struct_size < AREAL_OFFSET_OF_END(areal_session_trajectory, skipped_incomplete))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "session trajectory: struct_size " + std::to_string(v.struct_size) + " is too small");
  if (v.rows_count > 0 && v.rows == nullptr) throw Error(AREAL_CODE_INVALID_ARGUMENT, "session trajectory: rows is NULL");
  SessionTrajectory t;
  t.session_id = string_of(v.session_id);
  t.task_id = string_of(v.task_id);
  t.group_id = string_of(v.group_id);
  t.end_reason = string_of(v.end_reason);
  t.style = v.concat ? ExportStyle::kConcat : ExportStyle::kIndividual;
  t.discount = v.discount;
  t.skipped_incomplete = v.skipped_incomplete;
  t.rows.reserve(v.rows_count);
  // The rows lie at the gateway's stride, not ours: a plugin built against
  // another minor version has rows of another size (1.7's end at `turns`,
  // 80 bytes apart; 1.8's are 88). Its size is the first row's struct_size
  // (offset 0 in every version), rounded up to the struct's alignment.
  const size_t declared = v.rows_count > 0 ? v.rows[0].struct_size : 0;
  constexpr size_t kAlign = alignof(areal_trajectory_row);
  const size_t stride = (declared + kAlign - 1) / kAlign * kAlign;
  for (size_t i = 0; i < v.rows_count; ++i) {
    const areal_trajectory_row& r = *reinterpret_cast<const areal_trajectory_row*>(reinterpret_cast<const char*>(v.rows) + i * stride);
    if (r.struct_size < AREAL_OFFSET_OF_END(areal_trajectory_row, turns))
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "trajectory row: struct_size " + std::to_string(r.struct_size) + " is too small");
    if (r.struct_size != declared)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "trajectory row " + std::to_string(i) + ": struct_size " + std::to_string(r.struct_size) +
                                                   " differs from the first row's " + std::to_string(declared) + " (an array has one row size)");
    TrajectoryRow row;
    row.interaction_id = string_of(r.interaction_id);
    row.input_ids = array_of(r.input_ids, r.count, "input_ids");
    row.loss_mask = array_of(r.loss_mask, r.count, "loss_mask");
    row.logprobs = array_of(r.logprobs, r.count, "logprobs");
    row.versions = array_of(r.versions, r.count, "versions");
    row.reward = r.reward;
    row.turns = r.turns;
    if (r.struct_size >= AREAL_OFFSET_OF_END(areal_trajectory_row, routing) && r.routing != nullptr) {
      row.routing = copy_routing(*r.routing);
      if (row.routing.positions() + 1 != row.input_ids.size())
        throw Error(AREAL_CODE_INVALID_ARGUMENT, "trajectory row: routing of " + std::to_string(row.routing.positions()) + " positions for " +
                                                     std::to_string(row.input_ids.size()) + " tokens");
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace areal::recorder
