// SessionTrajectory across the plugin ABI (1.4, areal/gateway.h): the
// gateway lends an areal_session_trajectory view of its export for one sink
// call; the host copies it back into a SessionTrajectory. Arrays only: no
// token, log-prob or version is ever printed to text on the way.
#pragma once

#include <vector>

#include "core/recorder/trajectory.hpp"
#include "areal/plugin_api.h"

namespace areal::recorder {

// A view of `t` that borrows its strings and arrays: valid while `t` lives
// and is not modified.
class TrajectoryView {
 public:
  explicit TrajectoryView(const SessionTrajectory& t);
  TrajectoryView(const TrajectoryView&) = delete;
  TrajectoryView& operator=(const TrajectoryView&) = delete;
  const areal_session_trajectory* get() const { return &view_; }

 private:
  std::vector<areal_trajectory_row> rows_;
  std::vector<areal_routing> routings_;  // rows_[i].routing points into it
  areal_session_trajectory view_{};
};

// A copy of a gateway's view. Throws INVALID_ARGUMENT for a view too short
// for its ABI version or a row with a missing array.
SessionTrajectory copy_trajectory(const areal_session_trajectory& view);

}  // namespace areal::recorder
