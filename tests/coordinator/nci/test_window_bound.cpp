// The start window's stated bound (NciConfig::window_quantum, nci.hpp):
// every job first starts within window_bound() = window_wait +
// window_quantum of its submit (plus a cycle per overdue job ahead of it in
// the same cycle), suspended jobs resume within resume_window (plus a
// cycle), and window starts keep their quantum (no ping-pong).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "coordinator/nci/nci.hpp"
#include "helpers.hpp"

using namespace corral;
using namespace nci_test;

namespace {

constexpr Time kDt = 60;  // one cycle

struct Arrival {
  Job job;
  Time runtime = 0;
};

struct Result {
  std::map<JobId, Time> submit, first_start, suspensions;
  std::map<JobId, Time> last_suspend;
  Time min_gap = kForever;  // shortest time between two suspensions of one job
  Time max_suspension = 0;
  Time max_excess = -kForever;  // max(first start - submit - bound)
  int unfinished = 0;
  std::string violation;
};

struct Live {
  RunningJob rj;
  Time runtime = 0, ran = 0, since = 0;
};

// Passes every kDt (nci_stage, then the planner), decisions applied as an
// agent would; cores and memory checked after every pass.
Result drive(const std::vector<Node>& nodes, std::vector<Arrival> arrivals, const NciConfig& cfg, Time horizon,
             std::vector<Live> live = {}) {
  std::sort(arrivals.begin(), arrivals.end(),
            [](const Arrival& a, const Arrival& b) { return a.job.submit < b.job.submit; });
  Result out;
  std::vector<Job> pending;
  std::map<JobId, Time> runtime;
  std::size_t next = 0;
  const std::size_t total = arrivals.size() + live.size();
  std::size_t finished = 0;
  for (Time t = 0; t <= horizon && finished < total; t += kDt) {
    for (Live& l : live) {
      if (l.rj.suspended) l.rj.suspended_for += kDt;
      else if (t > 0) l.ran += kDt;
      l.rj.expected_end = l.rj.start + l.rj.job.walltime + l.rj.suspended_for;
    }
    const std::size_t before = live.size();
    live.erase(std::remove_if(live.begin(), live.end(),
                              [](const Live& l) { return !l.rj.suspended && l.ran >= l.runtime; }),
               live.end());
    finished += before - live.size();
    while (next < arrivals.size() && arrivals[next].job.submit <= t) {
      pending.push_back(arrivals[next].job);
      out.submit[arrivals[next].job.id] = arrivals[next].job.submit;
      runtime[arrivals[next].job.id] = arrivals[next].runtime;
      ++next;
    }
    Snapshot s;
    s.nodes = nodes;
    s.now = t;
    for (const Live& l : live) s.running.push_back(l.rj);
    s.pending = pending;
    Plan plan = run_stage(s, cfg);
    std::set<JobId> gone;
    for (const Decision& d : plan.decisions) {
      if (d.action == Action::Start) {
        auto it = std::find_if(pending.begin(), pending.end(), [&](const Job& j) { return j.id == d.job; });
        Live l;
        l.rj.job = *it;
        l.rj.start = t;
        l.rj.slots = d.slots;
        l.rj.placement = d.placement;
        l.rj.expected_end = t + it->walltime;
        l.runtime = runtime.at(d.job);
        live.push_back(l);
        out.first_start[d.job] = t;
        gone.insert(d.job);
      } else if (d.action == Action::Suspend || d.action == Action::Resume) {
        for (Live& l : live)
          if (l.rj.job.id == d.job) {
            if (d.action == Action::Suspend) {
              if (l.rj.suspended) out.violation = "job " + std::to_string(d.job) + " suspended twice";
              l.rj.suspended = true;
              l.rj.suspended_since = t;
              ++out.suspensions[d.job];
              if (out.last_suspend.count(d.job)) out.min_gap = std::min(out.min_gap, t - out.last_suspend[d.job]);
              out.last_suspend[d.job] = t;
            } else {
              if (!l.rj.suspended) out.violation = "job " + std::to_string(d.job) + " resumed while running";
              out.max_suspension = std::max(out.max_suspension, t - l.rj.suspended_since);
              l.rj.suspended = false;
              l.rj.suspended_since = -1;
            }
          }
      } else if (d.action == Action::Reject) {
        out.violation = "reject of job " + std::to_string(d.job) + ": " + d.reason;
      }
    }
    for (const JobUpdate& u : plan.updates)
      for (Job& j : pending)
        if (j.id == u.job) j.cycles_pending = u.cycles_pending;
    pending.erase(std::remove_if(pending.begin(), pending.end(), [&](const Job& j) { return gone.count(j.id) > 0; }),
                  pending.end());
    out.violation = overcommit(nodes, live, t);
    if (!out.violation.empty()) return out;
  }
  for (const Live& l : live)
    if (l.rj.suspended) out.max_suspension = std::max(out.max_suspension, horizon - l.rj.suspended_since);
  out.unfinished = static_cast<int>(total - finished);
  for (const auto& [id, sub] : out.submit) {
    auto it = out.first_start.find(id);
    out.max_excess = std::max(out.max_excess, (it == out.first_start.end() ? horizon : it->second) - sub -
                                                  window_bound(cfg));
  }
  return out;
}

NciConfig window_cfg(Time wait, Time quantum) {
  NciConfig c = cfg_on();
  c.window_cycles = 0;  // the time form only
  c.window_wait = wait;
  c.window_quantum = quantum;
  c.parallel_min_cpus = 8;
  c.parallel_run = false;  // the window alone makes room for the wide jobs here
  return c;
}

Live busy(JobId id, int node, int core, Time runtime) {
  Live l;
  l.rj = running(job(id, 1, runtime), static_cast<std::uint32_t>(node), core, 0);
  l.runtime = runtime;
  return l;
}

}  // namespace

