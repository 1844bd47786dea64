// The planner's fast path: cores-only passes (no queues, no global or host
// consumables, no memory or jobfs tracking, no MONITOR, nothing freed,
// suspended or resumed by an earlier stage) under fcfs, easy and
// conservative. The node state of snap.running is kept from pass to pass
// (FreeCores), so a pass costs a few steps per running and pending job
// instead of a walk over every node. The decisions are exactly those of the
// general path (tests compare them). Its parts: the pass set-up and starts
// (fast_path.cpp), fcfs and easy (fast_easy.cpp), conservative
// (fast_conservative.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/model.hpp"
#include "coordinator/planner/conservative_memo.hpp"
#include "coordinator/planner/free_cores.hpp"
#include "coordinator/planner/node_layout.hpp"
#include "coordinator/planner/planner.hpp"
#include "coordinator/planner/profile.hpp"

namespace corral::planning {

class FastPath {
 public:
  bool enabled = true;  // Planner::set_incremental
  // Plans the pass when it is for the fast path; false (nothing changed in
  // `plan`) when it is not.
  bool plan(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& plan);
  // Forgets everything kept across passes.
  void reset() {
    memo_.valid = false;
    layout_.built = false;
  }

 private:
  const PlannerConfig* cfg = nullptr;
  Time now = 0;
  NodeLayout layout_;               // rebuilt when Snapshot::nodes_version is 0 or changes
  FreeCores cores_{layout_};
  std::vector<std::pair<Time, std::int64_t>> pass_ends_;  // (now + d, slots) of this pass's starts
  Profile prof_;                    // conservative/easy profile
  std::vector<std::pair<Time, std::int64_t>> events_;     // scratch
  ConservativeMemo memo_;

  struct EasyScan;
  void easy(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& plan);
  bool easy_skip(const Snapshot& s, EasyScan& e, std::size_t& k);
  bool easy_start(Plan& plan, const Snapshot& s, const Job& j, EasyScan& e);
  void easy_reserve(Plan& plan, const Job& j, EasyScan& e);
  void conservative(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& plan);
  bool conservative_reuse(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& plan, std::size_t& pos);
  void start(Plan& plan, const Snapshot& s, const Job& j, int sl, Time d);
  void keep_starts() {
    cores_.keep_starts();
    pass_ends_.clear();
  }
  static std::string check(const Job& j);
  void reserve(Plan& plan, const Job& j, Time at, int slots) const;
  void reject(Plan& plan, const Job& j, std::string why) const;
  void build_prof(Time t);
};

}  // namespace corral::planning
