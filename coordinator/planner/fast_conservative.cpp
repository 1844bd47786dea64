// The fast path under conservative: every blocked job gets the earliest
// start in the cores profile, and a pass after only arrivals and on-time
// ends keeps the last pass's reservations (ConservativeMemo).
#include <algorithm>
#include <string>

#include "coordinator/planner/fast_path.hpp"
#include "coordinator/planner/general_pass.hpp"

namespace corral::planning {

using Memo = ConservativeMemo;

// conservative: every blocked job gets the earliest start in the profile.
void FastPath::conservative(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& plan) {
  const auto& pend = s.pending;
  std::int64_t free_now = std::min(cores_.sum_free(), layout_.total - cores_.used_now());
  bool prof_ready = false;
  std::size_t pos = 0;
  plan.decisions.reserve(plan.decisions.size() + st.order.size());
  memo_.next.clear();
  if (memo_.valid && conservative_reuse(s, c, st, plan, pos)) {
    prof_ready = true;
  } else {
    memo_.next.clear();
    pos = 0;
  }
  for (std::size_t k = pos; k < st.order.size(); ++k) {
    const std::uint32_t idx = st.order[k];
    if (idx >= pend.size()) continue;
    const Job& j = pend[idx];
    const int smin = j.slots_min;
    if (!s.pending_cores_only && !cores_only_job(j)) {  // model.hpp pending_cores_only
      if (std::string err = check(j); !err.empty()) {
        reject(plan, j, "job " + std::to_string(j.id) + ": " + err);
        memo_.next.push_back({j.id, smin, j.slots_max, 0, Memo::kReject, 0, 0});
        continue;
      }
    }
    const Time d = planned_duration(j, c);
    const Time end = sat_add(now, d);
    if (smin <= free_now) {
      const int cap = static_cast<int>(std::min<std::int64_t>(j.slots_max, free_now));
      int sl = cap;
      bool ok = true;
      if (prof_ready) {
        if (prof_.run_end(now, smin) < end) ok = false;
        else if (cap != smin) sl = static_cast<int>(std::max<std::int64_t>(smin, std::min<std::int64_t>(cap, prof_.min_free(now, end))));
        else sl = smin;
      }
      if (ok) {
        if (prof_ready) prof_.add(now, end, -sl);
        start(plan, s, j, sl, d);
        free_now -= sl;
        memo_.next.push_back({j.id, smin, j.slots_max, d, Memo::kStart, now, sl});
        continue;
      }
    }
    if (smin > layout_.total) {
      reject(plan, j, never_fits_text(j));
      memo_.next.push_back({j.id, smin, j.slots_max, d, Memo::kReject, 0, 0});
      continue;
    }
    if (!prof_ready) {
      build_prof(now);
      prof_ready = true;
    }
    const Time t = prof_.earliest(smin, d, now);
    if (t >= kForever) {  // no room at any planned time yet
      memo_.next.push_back({j.id, smin, j.slots_max, d, Memo::kNone, 0, 0});
      continue;
    }
    const Time te = sat_add(t, d);
    const int sl = j.slots_max == smin ? smin
                                       : static_cast<int>(std::max<std::int64_t>(smin, std::min<std::int64_t>(j.slots_max, prof_.min_free(t, te))));
    prof_.add(t, te, -sl);
    reserve(plan, j, t, sl);
    memo_.next.push_back({j.id, smin, j.slots_max, d, Memo::kReserve, t, sl});
  }
  memo_.entries.swap(memo_.next);
  memo_.now = now;
  memo_.valid = prof_ready;
}

// Reuse of the previous conservative pass. Its reservations stand when the
// cores profile from now on is the one that pass left: every running job
// that went away had released its cores by now (ended on or after its
// estimate), every new running job is one of that pass's starts with the
// same release, no reservation is due yet, and the queue holds the same jobs
// in the same order (new ones only at its end). Then a full re-plan would
// find every old job at its old place (the earliest fit of each job only
// looks at the profile from now on), so only the new jobs are planned.
// Returns false, with `plan` untouched, when it does not apply.
bool FastPath::conservative_reuse(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& plan, std::size_t& pos) {
  if (now < memo_.now) return false;
  for (const FreeCores::Change& r : cores_.removed())
    if (r.holds && r.on_up != 0 && r.end > now) return false;
  std::size_t starts = 0;
  for (const Memo::Entry& e : memo_.entries) starts += e.kind == Memo::kStart;
  if (cores_.added().size() != starts) return false;
  for (const FreeCores::Change& a : cores_.added()) {
    bool found = false;
    for (const Memo::Entry& e : memo_.entries)
      if (e.kind == Memo::kStart && e.id == a.id) {
        found = a.holds && a.on_up == e.s && std::max(a.end, now) == std::max(sat_add(memo_.now, e.d), now);
        break;
      }
    if (!found) return false;
  }
  const std::size_t first = plan.decisions.size(), first_res = plan.reserves.size();
  auto fail = [&]() {
    plan.decisions.resize(first);
    plan.reserves.resize(first_res);
    memo_.next.clear();
    return false;
  };
  const auto& pend = s.pending;
  std::size_t k = 0, p = 0;
  for (; p < st.order.size(); ++p) {
    const std::uint32_t idx = st.order[p];
    if (idx >= pend.size()) continue;
    const Job& j = pend[idx];
    while (k < memo_.entries.size() && memo_.entries[k].id != j.id) {
      if (memo_.entries[k].kind == Memo::kReserve) return fail();  // left the queue or moved
      ++k;
    }
    if (k == memo_.entries.size()) break;  // a new job: planned from here on
    const Memo::Entry& e = memo_.entries[k++];
    if (e.kind == Memo::kStart || j.slots_min != e.smin || j.slots_max != e.smax) return fail();
    const bool plain = cores_only_job(j);
    if (e.kind == Memo::kReject) {
      if (!plain) {
        std::string err = check(j);
        if (err.empty()) return fail();
        reject(plan, j, "job " + std::to_string(j.id) + ": " + err);
      } else if (j.slots_min > layout_.total) {
        reject(plan, j, never_fits_text(j));
      } else {
        return fail();
      }
      memo_.next.push_back(e);
      continue;
    }
    if (!plain || planned_duration(j, c) != e.d) return fail();
    if (e.kind == Memo::kReserve) {
      if (e.t <= now) return fail();
      reserve(plan, j, e.t, e.s);
    }
    memo_.next.push_back(e);
  }
  for (; k < memo_.entries.size(); ++k)
    if (memo_.entries[k].kind == Memo::kReserve) return fail();
  pos = p;
  return true;
}

}  // namespace corral::planning