TEST_CASE("window bound: two wide window jobs on a full machine both start within it", "[nci][window]") {
  // 2 x 8 cores held by 16 one-core jobs for a day; two jobs of 14 cores
  // each, submitted together: they cannot run side by side.
  const std::vector<Node> nodes = {node("a", 8, 64000), node("b", 8, 64000)};
  std::vector<Live> live;
  for (int i = 0; i < 16; ++i) live.push_back(busy(static_cast<JobId>(100 + i), i / 8, i % 8, 86400));
  std::vector<Arrival> arr;
  for (JobId id : {1, 2}) {
    Job j = job(id, 14, 4 * 3600);
    j.submit = 0;
    arr.push_back({j, 3 * 3600});
  }
  const NciConfig cfg = window_cfg(1800, 1800);
  REQUIRE(window_bound(cfg) == 3600);
  const Result r = drive(nodes, arr, cfg, 3 * 86400, live);
  REQUIRE(r.violation.empty());
  CHECK(r.unfinished == 0);
  REQUIRE(r.first_start.count(1));
  REQUIRE(r.first_start.count(2));
  // The first at its window's close (it suspends the one-core jobs), the
  // second once overdue: it suspends the first, whose quantum has run out.
  CHECK(r.first_start.at(1) == 1800);
  CHECK(r.first_start.at(2) <= window_bound(cfg));
  CHECK(r.first_start.at(2) >= r.first_start.at(1) + cfg.window_quantum);  // the first kept its quantum
  CHECK(r.suspensions.count(1) == 1);
  CHECK(r.min_gap >= resume_window(cfg));  // they take turns no faster than the resume window
  // Suspended one-core jobs resume within the resume window (3 x 1800 s)
  // plus a cycle.
  CHECK(r.max_suspension <= resume_window(cfg) + kDt);
}

