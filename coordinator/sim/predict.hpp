// Run-time prediction from users' history (`corral sim --predict`; the
// names in coordinator/names.hpp, Predictor): what the planner takes as a queued job's estimate instead of its requested time.
//
//  * mean2   EASY++ (Tsafrir, Etsion, Feitelson 2007): the mean of the user's
//            last two run times (one run: that run).
//  * max3    the longest of the user's last three runs: fewer underestimates
//            than the mean (an underestimated backfill delays the reservation
//            it was planned around).
//  * similar the longest of the last three runs of the user's jobs with the
//            same requested time and size (the pair stands for an
//            application: SWF rarely names executables; the "similar jobs"
//            templates of Smith, Foster, Taylor 1998); a job with no such
//            history falls back to max3.
// With a burst gap (set_burst_gap), each of them first looks at the job's
// burst (bench/sim/RESULTS.md: on HPC2N one user sent 135 jobs of 5 s with
// the request and size of the 29-h jobs sent 52 min before); set_scout_min
// keeps small bursts from sending scouts (each scout jumps the queue).
// Every prediction is capped by the request and at least 1 s; a user with no
// history gets 0 (the request is the estimate).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "coordinator/model.hpp"
#include "coordinator/names.hpp"
#include "coordinator/sim/swf.hpp"

namespace corral::sim {

class RunPredictor {
 public:
  explicit RunPredictor(Predictor kind = Predictor::Mean2) : kind_(kind) {}
  // Bursts: a user's jobs submitted less than `gap` apart are one burst
  // (0: off). A job is predicted from the runs of its burst's jobs with the
  // same request and size first; until one has ended, the burst's first
  // such job (the scout, once a second arrives) is predicted at 1 s, so it
  // runs early and tells its siblings' run time.
  void set_burst_gap(Time gap) { burst_gap_ = gap; }
  // A burst's first job of a kind becomes its scout only once `n` (>= 2)
  // jobs of the kind have arrived in the burst: a scout pays off over its
  // siblings, and a large burst has many.
  void set_scout_min(std::uint32_t n) { scout_min_ = std::max<std::uint32_t>(n, 2); }
  // `s` arrived (before predict(s)); true: an earlier queued job of its
  // user became a scout (its prediction changed).
  bool arrive(const SwfJob& s);
  // The estimate for `s` (0: no history; its request stands).
  Time predict(const SwfJob& s) const;
  // `s` ended after running s.run seconds.
  void record(const SwfJob& s);

 private:
  struct Runs {  // the last runs, newest at (n - 1) % 3
    std::array<Time, 3> r{};
    std::uint32_t n = 0;
    Time last() const { return r[(n - 1) % 3]; }
    Time before_last() const { return r[(n + 1) % 3]; }
    Time longest() const;
  };
  static std::uint64_t similar_key(const SwfJob& s);
  std::uint64_t burst_key(const SwfJob& s) const;
  struct UserBursts {
    Time last_submit = 0;
    std::uint32_t n = 0;  // bursts so far
  };
  struct BurstFirst {
    JobId first = 0;
    std::uint32_t count = 0;  // the burst's jobs of the kind so far
    bool scout = false;
  };
  Predictor kind_;
  Time burst_gap_ = 0;
  std::uint32_t scout_min_ = 2;
  std::unordered_map<long, UserBursts> bursts_;
  std::unordered_map<JobId, std::uint32_t> burst_of_;
  std::unordered_map<std::uint64_t, BurstFirst> burst_first_;
  std::unordered_map<std::uint64_t, Runs> burst_runs_;
  std::unordered_map<JobId, bool> scout_;
  std::unordered_map<long, Runs> user_;
  std::unordered_map<std::uint64_t, Runs> similar_;
};

}  // namespace corral::sim
