// Moving and copying jobs and placements between the replay's queues: the
// member-wise moves that skip what a trace job leaves empty (private to the
// simulator).
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "coordinator/model.hpp"

namespace corral::sim::detail {

// Members of an aggregate (counted by brace-initializing it from placeholders):
// shift_job/shift_running below must list every member.
struct AnyField {
  template <class T>
  operator T() const;
};
template <class T, class... A>
constexpr std::size_t field_count() {
  if constexpr (requires { T{A{}..., AnyField{}}; }) return field_count<T, A..., AnyField>();
  else return sizeof...(A);
}

// Moves pending job `s` into the place `d` of a job that left (the queue's
// compaction, once per job that leaves). A trace job's strings and
// consumables are mostly empty: moving only the members that hold something
// skips most of Job's out-of-line member moves. Lists every member of
// model.hpp's Job: the member count check fails when Job changes, so this is
// updated with it.
inline void shift_job(Job& d, Job& s) {
  static_assert(field_count<Job>() == 29, "corral::Job changed: update shift_job()");
  auto str = [](std::string& a, std::string& b) {
    if ((a.size() | b.size()) != 0) a = std::move(b);  // one branch: both empty, nothing to do
  };
  d.id = s.id;
  str(d.name, s.name);
  str(d.user, s.user);
  str(d.group, s.group);
  str(d.project, s.project);
  str(d.queue, s.queue);
  str(d.flow_step, s.flow_step);
  str(d.pe, s.pe);
  d.submit = s.submit;
  d.walltime = s.walltime;
  d.estimate = s.estimate;
  d.predicted = s.predicted;
  d.slots_min = s.slots_min;
  d.slots_max = s.slots_max;
  d.mem_mb = s.mem_mb;
  d.jobfs_mb = s.jobfs_mb;
  if ((d.consumables.size() | s.consumables.size()) != 0) d.consumables = std::move(s.consumables);
  d.reserve = s.reserve;
  d.immediate = s.immediate;
  d.checkpointable = s.checkpointable;
  d.preempt = s.preempt;
  d.priority = s.priority;
  d.cycles_pending = s.cycles_pending;
  d.requeues = s.requeues;
  d.pba_preemptions = s.pba_preemptions;
  d.last_start_priority = s.last_start_priority;
  d.work_done = s.work_done;
  d.first_start = s.first_start;
  d.age_at = s.age_at;
}

// A Job built from pending job `s` by shift_job() where it is needed: as the
// first argument of a RunningJob's parenthesized aggregate initialization it
// builds the entry's job in place (the conversion's result is the member), so
// the entry is not value-initialized (zeroed, then given its defaults) first.
struct MovedJob {
  Job& s;
  operator Job() const {
    Job d;  // the defaults only (every scalar member has one; `{}` would zero it first)
    shift_job(d, s);
    return d;  // NRVO: d is the member
  }
};

// A Job with id `id` and every other member its default, built where it is
// needed (a vector's emplace_back(NewJob{id}) constructs it in place).
struct NewJob {
  JobId id;
  operator Job() const {
    Job d;
    d.id = id;
    return d;
  }
};

// The same for a running entry (finish() moves the last entry into the
// place of the one that ended).
inline void shift_running(RunningJob& d, RunningJob& s) {
  static_assert(field_count<RunningJob>() == 11, "corral::RunningJob changed: update shift_running()");
  shift_job(d.job, s.job);
  d.start = s.start;
  d.expected_end = s.expected_end;
  d.slots = s.slots;
  d.placement.swap(s.placement);  // s is destroyed next: no vector freed here
  d.suspended = s.suspended;
  d.backfilled = s.backfilled;
  d.suspended_for = s.suspended_for;
  d.suspended_since = s.suspended_since;
  d.stopping = s.stopping;
  d.backfill_estimate = s.backfill_estimate;
}

// d = s for a start's placement (a pooled buffer: its old entries are
// overwritten in place). Member-wise, and an entry's cores only when either
// side has some: compact starts on node ranges carry none, and vector::assign
// would assign each element's empty vector<int> on every start.
inline void copy_place(std::vector<Placement>& d, std::span<const Placement> s) {
  static_assert(field_count<Placement>() == 4, "corral::Placement changed: update copy_place()");
  if (d.size() > s.size()) d.resize(s.size());
  const std::size_t k = d.size();
  Placement* const o = d.data();
  for (std::size_t i = 0; i < k; ++i) {
    o[i].node = s[i].node;
    o[i].slots = s[i].slots;
    o[i].count = s[i].count;
    if ((o[i].cores.size() | s[i].cores.size()) != 0) o[i].cores = s[i].cores;
  }
  for (std::size_t i = k; i < s.size(); ++i) d.push_back(s[i]);
}

}  // namespace corral::sim::detail