TEST_CASE("window bound: the allocated class starts first, an overdue window job the cycle after", "[nci][window]") {
  // 10 cores, 6 held by normal one-core jobs. A (4 cores) is PBA's allocated
  // class (pinned); W (8 cores) is overdue. Both cannot run: A takes the idle
  // cores in its pass (its threshold is what PBA guarantees); W, unable to
  // take cores started in that very pass, suspends what it needs in the next.
  const std::vector<Node> nodes = {node("a", 10, 64000)};
  NciConfig cfg = window_cfg(600, 600);
  Snapshot s;
  s.nodes = nodes;
  s.now = 1200;
  for (int i = 0; i < 6; ++i) s.running.push_back(running(job(static_cast<JobId>(100 + i), 1, 86400), 0, i, 0));
  Job a = job(1, 4, 3600, "normal", "alice", "chem");
  a.submit = 1100;
  Job w = job(2, 8, 3600, "normal", "bob", "other");
  w.submit = 0;
  REQUIRE(window_overdue(w, s.now, cfg));
  s.pending = {a, w};
  Plan plan = run_stage(s, cfg, nullptr, 1);  // a: PBA's allocated class
  CHECK(find(plan, Action::Start, 1) != nullptr);
  CHECK(find(plan, Action::Start, 2) == nullptr);
  CHECK(ids(plan, Action::Suspend).empty());  // nothing suspended for nothing

  // Next cycle: A runs; W suspends 8 of the 10 running jobs, A included if
  // needed: its first start came within the threshold.
  Snapshot s2 = s;
  s2.now = s.now + kDt;
  RunningJob ra = running(a, 0, 6, s.now);
  s2.running.push_back(ra);
  s2.pending = {w};
  Plan plan2 = run_stage(s2, cfg);
  const Decision* start = find(plan2, Action::Start, 2);
  REQUIRE(start != nullptr);
  CHECK(s2.now - w.submit <= window_bound(cfg) + kDt);
  int freed = 0;
  for (const Decision& d : plan2.decisions)
    if (d.action == Action::Suspend) {
      freed += d.slots;
      CHECK(d.reason.find("start window overdue") != std::string::npos);
    }
  CHECK(freed >= 8);
}

TEST_CASE("window bound: no ping-pong, a window start keeps its quantum", "[nci][window]") {
  // Four wide jobs whose windows close a cycle apart on a machine they each
  // nearly fill: each started one runs its quantum before the next overdue
  // one takes its cores, and nothing is suspended and resumed cycle after cycle.
  const std::vector<Node> nodes = {node("a", 8, 64000)};
  std::vector<Live> live;
  for (int i = 0; i < 8; ++i) live.push_back(busy(static_cast<JobId>(100 + i), 0, i, 2 * 86400));
  std::vector<Arrival> arr;
  for (int k = 0; k < 4; ++k) {
    Job j = job(static_cast<JobId>(k + 1), 7, 6 * 3600);
    j.submit = k * kDt;
    arr.push_back({j, 5 * 3600});
  }
  const NciConfig cfg = window_cfg(1800, 3600);
  const Result r = drive(nodes, arr, cfg, 6 * 86400, live);
  REQUIRE(r.violation.empty());
  CHECK(r.unfinished == 0);
  for (int k = 1; k <= 4; ++k) {
    INFO("job " << k);
    REQUIRE(r.first_start.count(static_cast<JobId>(k)));
    CHECK(r.first_start.at(static_cast<JobId>(k)) - r.submit.at(static_cast<JobId>(k)) <= window_bound(cfg) + kDt);
  }
  // Jobs take turns by the resume window (3 x the quantum): a job is
  // suspended again no sooner than that after its last suspension.
  WARN("min gap between two suspensions of one job " << r.min_gap << " s");
  CHECK(r.min_gap >= resume_window(cfg));
  std::vector<Time> starts;
  for (int k = 1; k <= 4; ++k) starts.push_back(r.first_start.at(static_cast<JobId>(k)));
  std::sort(starts.begin(), starts.end());
  CHECK(starts[1] - starts[0] >= kDt);  // not two of them in one cycle: they cannot share the node
}

