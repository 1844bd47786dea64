// Queue-ordering policies: the order in which the
// planner considers pending jobs when no allocation policy reorders them.
// Pure: the only time used is Snapshot::now.
#pragma once

#include <algorithm>
#include <string>

#include "coordinator/model.hpp"
#include "coordinator/names.hpp"  // Order
#include "coordinator/planner/pass_hints.hpp"

namespace corral {

struct OrderConfig {
  // Names: coordinator/names.hpp.
  // "fifo": submit time, then job id (the SWF/textbook convention).
  // "sjf":  shortest estimate first (estimate = Job::estimate if set, else walltime).
  // "saf":  smallest area first (estimate x slots).
  // "wfp3": highest (wait/estimate)^3 x slots first (Tang et al., WFP3).
  // "lxf":  largest expansion factor (wait + estimate) / estimate first.
  // "sjbf": FIFO head, backfill candidates shortest first ("shortest job
  //         backfilled first", EASY++, Tsafrir/Etsion/Feitelson 2007): the FIFO
  //         jobs that fit now, then the first that does not (the head, which
  //         gets the reservation), then every other job shortest first.
  Order policy = Order::Fifo;
  // Starvation bound: a job that has waited at least `aging` seconds goes ahead
  // of every job that has not, and aged jobs keep FIFO order among themselves,
  // so (with a reservation for the head) no job waits much beyond it. 0: off.
  // A job whose Job::age_at has come is aged too (when aging is on).
  Time aging = 0;
  // Wide jobs (slots_min >= wide_fraction x the up cores) age after
  // min(aging, aging_wide) instead (0: `aging` for every job; no effect when
  // aging is 0). lxf and backfilling serve small jobs first and leave wide
  // ones to pile up; wide jobs then run late with little to pack around them
  // (bench/sim/RESULTS.md: utilization).
  Time aging_wide = 0;
  double wide_fraction = 0.5;
  // At most this many aged jobs, the oldest, go ahead of the order; the
  // other aged jobs keep their place by the policy's key (0: every aged job
  // goes ahead). A backlog of aged jobs all in FIFO order brings back FIFO's
  // slowdowns; the oldest few, with the reservations of the checkpoint
  // policy's reserve_depth, still bound the waits.
  int aged_ahead = 0;
  // Expansion-factor cap: a job also ages once its wait reaches
  // (aging_factor - 1) x its requested time (Job::estimate, else walltime),
  // if that comes before `aging` (0: off). A short job then waits a few
  // times its length, not the whole aging bound, before it goes ahead.
  double aging_factor = 0;
};

// How long `job` waits before its expansion factor on its requested time
// (Job::estimate, else walltime) reaches `factor`: (factor - 1) x request;
// kForever when factor is 0 (off) or the job requests no time.
inline Time factor_wait(const Job& job, double factor) {
  const Time req = job.estimate > 0 ? job.estimate : job.walltime;
  if (factor <= 0 || req <= 0) return kForever;
  const double w = std::max(0.0, factor - 1) * static_cast<double>(req);
  return w >= static_cast<double>(kForever) ? kForever : static_cast<Time>(w);
}

// Whether `job` is wide on a machine of `cores` up cores: it asks for at least
// cfg.wide_fraction of them.
inline bool is_wide(const Job& job, const OrderConfig& cfg, std::int64_t cores) {
  return static_cast<double>(job.slots_min) >= cfg.wide_fraction * static_cast<double>(cores);
}

// The aging bound that applies to `job` on a machine of `cores` up cores.
Time aging_of(const Job& job, const OrderConfig& cfg, std::int64_t cores);
// Cores of the up nodes.
std::int64_t up_cores(const Snapshot& snap);

// FIFO order of pending jobs ("fifo" above): submit time, then job id.
inline bool fifo_less(const Job& x, const Job& y) { return x.submit != y.submit ? x.submit < y.submit : x.id < y.id; }

// Fills st.order with every pending job, best first; `hints` (pass_hints.hpp)
// may spare it the FIFO check.
void order_pending(const Snapshot& snap, const OrderConfig& cfg, PassState& st, const PassHints& hints = kNoHints);

}  // namespace corral