TEST_CASE("window bound: every job's first start within window + quantum over random workloads",
          "[nci][window][property]") {
  // Wide jobs (16-30 of 32 cores) among small ones and express jobs, NCI on,
  // a 30-minute window and quantum: every job first starts within
  // window_bound() plus a few cycles (overdue jobs of the same cycle that
  // cannot run side by side go one cycle after another), the machine is never
  // over-committed, every job ends, and no suspension outlasts the resume
  // window by more than a cycle... measured, and bounded loosely below.
  const std::vector<Node> nodes = {node("a", 8, 64000), node("b", 8, 64000), node("c", 8, 64000),
                                   node("d", 8, 64000)};
  const NciConfig cfg = window_cfg(1800, 1800);
  Time worst_excess = -kForever, worst_susp = 0;
  int suspensions = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    auto uni = [&](long long lo, long long hi) { return std::uniform_int_distribution<long long>(lo, hi)(rng); };
    std::vector<Arrival> arr;
    for (int i = 0; i < 250; ++i) {
      const int kind = static_cast<int>(uni(0, 9));
      const std::string user = "u" + std::to_string(uni(0, 5));
      Job j;
      if (kind <= 1)
        j = job(static_cast<JobId>(i + 1), static_cast<int>(uni(16, 30)), uni(1800, 7200), "normal", user, "p", 2000, 10);
      else if (kind == 2)
        j = job(static_cast<JobId>(i + 1), static_cast<int>(uni(1, 4)), uni(300, 900), "express", user, "p", 500, 10);
      else
        j = job(static_cast<JobId>(i + 1), static_cast<int>(uni(1, 6)), uni(600, 5400), "normal", user, "p", 500, 10);
      j.submit = uni(0, 3 * 86400) / kDt * kDt;
      arr.push_back({j, std::max<Time>(kDt, j.walltime * uni(30, 100) / 100)});
    }
    const Result r = drive(nodes, arr, cfg, 12 * 86400);
    REQUIRE(r.violation.empty());
    CHECK(r.unfinished == 0);
    CHECK(r.max_excess <= 3 * kDt);
    // Suspended jobs resume within the resume window, plus the cycles a
    // forced resume waits for cores started or resumed in the same pass.
    CHECK(r.max_suspension <= resume_window(cfg) + 10 * kDt);
    worst_excess = std::max(worst_excess, r.max_excess);
    worst_susp = std::max(worst_susp, r.max_suspension);
    for (const auto& [id, n] : r.suspensions) suspensions += static_cast<int>(n);
  }
  WARN("window bound " << window_bound(cfg) << " s: longest first start past it " << worst_excess
                       << " s; longest suspension " << worst_susp << " s (resume window " << resume_window(cfg)
                       << " s); suspensions " << suspensions);
  CHECK(suspensions > 0);
}

TEST_CASE("window bound: PBA's allocated class may use the cores a suspended job holds", "[nci][window]") {
  // S (6 cores: 0-5) is suspended; R runs on cores 4-5, so S holds the free
  // cores 0-3 until R ends. A (4 cores) is PBA's allocated class. With a
  // time window A starts on them (S's wait is bounded by the resume window
  // instead); with the cycle window only, S keeps them and A waits.
  Snapshot s;
  s.nodes = {node("a", 8, 64000)};
  s.now = 5000;
  Job sj = job(10, 6, 86400);
  RunningJob rs = running(sj, 0, 0, 0);
  rs.suspended = true;
  rs.suspended_since = 4000;
  rs.suspended_for = 1000;
  s.running.push_back(rs);
  s.running.push_back(running(job(11, 2, 86400), 0, 4, 4000));
  s.running.push_back(running(job(12, 2, 86400), 0, 6, 4000));
  Job a = job(1, 4, 3600, "normal", "alice", "chem");
  a.submit = 4900;
  s.pending = {a};
  auto pass = [&](const NciConfig& cfg) { return run_stage(s, cfg, nullptr, 1); };  // a: PBA's allocated class
  NciConfig timed = window_cfg(86400, 86400);
  const Plan p1 = pass(timed);
  const Decision* st1 = find(p1, Action::Start, 1);
  REQUIRE(st1 != nullptr);
  CHECK(ids(p1, Action::Suspend).empty());
  NciConfig cycles = cfg_on();  // window_wait 0: suspended jobs keep their cores
  const Plan p2 = pass(cycles);
  CHECK(find(p2, Action::Start, 1) == nullptr);
}
