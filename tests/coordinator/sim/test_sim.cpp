// Tests of the trace simulator: SWF parsing, the event loop's mechanics
// (with scripted passes), and exact agreement of `fcfs` and `easy` with an
// independent textbook reference simulator written below.
#include <zlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <queue>
#include <random>
#include <set>
#include <sstream>

#include "coordinator/planner/order.hpp"
#include "coordinator/sim/events.hpp"
#include "coordinator/sim/pictures/gantt.hpp"
#include "coordinator/sim/sim.hpp"
#include "tests/effort.hpp"
#include "tests/skip.hpp"
#include "tests/traces.hpp"

using namespace corral;
using namespace corral::sim;


namespace {

// One SWF line with the fields that matter (others -1).
std::string swf_line(long id, long submit, long run, long procs_alloc, long procs_req, long req_time,
                     long user = -1) {
  std::ostringstream o;
  o << id << ' ' << submit << " -1 " << run << ' ' << procs_alloc << " -1 -1 " << procs_req << ' ' << req_time
    << " -1 1 " << user << " -1 -1 -1 -1 -1 -1\n";
  return o.str();
}

// ------------------------------------------------ the textbook reference --
// Straightforward FCFS / EASY over a single pool of processors, written from
// the definitions (Lifka 1995; Mu'alem & Feitelson 2001), independent of the
// simulator and the planner.
struct RefJob {
  JobId id;
  Time submit, run, est;
  int procs;
};

std::map<JobId, Time> reference(const std::vector<RefJob>& jobs, int machine, bool easy) {
  struct Run {
    Time end, est_end;
    int procs;
  };
  std::vector<Run> running;
  std::vector<RefJob> queue;
  std::map<JobId, Time> start;
  std::size_t next = 0;
  int free = machine;
  while (next < jobs.size() || !running.empty() || !queue.empty()) {
    Time t = std::numeric_limits<Time>::max();
    if (next < jobs.size()) t = jobs[next].submit;
    for (const Run& r : running) t = std::min(t, r.end);
    if (t == std::numeric_limits<Time>::max()) break;  // stuck (cannot happen with valid jobs)
    for (std::size_t i = 0; i < running.size();) {       // completions
      if (running[i].end == t) {
        free += running[i].procs;
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    while (next < jobs.size() && jobs[next].submit == t) queue.push_back(jobs[next++]);  // arrivals
    // One pass: start from the head while it fits.
    while (!queue.empty() && queue.front().procs <= free) {
      const RefJob& j = queue.front();
      start[j.id] = t;
      free -= j.procs;
      running.push_back({t + j.run, t + j.est, j.procs});
      queue.erase(queue.begin());
    }
    if (!easy || queue.empty()) continue;
    // Shadow time of the head and the extra processors.
    std::vector<Run> by_end = running;
    std::sort(by_end.begin(), by_end.end(), [](const Run& a, const Run& b) { return a.est_end < b.est_end; });
    int avail = free;
    Time shadow = 0;
    for (const Run& r : by_end) {
      avail += r.procs;
      if (avail >= queue.front().procs) {
        shadow = r.est_end;
        break;
      }
    }
    int at_shadow = free;
    for (const Run& r : running)
      if (r.est_end <= shadow) at_shadow += r.procs;
    int extra = at_shadow - queue.front().procs;
    for (std::size_t i = 1; i < queue.size();) {
      const RefJob& j = queue[i];
      bool go = false;
      if (j.procs <= free) {
        if (t + j.est <= shadow) {
          go = true;
        } else if (j.procs <= extra) {
          go = true;
          extra -= j.procs;
        }
      }
      if (go) {
        start[j.id] = t;
        free -= j.procs;
        running.push_back({t + j.run, t + j.est, j.procs});
        queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  return start;
}

std::vector<RefJob> ref_jobs(const SwfTrace& tr, std::size_t limit = 0) {
  std::vector<RefJob> v;
  for (const SwfJob& j : tr.jobs) {
    if (limit && v.size() >= limit) break;
    v.push_back({j.id, j.submit, j.run, j.estimate, j.procs});
  }
  return v;
}

// Runs the simulator under `b` and compares every job's start with the reference.
void check_against_reference(const SwfTrace& tr, Backfill b, std::size_t limit = 0) {
  SimOptions opt;
  opt.sched.planner.backfill = b;
  opt.max_jobs = limit;
  SimResult r = simulate(tr, opt);
  int machine = tr.max_procs > 0 ? tr.max_procs : tr.max_nodes;
  auto ref = reference(ref_jobs(tr, limit), machine, b == Backfill::Easy);
  REQUIRE(r.unstarted == 0);
  REQUIRE(r.per_job.size() == ref.size());
  std::size_t mismatches = 0;
  for (const JobResult& j : r.per_job) {
    if (ref.at(j.id) != j.first_start) {
      if (mismatches++ < 5)
        UNSCOPED_INFO("job " << j.id << ": sim starts at " << j.first_start << ", reference at " << ref.at(j.id));
    }
  }
  CHECK(mismatches == 0);
}

SwfTrace random_trace(std::uint32_t seed, int machine, int n) {
  std::mt19937 rng(seed);
  std::ostringstream o;
  o << "; MaxProcs: " << machine << "\n";
  long t = 0;
  for (int i = 1; i <= n; ++i) {
    t += std::uniform_int_distribution<int>(0, 3)(rng) * 50;  // many simultaneous events
    long run = std::uniform_int_distribution<int>(1, 20)(rng) * 50;
    long est = std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? run : run * std::uniform_int_distribution<int>(1, 4)(rng) + 50;
    int procs = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? std::uniform_int_distribution<int>(machine / 2, machine)(rng)
                                                                  : std::uniform_int_distribution<int>(1, machine / 4)(rng);
    o << swf_line(i, t, run, procs, -1, est);
  }
  return parse_swf(o.str());
}

// n jobs on a machine of `machine` single-core nodes: submit gaps below
// `gap`, run times 1..run_max, 1..machine procs, requested time up to 599 s
// past the run (the order tests' workloads).
SwfTrace uniform_trace(unsigned seed, long machine, int n, long gap, long run_max) {
  std::mt19937 rng(seed);
  std::string text = "; MaxProcs: " + std::to_string(machine) + "\n";
  Time t = 0;
  for (int i = 1; i <= n; ++i) {
    t += static_cast<Time>(rng() % static_cast<unsigned long>(gap));
    const long run = 1 + static_cast<long>(rng() % static_cast<unsigned long>(run_max));
    const long procs = 1 + static_cast<long>(rng() % static_cast<unsigned long>(machine));
    text += swf_line(i, t, run, procs, procs, run + static_cast<long>(rng() % 600));
  }
  return parse_swf(text);
}

// A scripted pass: FIFO, start every job that fits (no backfilling).
Plan greedy(const Snapshot& s) {
  Plan p;
  int free = 0;
  for (const Node& n : s.nodes) free += n.cores;
  for (const RunningJob& r : s.running)
    if (!r.suspended) free -= r.slots;
  for (const Job& j : s.pending) {
    if (j.slots_min > free) break;
    free -= j.slots_min;
    p.decisions.push_back({Action::Start, j.id, s.now, j.slots_min, {}, {}, {}});
  }
  return p;
}

std::filesystem::path tmpdir() {
  auto d = std::filesystem::temp_directory_path() / ("corral_sim_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

// A replay recording its run segments under policy b: single-core nodes on odd
// seeds, 12 nodes of 4 cores on even ones (the start-record tests compare
// node lists across both shapes).
SimOptions segment_options(std::uint64_t seed, Backfill b) {
  SimOptions opt;
  opt.sched.planner.backfill = b;
  opt.record_segments = true;
  if (seed % 2 == 0) {
    opt.nodes = 12;
    opt.cores = 4;
  }
  return opt;
}

// Each run segment of a replay recorded with segment_options(): job, start,
// slots and every node it held with its slots there, a line each.
std::string segment_nodes(const SimResult& r) {
  std::string out;
  for (const Segment& g : r.segments) {
    out += std::to_string(g.id) + "@" + std::to_string(g.start) + "x" + std::to_string(g.slots) + ":";
    for (const Placement& p : g.placement)
      for (std::uint32_t k = 0; k < p.count; ++k) out += " " + std::to_string(p.node + k) + "x" + std::to_string(p.slots);
    out += "\n";
  }
  return out;
}

// The simulator's own planner through a pass function: compact start records
// (PlannerConfig::compact_starts) in a Plan kept across passes, as its own
// fast-path passes take them.
struct CompactPasses {
  Planner kept;
  Plan plan;
  const Plan& pass(const Snapshot& s, const SchedConfig& cfg, std::uint64_t sd) {
    SchedConfig c = cfg;
    c.planner.compact_starts = true;
    schedule(s, c, sd, kept, plan);
    return plan;
  }
};

}  // namespace

// ------------------------------------------------------------------ SWF --

TEST_CASE("SWF: header, procs and estimate conventions, skip rules", "[sim][swf]") {
  std::string text = "; Version: 2.2\n; MaxNodes: 16\n; MaxProcs: 8\n" +
                     swf_line(1, 0, 100, 4, -1, 200) +   // procs from field 5 (field 8 is -1)
                     swf_line(2, 5, 100, 4, 2, -1) +     // procs from field 8; no estimate -> run
                     swf_line(3, 5, 300, 2, 2, 200) +    // run > estimate -> run = estimate
                     swf_line(4, 6, 0, 2, 2, 200) +      // run 0: skipped
                     swf_line(5, 6, 10, -1, -1, 200) +   // no procs: skipped
                     swf_line(6, 7, 10, 9, 9, 200) +     // more than MaxProcs: skipped
                     swf_line(7, 1, 10, 1, 1, 20);       // out of submit order: sorted
  SwfTrace t = parse_swf(text);
  CHECK(t.max_procs == 8);
  CHECK(t.max_nodes == 16);
  CHECK(t.lines == 7);
  CHECK(t.bad_lines == 0);
  CHECK(t.skipped == 3);
  REQUIRE(t.jobs.size() == 4);
  CHECK(t.jobs[0].id == 1);
  CHECK(t.jobs[0].procs == 4);
  CHECK(t.jobs[0].estimate == 200);
  CHECK(t.jobs[1].id == 7);
  CHECK(t.jobs[2].id == 2);
  CHECK(t.jobs[2].procs == 2);
  CHECK(t.jobs[2].estimate == 100);
  CHECK(t.jobs[3].run == 200);
  CHECK(t.jobs[3].estimate == 200);
}

TEST_CASE("SWF: MaxNodes is the machine size when MaxProcs is absent", "[sim][swf]") {
  SwfTrace t = parse_swf("; MaxNodes: 4\n" + swf_line(1, 0, 10, 4, -1, -1) + swf_line(2, 0, 10, 5, -1, -1));
  CHECK(t.max_procs == 0);
  CHECK(t.max_nodes == 4);
  CHECK(t.jobs.size() == 1);
  CHECK(t.skipped == 1);
}

TEST_CASE("SWF: float fields parse, bad lines are counted and skipped", "[sim][swf]") {
  std::string text = "; MaxProcs: 8\n"
                     "  1  0  5  552.6  4  552.21  -1  4  43200.0  -1  1  4  1  -1 -1  1 -1 -1\n"
                     "2 0 5 abc 4 -1 -1 4 100 -1 1 4 1 -1 -1 1 -1 -1\n"
                     "3 0\n"
                     "\n"
                     "4 1 5 nan 4 -1 -1 4 100 -1 1 4 1 -1 -1 1 -1 -1\r\n" +
                     swf_line(5, 2, 10, 1, 1, 10);
  SwfTrace t = parse_swf(text);
  CHECK(t.bad_lines == 3);
  CHECK(t.first_bad.find("line 3") != std::string::npos);
  REQUIRE(t.jobs.size() == 2);
  CHECK(t.jobs[0].run == 553);
  CHECK(t.jobs[0].estimate == 43200);
  CHECK(t.jobs[0].user == 4);
}

TEST_CASE("SWF: gzip files are read transparently; missing files give a clear error", "[sim][swf]") {
  auto dir = tmpdir();
  std::string text = "; MaxProcs: 4\n" + swf_line(1, 0, 10, 2, 2, 20) + swf_line(2, 3, 10, 2, 2, 20);
  auto gz = (dir / "t.swf.gz").string();
  gzFile f = gzopen(gz.c_str(), "wb");
  REQUIRE(f);
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  SwfTrace t = read_swf(gz);
  CHECK(t.jobs.size() == 2);
  CHECK(t.max_procs == 4);
  try {
    read_swf((dir / "nope.swf").string());
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("cannot open") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

// --------------------------------------------------------------- orders --

namespace {
Snapshot order_snap() {
  Snapshot s;
  s.now = 1000;
  s.nodes.resize(1);
  s.nodes[0].cores = 10;
  auto job = [](JobId id, Time submit, Time wall, int slots) {
    Job j;
    j.id = id;
    j.submit = submit;
    j.walltime = wall;
    j.slots_min = j.slots_max = slots;
    return j;
  };
  s.pending = {job(1, 0, 500, 4), job(2, 100, 100, 8), job(3, 200, 50, 1), job(4, 900, 50, 2), job(5, 950, 300, 1)};
  return s;
}
std::vector<JobId> ids(const Snapshot& s, const OrderConfig& c, const PassHints& h = kNoHints) {
  PassState st;
  order_pending(s, c, st, h);
  std::vector<JobId> v;
  for (auto i : st.order) v.push_back(s.pending[i].id);
  return v;
}
}  // namespace

TEST_CASE("order: fifo, sjf, saf, wfp3, sjbf and the aging bound", "[sim][order]") {
  Snapshot s = order_snap();
  OrderConfig c;
  CHECK(ids(s, c) == std::vector<JobId>{1, 2, 3, 4, 5});
  std::swap(s.pending[0], s.pending[3]);  // FIFO does not rely on input order
  CHECK(ids(s, c) == std::vector<JobId>{1, 2, 3, 4, 5});
  s = order_snap();
  c.policy = Order::Sjf;
  CHECK(ids(s, c) == std::vector<JobId>{3, 4, 2, 5, 1});  // 50, 50 (FIFO tie), 100, 300, 500
  s.pending[2].estimate = 400;                            // a prediction overrides walltime
  CHECK(ids(s, c) == std::vector<JobId>{4, 2, 5, 3, 1});
  s = order_snap();
  c.policy = Order::Saf;  // areas 2000, 800, 50, 100, 300
  CHECK(ids(s, c) == std::vector<JobId>{3, 4, 5, 2, 1});
  c.policy = Order::Wfp3;  // (wait/est)^3*slots: 1: 8*4, 2: 729*8, 3: 4096*1, 4: 8*2, 5: ~0
  CHECK(ids(s, c) == std::vector<JobId>{2, 3, 1, 4, 5});
  c.policy = Order::Sjf;
  c.aging = 850;  // jobs 1, 2 (waited 1000, 900) go first, in FIFO order
  CHECK(ids(s, c) == std::vector<JobId>{1, 2, 3, 4, 5});
  c.aging = 950;
  CHECK(ids(s, c) == std::vector<JobId>{1, 3, 4, 2, 5});
  c.aging = 0;
  c.policy = Order::Sjbf;  // 10 free: job 1 (4) fits, job 2 (8) is the head, then shortest first
  CHECK(ids(s, c) == std::vector<JobId>{1, 2, 3, 4, 5});
  s.pending[4].walltime = 10;
  CHECK(ids(s, c) == std::vector<JobId>{1, 2, 5, 3, 4});
  CHECK(find_name<Order>("wfp3") == Order::Wfp3);
  CHECK_FALSE(find_name<Order>("random"));
}

TEST_CASE("order: aged_ahead puts only the oldest aged jobs first", "[sim][order]") {
  Snapshot s = order_snap();
  OrderConfig c;
  c.policy = Order::Sjf;
  c.aging = 150;  // jobs 1, 2, 3 (waited 1000, 900, 800) are aged
  CHECK(ids(s, c) == std::vector<JobId>{1, 2, 3, 4, 5});
  c.aged_ahead = 1;  // job 1 first; 2 and 3 are ordered with the rest, shortest first
  CHECK(ids(s, c) == std::vector<JobId>{1, 3, 4, 2, 5});
  c.aged_ahead = 2;
  CHECK(ids(s, c) == std::vector<JobId>{1, 2, 3, 4, 5});
  c.aged_ahead = 5;  // more than the aged jobs: all of them, as 0
  CHECK(ids(s, c) == std::vector<JobId>{1, 2, 3, 4, 5});
  c.policy = Order::Lxf;  // factors (wait + est) / est: 3, 10, 17, 3, 1.17
  c.aged_ahead = 1;
  CHECK(ids(s, c) == std::vector<JobId>{1, 3, 2, 4, 5});
  c.aging = 0;  // no aging: aged_ahead changes nothing
  CHECK(ids(s, c) == std::vector<JobId>{3, 2, 1, 4, 5});
}

TEST_CASE("order: aging_factor ages a job after (factor - 1) x its request", "[sim][order]") {
  Snapshot s = order_snap();  // waited 1000, 900, 800, 100, 50; asked 500, 100, 50, 50, 300
  OrderConfig c;
  c.policy = Order::Sjf;
  c.aging = 10000;  // nobody has waited that long
  CHECK(ids(s, c) == std::vector<JobId>{3, 4, 2, 5, 1});
  c.aging_factor = 10;  // ages after 4500, 900, 450, 450, 2700: jobs 2 and 3 go first
  CHECK(aging_of(s.pending[0], c, 10) == 4500);
  CHECK(ids(s, c) == std::vector<JobId>{2, 3, 4, 5, 1});
  c.aging_factor = 3;  // after 1000, 200, 100, 100, 600: all but job 5, in FIFO order
  CHECK(ids(s, c) == std::vector<JobId>{1, 2, 3, 4, 5});
  c.aging = 150;  // the aging bound still applies when it comes first
  CHECK(aging_of(s.pending[0], c, 10) == 150);
  s.pending[0].walltime = 0;  // no request: only the aging bound
  c.aging = 10000;
  CHECK(aging_of(s.pending[0], c, 10) == 10000);
  s.pending[0].walltime = 500;
  c.aging = 0;  // no aging at all: the factor alone does not age
  CHECK(ids(s, c) == std::vector<JobId>{3, 4, 2, 5, 1});
}

TEST_CASE("order: a job whose age_at has come is aged", "[sim][order]") {
  Snapshot s = order_snap();  // now 1000; asked 500, 100, 50, 50, 300
  OrderConfig c;
  c.policy = Order::Sjf;
  c.aging = 10000;  // nobody has waited that long
  CHECK(ids(s, c) == std::vector<JobId>{3, 4, 2, 5, 1});
  s.pending[4].age_at = 1001;  // not yet
  CHECK(ids(s, c) == std::vector<JobId>{3, 4, 2, 5, 1});
  s.pending[4].age_at = 1000;  // job 5 is aged: first
  s.pending[0].age_at = 999;   // and job 1, older: before it (aged jobs are FIFO)
  CHECK(ids(s, c) == std::vector<JobId>{1, 5, 3, 4, 2});
  c.aging = 0;  // no aging at all: age_at does not age either
  CHECK(ids(s, c) == std::vector<JobId>{3, 4, 2, 5, 1});
}

TEST_CASE("sim: aging_backlog ages a wide job after C x the backlog it arrived behind", "[sim][order]") {
  // Machine 4.  id submit run est procs
  //              1    0   100 100   4   nothing ahead: ages at once (0), runs at once
  //              2   10    50  50   2   wide: 360 core-s ahead / 4 = 90 s; x 2: ages at 190
  //              3   20    40  40   1   narrow (under 0.5 x 4): never by the backlog
  //              4   30   200 200   4   280 + 100 + 40 core-s ahead = 105 s; ages at 240
  SwfTrace t = parse_swf("; MaxProcs: 4\n" + swf_line(1, 0, 100, 4, 4, 100) + swf_line(2, 10, 50, 2, 2, 50) +
                         swf_line(3, 20, 40, 1, 1, 40) + swf_line(4, 30, 200, 4, 4, 200));
  SimOptions opt;
  opt.sched.planner.backfill = Backfill::Easy;
  opt.sched.order.aging = 86400;
  opt.sched.order.wide_fraction = 0.5;
  opt.aging_backlog = 2;
  std::map<JobId, Time> age_at;
  opt.scheduler = [&](const Snapshot& s, const SchedConfig& c, std::uint64_t sd) {
    for (const Job& j : s.pending) age_at[j.id] = j.age_at;
    return schedule(s, c, sd);
  };
  SimResult r = simulate(t, opt);
  CHECK(r.finished == 4);
  CHECK(age_at == std::map<JobId, Time>{{1, 0}, {2, 190}, {3, 0}, {4, 240}});
  opt.aging_backlog = 0;  // off: no job gets one
  age_at.clear();
  simulate(t, opt);
  CHECK(age_at == std::map<JobId, Time>{{1, 0}, {2, 0}, {3, 0}, {4, 0}});
}

TEST_CASE("order: PendingHints::fifo skips the check, the policies still apply", "[sim][order]") {
  Snapshot s = order_snap();
  PassHints h;
  OrderConfig c;
  for (Order pol : {Order::Fifo, Order::Sjf, Order::Saf, Order::Wfp3, Order::Lxf, Order::Sjbf})
    for (Time aging : {Time{0}, Time{950}}) {
      c.policy = pol;
      c.aging = aging;
      h.pending.fifo = false;
      const std::vector<JobId> checked = ids(s, c, h);
      h.pending.fifo = true;  // true of order_snap(): submit order
      CHECK(ids(s, c, h) == checked);
    }
  // The promise is taken as given (no job is read for it): a caller that
  // breaks it gets its own order back under fifo.
  c.policy = Order::Fifo;
  c.aging = 0;
  std::swap(s.pending[0], s.pending[3]);
  h.pending.fifo = true;
  CHECK(ids(s, c, h) == std::vector<JobId>{4, 2, 3, 1, 5});
  h.pending.fifo = false;
  CHECK(ids(s, c, h) == std::vector<JobId>{1, 2, 3, 4, 5});
  CHECK(ids(s, c) == std::vector<JobId>{1, 2, 3, 4, 5});  // no hints
}

TEST_CASE("sim: the simulator promises PendingHints::fifo only when pending is in FIFO order", "[sim][order]") {
  // Random jobs on a small machine under the checkpoint policy (requeues put
  // jobs back in the middle of pending); a hook makes some arrivals older
  // than the jobs queued before them, which breaks FIFO order until the
  // queue empties.
  const int n = corral_test::scaled(400, 100);
  const SwfTrace tr = uniform_trace(7, 8, n, 40, 300);
  for (bool hook : {false, true}) {
    SimOptions opt;
    opt.sched.planner.backfill = Backfill::Checkpoint;
    opt.sched.planner.checkpoint_threshold = 10;  // every backfilled job is split
    opt.sched.planner.checkpoint_split = 0.1;
    if (hook)
      opt.on_arrival = [](Job& j, const SwfJob& sj) {
        if (sj.id % 7 == 0) j.submit -= 500;
      };
    std::size_t promised = 0, unsorted = 0, broken = 0;
    opt.on_pass = [&](const Snapshot& s, const PassHints& h) {
      const bool sorted = std::is_sorted(s.pending.begin(), s.pending.end(), [](const Job& a, const Job& b) {
        return a.submit != b.submit ? a.submit < b.submit : a.id < b.id;
      });
      if (h.pending.fifo) ++promised;
      if (!sorted) ++unsorted;
      if (h.pending.fifo && !sorted) ++broken;
    };
    // A pass function of the caller's: pending stays a vector in FIFO order
    // (the replay's own passes keep it unordered with PendingHints::order).
    opt.scheduler = [](const Snapshot& s, const SchedConfig& cfg, std::uint64_t seed) { return schedule(s, cfg, seed); };
    const SimResult r = simulate(tr, opt);
    CHECK(r.finished == static_cast<std::size_t>(n));
    CHECK(r.checkpoints > 0);
    CHECK(broken == 0);
    CHECK(promised > 0);
    if (hook) CHECK(unsorted > 0);
  }
}

TEST_CASE("order: PendingHints::order is taken as the FIFO order", "[sim][order]") {
  Snapshot s = order_snap();
  std::swap(s.pending[0], s.pending[3]);  // ids 4 2 3 1 5
  std::swap(s.pending[1], s.pending[4]);  // ids 4 5 3 1 2
  PassHints h;
  OrderConfig c;
  for (Order pol : {Order::Fifo, Order::Sjf, Order::Saf, Order::Wfp3, Order::Lxf, Order::Sjbf})
    for (Time aging : {Time{0}, Time{950}}) {
      c.policy = pol;
      c.aging = aging;
      const std::vector<JobId> checked = ids(s, c);
      h.pending.order = {3, 4, 2, 0, 1};  // the positions of ids 1 2 3 4 5
      CHECK(ids(s, c, h) == checked);
    }
  c.policy = Order::Fifo;
  c.aging = 0;
  h.pending.order = {4, 3, 2, 1, 0};  // taken as given
  CHECK(ids(s, c, h) == std::vector<JobId>{2, 1, 3, 5, 4});
  h.pending.order = {0, 1};  // not one entry per job: ignored
  CHECK(ids(s, c, h) == std::vector<JobId>{1, 2, 3, 4, 5});
}

TEST_CASE("sim: pending kept unordered with PendingHints::order gives the replay of a sorted queue", "[sim][order]") {
  // The simulator's own passes keep pending unordered (PendingHints::order); a
  // pass function of the caller's gets it sorted. Both must replay alike:
  // random traces under easy, conservative and checkpoint (requeues back
  // into the queue), with a hook that makes some arrivals older than jobs
  // queued before them.
  for (std::uint64_t seed = 1; seed <= corral_test::scaled<std::uint64_t>(4, 2); ++seed) {
    const SwfTrace tr = uniform_trace(static_cast<unsigned>(seed), 16, 200, 30, 400);
    for (Backfill b : {Backfill::Easy, Backfill::Conservative, Backfill::Checkpoint}) {
      SimOptions opt;
      opt.sched.planner.backfill = b;
      opt.sched.planner.checkpoint_threshold = 10;
      opt.sched.planner.checkpoint_split = 0.1;
      if (seed % 2 == 0)
        opt.on_arrival = [](Job& j, const SwfJob& sj) {
          if (sj.id % 5 == 0) j.submit -= 300;
        };
      const SimResult own = simulate(tr, opt);
      SimOptions sorted = opt;
      std::size_t with_order = 0;
      sorted.on_pass = [&](const Snapshot&, const PassHints& h) { with_order += !h.pending.order.empty(); };
      sorted.scheduler = [&](const Snapshot& s, const SchedConfig& cfg, std::uint64_t sd) { return schedule(s, cfg, sd); };
      const SimResult ref = simulate(tr, sorted);
      INFO("seed " << seed << " policy " << name(b));
      CHECK(with_order == 0);  // with a caller's pass function, pending stays sorted
      CHECK(own.finished == 200);
      CHECK(starts_csv(own) == starts_csv(ref));
      CHECK(own.mean_bsld == ref.mean_bsld);
      CHECK(own.checkpoints == ref.checkpoints);
      if (b == Backfill::Checkpoint) CHECK(own.checkpoints > 0);
    }
  }
}

TEST_CASE("sim: compact starts (Plan::starts) replay as Start decisions", "[sim][order]") {
  // The simulator's own passes take starts as compact records
  // (PlannerConfig::compact_starts) and reuse finished jobs' placement
  // buffers; a pass function that gives Start decisions, and one that gives
  // compact records through a kept Plan, must replay alike: same starts,
  // same nodes for every run segment. Single- and multi-core nodes.
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const SwfTrace tr = uniform_trace(static_cast<unsigned>(seed), 48, 300, 20, 400);
    for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative}) {
      const SimOptions opt = segment_options(seed, b);
      const SimResult own = simulate(tr, opt);
      SimOptions as_decisions = opt;
      std::size_t compact_in_decisions = 0;
      as_decisions.scheduler = [&](const Snapshot& s, const SchedConfig& cfg, std::uint64_t sd) {
        SchedConfig c = cfg;
        c.planner.compact_starts = false;
        Plan p = schedule(s, c, sd);
        compact_in_decisions += p.starts.size();
        return p;
      };
      const SimResult ref = simulate(tr, as_decisions);
      SimOptions as_records = opt;
      CompactPasses compact;
      std::size_t records = 0;
      as_records.scheduler = [&](const Snapshot& s, const SchedConfig& cfg, std::uint64_t sd) {
        const Plan& plan = compact.pass(s, cfg, sd);
        records += plan.starts.size();
        return plan;
      };
      const SimResult rec = simulate(tr, as_records);
      INFO("seed " << seed << " policy " << name(b));
      CHECK(compact_in_decisions == 0);
      CHECK(records > 250);
      CHECK(own.finished == 300);
      CHECK(own.deferred_starts == 0);
      CHECK(starts_csv(own) == starts_csv(ref));
      CHECK(starts_csv(rec) == starts_csv(ref));
      CHECK(own.segments.size() == 300);
      CHECK(segment_nodes(own) == segment_nodes(ref));
      CHECK(segment_nodes(rec) == segment_nodes(ref));
    }
  }
}

TEST_CASE("sim: a compact start's placement reaches its running entry exactly, cores included", "[sim]") {
  // Compact starts are copied into pooled placement buffers of finished jobs
  // (job_moves.hpp copy_place: entries overwritten in place, cores copied only when
  // either side has some). A pass function gives compact records whose
  // entries carry cores on some jobs and none on others, so the pooled
  // buffers alternate between the two; every later snapshot must show each
  // running job's placement exactly as given. Fails when copy_place skips the
  // cores, the count, or keeps a longer buffer's tail.
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const SwfTrace tr = uniform_trace(static_cast<unsigned>(seed), 48, 300, 20, 400);
    SimOptions given = segment_options(seed, Backfill::Easy);
    // Configured for compact starts: the simulator then pools the finished
    // jobs' placement buffers (with a pass function of its own, too).
    given.sched.planner.compact_starts = true;
    CompactPasses compact;
    std::map<JobId, std::vector<Placement>> sent;
    std::size_t checked = 0, with_cores = 0, bad = 0;
    auto same = [](const std::vector<Placement>& a, const std::vector<Placement>& b) {
      if (a.size() != b.size()) return false;
      for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].node != b[i].node || a[i].slots != b[i].slots || a[i].count != b[i].count || a[i].cores != b[i].cores)
          return false;
      return true;
    };
    given.scheduler = [&](const Snapshot& s, const SchedConfig& cfg, std::uint64_t sd) {
      for (const RunningJob& rj : s.running) {
        auto it = sent.find(rj.job.id);
        if (it == sent.end()) continue;
        ++checked;
        if (!same(rj.placement, it->second)) ++bad;
      }
      Plan p = compact.pass(s, cfg, sd);
      for (const StartRecord& sr : p.starts) {
        std::vector<Placement>& mine = sent[sr.job];
        mine.clear();
        for (std::uint32_t k = sr.first; k < sr.first + sr.count; ++k) {
          Placement& e = p.start_placements[k];
          // Cores on jobs of odd id (one per slot, a pattern of the job's
          // id): a buffer that held cores is later given none, and back.
          if (e.count == 1 && sr.job % 2 == 1) {
            e.cores.clear();
            for (std::uint32_t c = 0; c < e.slots; ++c) e.cores.push_back(static_cast<int>((sr.job + c) % 97));
            ++with_cores;
          } else {
            e.cores.clear();
          }
          mine.push_back(e);
        }
      }
      return p;
    };
    const SimResult r = simulate(tr, given);
    INFO("seed " << seed);
    CHECK(r.finished == 300);
    CHECK(with_cores > 10);
    CHECK(checked > 1000);
    CHECK(bad == 0);
  }
}

TEST_CASE("sim: the planner's own starts, nodes not counted by the simulator, replay as checked starts", "[sim]") {
  // With its own fast-path passes the simulator leaves the nodes in use to
  // the planner (it keeps the core count only); a caller's pass function is
  // still checked node by node. The same planner through a pass function
  // (compact records, a kept Plan) must replay alike with no deferred start,
  // and no start of any pass may land on a node the running jobs fill (the
  // planner's promise the simulator relies on, counted here per node).
  for (std::uint64_t seed = 9; seed <= 12; ++seed) {
    const SwfTrace tr = uniform_trace(static_cast<unsigned>(seed), 48, 300, 15, 500);
    for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative}) {
      const SimOptions opt = segment_options(seed, b);
      const SimResult own = simulate(tr, opt);
      SimOptions checked = opt;
      CompactPasses compact;
      std::size_t over = 0, starts = 0;
      checked.scheduler = [&](const Snapshot& s, const SchedConfig& cfg, std::uint64_t sd) {
        const Plan& plan = compact.pass(s, cfg, sd);
        std::vector<int> used(s.nodes.size(), 0);
        auto add = [&](const Placement& p) {
          for (std::uint32_t k = 0; k < p.count; ++k)
            if (p.node + k < used.size()) used[p.node + k] += static_cast<int>(p.slots);
        };
        for (const RunningJob& rj : s.running)
          if (!rj.suspended)
            for (const Placement& p : rj.placement) add(p);
        for (const StartRecord& sr : plan.starts)
          for (std::uint32_t k = 0; k < sr.count; ++k) add(plan.start_placements[sr.first + k]);
        for (std::size_t n = 0; n < used.size(); ++n)
          if (used[n] > s.nodes[n].cores) ++over;
        starts += plan.starts.size();
        return plan;
      };
      const SimResult ref = simulate(tr, checked);
      INFO("seed " << seed << " policy " << name(b));
      CHECK(starts >= 300);
      CHECK(over == 0);
      CHECK(own.deferred_starts == 0);
      CHECK(ref.deferred_starts == 0);
      CHECK(own.finished == 300);
      CHECK(starts_csv(own) == starts_csv(ref));
      REQUIRE(own.segments.size() == ref.segments.size());
      for (std::size_t k = 0; k < own.segments.size(); ++k) {
        CHECK(own.segments[k].id == ref.segments[k].id);
        CHECK(own.segments[k].start == ref.segments[k].start);
        CHECK(own.segments[k].slots == ref.segments[k].slots);
        CHECK(own.segments[k].placement.size() == ref.segments[k].placement.size());
      }
    }
  }
}

TEST_CASE("sim: a pass is skipped only when no pending job fits in the free cores", "[sim]") {
  // The simulator's own fcfs/easy/conservative passes are skipped when the
  // smallest slots_min pending is above the free cores (kept per slots
  // count with a bitset of the counts in use). The same planner through a
  // pass function is never skipped: every replay must start every job at
  // the same time. Widths from 1 to past the machine (those
  // are rejected), many jobs of few widths, so the smallest comes and goes often.
  std::mt19937 rng(23);
  auto U = [&](int a, int b) { return a + static_cast<int>(rng() % static_cast<unsigned>(b - a + 1)); };
  for (int machine : {40, 130}) {
    std::string text = "; MaxProcs: " + std::to_string(machine) + "\n";
    for (int i = 1; i <= 400; ++i) {
      const int r = U(0, 9);
      const int procs = r < 4 ? U(1, 3) : r < 8 ? U(4, machine) : r < 9 ? 70 : machine + U(0, 3);
      text += swf_line(i, 9 * i, U(20, 600), procs, -1, 600);
    }
    const SwfTrace tr = parse_swf(text);
    for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative}) {
      SimOptions opt;
      opt.sched.planner.backfill = b;
      const SimResult own = simulate(tr, opt);
      SimOptions every = opt;
      every.scheduler = [](const Snapshot& s, const SchedConfig& cfg, std::uint64_t sd) { return schedule(s, cfg, sd); };
      const SimResult ref = simulate(tr, every);
      INFO("machine " << machine << " policy " << name(b));
      CHECK(own.skipped_passes > 50);
      CHECK(ref.skipped_passes == 0);
      CHECK(own.passes + own.skipped_passes == ref.passes);
      CHECK(own.unstarted == ref.unstarted);
      CHECK(starts_csv(own) == starts_csv(ref));
    }
  }
}

TEST_CASE("sim: a pass's starts given in any order start each job with its own slots and nodes", "[sim][order]") {
  // An accepted start waits in a per-pass note (slots, placement) until the
  // job leaves pending; the notes are looked up by job in id order. A pass
  // function that gives the planner's starts reversed (Start decisions, or
  // compact records through a kept Plan) must replay as the planner's own
  // order: same starts, same nodes and slots for every run segment.
  for (std::uint64_t seed = 5; seed <= 8; ++seed) {
    const SwfTrace tr = uniform_trace(static_cast<unsigned>(seed), 48, 300, 20, 400);
    for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative}) {
      const SimOptions opt = segment_options(seed, b);
      const SimResult own = simulate(tr, opt);
      SimOptions rev_decisions = opt;
      std::size_t multi = 0;  // passes with two or more starts (reversed for real)
      rev_decisions.scheduler = [&](const Snapshot& s, const SchedConfig& cfg, std::uint64_t sd) {
        SchedConfig c = cfg;
        c.planner.compact_starts = false;
        Plan p = schedule(s, c, sd);
        std::vector<Decision> starts, rest;
        for (Decision& d : p.decisions) (d.action == Action::Start ? starts : rest).push_back(std::move(d));
        if (starts.size() >= 2) ++multi;
        p.decisions = std::move(rest);
        for (auto it = starts.rbegin(); it != starts.rend(); ++it) p.decisions.push_back(std::move(*it));
        return p;
      };
      const SimResult dec = simulate(tr, rev_decisions);
      SimOptions rev_records = opt;
      CompactPasses compact;
      rev_records.scheduler = [&](const Snapshot& s, const SchedConfig& cfg, std::uint64_t sd) {
        Plan p = compact.pass(s, cfg, sd);
        std::reverse(p.starts.begin(), p.starts.end());
        return p;
      };
      const SimResult rec = simulate(tr, rev_records);
      INFO("seed " << seed << " policy " << name(b));
      CHECK(multi > 10);
      CHECK(own.finished == 300);
      CHECK(dec.deferred_starts == 0);
      CHECK(rec.deferred_starts == 0);
      CHECK(starts_csv(dec) == starts_csv(own));
      CHECK(starts_csv(rec) == starts_csv(own));
      CHECK(segment_nodes(dec) == segment_nodes(own));
      CHECK(segment_nodes(rec) == segment_nodes(own));
    }
  }
}

TEST_CASE("sim: starts on busy nodes are deferred as a per-node slot count says", "[sim]") {
  // The simulator keeps the nodes in use of a single-core machine as a
  // bitset. A pass function proposes starts on random node ranges (some on
  // busy nodes, some with 0 or 2 slots a node, some past the machine) and
  // predicts which the simulator accepts by counting slots per node over
  // the running jobs, as the simulator of a multi-core machine does; every
  // job must first start when predicted, and the deferrals must match.
  std::mt19937 rng(11);
  auto U = [&](int a, int b) { return a + static_cast<int>(rng() % static_cast<unsigned>(b - a + 1)); };
  constexpr int kNodes = 100;
  std::string text = "; MaxProcs: " + std::to_string(kNodes) + "\n";
  for (int i = 1; i <= 300; ++i) text += swf_line(i, 7 * i, U(20, 400), U(1, 12), -1, 400);
  const SwfTrace tr = parse_swf(text);
  std::map<JobId, Time> predicted;  // first accepted start
  std::size_t rejected = 0, accepted = 0;
  SimOptions opt;
  opt.scheduler = [&](const Snapshot& s, const SchedConfig&, std::uint64_t) {
    std::vector<int> used(kNodes, 0);
    std::int64_t total = 0;
    for (const RunningJob& r : s.running) {
      if (r.suspended) continue;
      total += r.slots;
      for (const Placement& p : r.placement)
        for (std::uint32_t k = 0; k < p.count && p.node + k < kNodes; ++k) used[p.node + k] += static_cast<int>(p.slots);
    }
    Plan plan;
    for (const Job& j : s.pending) {
      if (U(0, 2) == 0) continue;  // not this pass
      const int n = j.slots_min;
      std::vector<Placement> pl;
      const int kind = U(0, 9);
      std::uint32_t at = static_cast<std::uint32_t>(U(0, kNodes - 1));
      if (kind == 0) {
        pl.push_back({at, 2, {}, static_cast<std::uint32_t>(n)});  // 2 slots on single-core nodes
      } else if (kind == 1) {
        pl.push_back({at, 0, {}, 3});  // no slots: takes nothing
        pl.push_back({static_cast<std::uint32_t>(U(0, kNodes - 1)), 1, {}, static_cast<std::uint32_t>(n)});
      } else {
        const int first = n > 1 ? U(1, n - 1) : n;  // one or two ranges
        pl.push_back({at, 1, {}, static_cast<std::uint32_t>(first)});
        if (first < n) pl.push_back({static_cast<std::uint32_t>(U(0, kNodes - 1)), 1, {}, static_cast<std::uint32_t>(n - first)});
      }
      bool ok = total + n <= kNodes;  // the per-node slot count of every node listed
      for (const Placement& p : pl) {
        if (p.node + p.count > kNodes) ok = false;
        for (std::uint32_t k = 0; ok && k < p.count; ++k)
          if (used[p.node + k] + static_cast<int>(p.slots) > 1) ok = false;
      }
      if (ok) {
        total += n;
        for (const Placement& p : pl)
          for (std::uint32_t k = 0; k < p.count; ++k) used[p.node + k] += static_cast<int>(p.slots);
        predicted.emplace(j.id, s.now);
        ++accepted;
      } else {
        ++rejected;
      }
      Decision d;
      d.action = Action::Start;
      d.job = j.id;
      d.at = s.now;
      d.slots = n;
      d.placement = std::move(pl);
      plan.decisions.push_back(std::move(d));
    }
    return plan;
  };
  const SimResult r = simulate(tr, opt);
  CHECK(accepted > 200);
  CHECK(rejected > 200);
  CHECK(r.deferred_starts == rejected);
  std::size_t mismatches = 0;
  for (const JobResult& j : r.per_job) {
    auto it = predicted.find(j.id);
    const Time want = it == predicted.end() ? -1 : it->second;
    if (j.first_start != want && mismatches++ < 5) UNSCOPED_INFO("job " << j.id << " started " << j.first_start << ", predicted " << want);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("sim: jobs carry their trace user and group ids as names", "[sim]") {
  // The simulator keeps a table of names by id; ids past it are formatted
  // each time, unknown ones (-1) stay empty.
  SwfTrace tr;
  tr.max_procs = 4;
  const long users[] = {0, 7, 70000, 7, -1, 65535, 65536, 3};
  const long groups[] = {5, -1, 5, 123456, 2, 0, 9, 65536};
  for (int i = 0; i < 8; ++i) {
    SwfJob j;
    j.id = static_cast<JobId>(i + 1);
    j.submit = 10 * i;
    j.run = j.estimate = 5;
    j.procs = 1;
    j.user = users[i];
    j.group = groups[i];
    tr.jobs.push_back(j);
  }
  SimOptions opt;
  std::vector<std::pair<std::string, std::string>> seen;
  opt.on_arrival = [&](Job& j, const SwfJob&) { seen.emplace_back(j.user, j.group); };
  const SimResult r = simulate(tr, opt);
  CHECK(r.finished == 8);
  REQUIRE(seen.size() == 8);
  for (int i = 0; i < 8; ++i) {
    INFO("job " << i + 1);
    CHECK(seen[static_cast<std::size_t>(i)].first == (users[i] < 0 ? "" : std::to_string(users[i])));
    CHECK(seen[static_cast<std::size_t>(i)].second == (groups[i] < 0 ? "" : std::to_string(groups[i])));
  }
}

TEST_CASE("sim: PendingHints::cores_only is promised only when every pending job needs cores only", "[sim][order]") {
  // A hook gives some arrivals an unknown queue or a consumable (the planner
  // rejects them); while one of them waits, the simulator must not promise
  // PendingHints::cores_only. The replay must equal one where the planner
  // checks every job (a pass function without hints).
  const SwfTrace tr = uniform_trace(11, 8, 300, 40, 300);
  for (Backfill b : {Backfill::Easy, Backfill::Conservative}) {
    SimOptions opt;
    opt.sched.planner.backfill = b;
    opt.on_arrival = [](Job& j, const SwfJob& sj) {
      if (sj.id % 23 == 0) j.queue = "nowhere";
      if (sj.id % 31 == 0) j.consumables["licence"] = 1;
    };
    std::size_t promised = 0, odd_seen = 0, broken = 0;
    SimOptions checked = opt;
    checked.on_pass = [&](const Snapshot& s, const PassHints& h) {
      const bool all = std::all_of(s.pending.begin(), s.pending.end(), [](const Job& j) { return cores_only_job(j); });
      promised += h.pending.cores_only;
      odd_seen += !all;
      broken += h.pending.cores_only && !all;
    };
    checked.scheduler = [&](const Snapshot& s, const SchedConfig& cfg, std::uint64_t seed) { return schedule(s, cfg, seed); };
    const SimResult ref = simulate(tr, checked);
    const SimResult own = simulate(tr, opt);
    INFO("policy " << name(b));
    CHECK(broken == 0);
    CHECK(promised > 0);
    CHECK(odd_seen > 0);
    CHECK(ref.rejected == 300 / 23 + 300 / 31);
    CHECK(own.rejected == ref.rejected);
    CHECK(starts_csv(own) == starts_csv(ref));
  }
}

TEST_CASE("sim: PendingHints::slots_min and min_duration follow pending", "[sim][order]") {
  // The simulator's own easy passes get the two arrays (pass_hints.hpp) and the
  // planner passes over jobs with them; a caller's pass function gets none
  // (every job read). Both replays must be equal: re-predictions change
  // queued estimates, a hook makes some arrivals older (they take a FIFO
  // place) and others wider than the machine (rejected when visited), jobs
  // leave from anywhere in the queue (the last one fills the hole).
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937 rng(static_cast<unsigned>(seed * 977));
    std::string text = "; MaxProcs: 32\n";
    Time t = 0;
    for (int i = 1; i <= 400; ++i) {
      t += static_cast<Time>(rng() % 25);
      const long run = 1 + static_cast<long>(rng() % 500);
      const long procs = rng() % 4 == 0 ? 1 + static_cast<long>(rng() % 32) : 1 + static_cast<long>(rng() % 4);
      const long user = static_cast<long>(rng() % 6);
      text += swf_line(i, t, run, procs, procs, run + static_cast<long>(rng() % 900), user);
    }
    const SwfTrace tr = parse_swf(text);
    for (Order order : {Order::Fifo, Order::Lxf}) {
      SimOptions opt;
      opt.sched.planner.backfill = Backfill::Easy;
      opt.sched.order.policy = order;
      opt.predict = opt.repredict = seed % 2 == 1;
      opt.on_arrival = [](Job& j, const SwfJob& sj) {
        if (sj.id % 7 == 0) j.submit -= 200;
        if (sj.id % 97 == 0) j.slots_min = j.slots_max = 40;
      };
      const SimResult own = simulate(tr, opt);
      SimOptions ref_opt = opt;
      std::size_t with_arrays = 0;
      ref_opt.on_pass = [&](const Snapshot&, const PassHints& h) {
        with_arrays += !h.pending.slots_min.empty() || !h.pending.min_duration.empty();
      };
      ref_opt.scheduler = [&](const Snapshot& s, const SchedConfig& cfg, std::uint64_t sd) { return schedule(s, cfg, sd); };
      const SimResult ref = simulate(tr, ref_opt);
      INFO("seed " << seed << " order " << name(order));
      CHECK(with_arrays == 0);
      CHECK(own.rejected == 400 / 97);
      CHECK(own.rejected == ref.rejected);
      CHECK(starts_csv(own) == starts_csv(ref));
      CHECK(own.mean_bsld == ref.mean_bsld);
    }
  }
}

// ------------------------------------------------------ event mechanics --

TEST_CASE("sim: completions before arrivals, metrics, starts file", "[sim]") {
  // Machine of 4. Job 1 uses all 4 for 100 s; job 2 arrives at 100 and needs
  // all 4: it must start at 100 (the completion is processed first).
  SwfTrace t = parse_swf("; MaxProcs: 4\n" + swf_line(1, 0, 100, 4, 4, 100) + swf_line(2, 100, 50, 4, 4, 100) +
                         swf_line(3, 100, 5, 1, 1, 5));
  SimOptions opt;
  opt.scheduler = [](const Snapshot& s, const SchedConfig&, std::uint64_t) { return greedy(s); };
  SimResult r = simulate(t, opt);
  REQUIRE(r.per_job.size() == 3);
  CHECK(r.per_job[0].first_start == 0);
  CHECK(r.per_job[1].first_start == 100);
  CHECK(r.per_job[2].first_start == 150);
  CHECK(r.per_job[2].end == 155);
  CHECK(r.finished == 3);
  CHECK(r.makespan == 155);
  CHECK(r.max_wait == 50);
  CHECK(r.mean_wait == Approx(50.0 / 3));
  // bsld: 1, 1, (155-100)/max(5,10) = 5.5
  CHECK(r.mean_bsld == Approx((1 + 1 + 5.5) / 3));
  CHECK(r.utilization == Approx((400.0 + 200 + 5) / (4 * 155)));
  CHECK(starts_csv(r) == "1,0\n2,100\n3,150\n");
  const auto js = nlohmann::json::parse(to_json(r, {{"policy", "x\"y"}}));
  CHECK(js["policy"] == "x\"y");
  CHECK(js["mean_bsld"].get<double>() == Approx(r.mean_bsld).epsilon(1e-5));
  CHECK(js.contains("sim_seconds"));
}

TEST_CASE("sim: checkpoint costs are charged and the job resumes its work", "[sim]") {
  // Job 1 (4 procs, 1000 s) is checkpointed at 100 when job 2 arrives.
  // The checkpoint holds the cores 60 s, so job 2 starts at 160 (deferred),
  // then job 1 restarts at 260 with 900 s left plus 60 s restart cost.
  SwfTrace t = parse_swf("; MaxProcs: 4\n" + swf_line(1, 0, 1000, 4, 4, 1000) + swf_line(2, 100, 100, 4, 4, 100));
  SimOptions opt;
  opt.record_segments = true;
  opt.scheduler = [](const Snapshot& s, const SchedConfig&, std::uint64_t) {
    Plan p;
    bool two_pending = std::any_of(s.pending.begin(), s.pending.end(), [](const Job& j) { return j.id == 2; });
    if (s.now == 100) p.decisions.push_back({Action::Checkpoint, 1, s.now, 0, {}, {}, {}});
    if (two_pending) {  // job 2 first, whenever asked
      p.decisions.push_back({Action::Start, 2, s.now, 4, {}, {}, {}});
      return p;
    }
    return greedy(s);
  };
  SimResult r = simulate(t, opt);
  CHECK(r.checkpoints == 1);
  CHECK(r.deferred_starts == 1);
  CHECK(r.per_job[0].first_start == 0);
  CHECK(r.per_job[1].first_start == 160);
  CHECK(r.per_job[0].end == 260 + 60 + 900);
  CHECK(r.checkpoint_cost_total == 60 * 4);
  CHECK(r.restart_cost_total == 60 * 4);
  REQUIRE(r.segments.size() == 3);
  CHECK(r.segments[0].checkpointed);
  CHECK(r.segments[0].end == 160);
  GanttOptions g;
  g.to = 2000;
  const std::string svg = gantt_svg(r, g);
  CHECK(svg.find("<svg") == 0);
  CHECK(svg.find("<g class=\"mark checkpoint\" data-job=\"1\">") != std::string::npos);
  CHECK(svg.find("ended by a checkpoint") != std::string::npos);
}

TEST_CASE("sim: requeue loses work, suspend/resume keeps it", "[sim]") {
  SwfTrace t = parse_swf("; MaxProcs: 2\n" + swf_line(1, 0, 100, 2, 2, 100) + swf_line(2, 10, 20, 2, 2, 20));
  for (Action stop : {Action::Requeue, Action::Suspend}) {
    SimOptions opt;
    opt.scheduler = [stop](const Snapshot& s, const SchedConfig&, std::uint64_t) {
      Plan p;
      if (s.now == 10) {
        p.decisions.push_back({stop, 1, s.now, 0, {}, {}, {}});
        p.decisions.push_back({Action::Start, 2, s.now, 2, {}, {}, {}});
        return p;
      }
      for (const RunningJob& r : s.running)
        if (r.suspended && s.running.size() == 1) p.decisions.push_back({Action::Resume, r.job.id, s.now, 0, {}, {}, {}});
      if (!p.decisions.empty()) return p;
      return greedy(s);
    };
    SimResult r = simulate(t, opt);
    CHECK(r.preemptions == 1);
    CHECK(r.per_job[1].first_start == 10);
    CHECK(r.per_job[0].first_start == 0);
    if (stop == Action::Requeue)
      CHECK(r.per_job[0].end == 30 + 100);  // restarted from scratch at 30
    else
      CHECK(r.per_job[0].end == 30 + 90);   // resumed with 90 s left
  }
}

TEST_CASE("sim: EASY++ prediction and its extension", "[sim]") {
  // User 7 runs two 100 s jobs (requested 1000); the third gets estimate 100,
  // runs 300: past its prediction its expected end moves to start + 1000.
  SwfTrace t = parse_swf("; MaxProcs: 4\n" + swf_line(1, 0, 100, 1, 1, 1000, 7) + swf_line(2, 0, 100, 1, 1, 1000, 7) +
                         swf_line(3, 200, 300, 1, 1, 1000, 7) + swf_line(4, 400, 10, 1, 1, 1000, 8));
  SimOptions opt;
  opt.predict = true;
  std::vector<std::pair<Time, Time>> seen;  // (now, expected_end of job 3)
  Time est3 = -1;
  opt.scheduler = [&](const Snapshot& s, const SchedConfig&, std::uint64_t) {
    for (const Job& j : s.pending)
      if (j.id == 3) est3 = j.estimate;
    for (const RunningJob& r : s.running)
      if (r.job.id == 3) seen.emplace_back(s.now, r.expected_end);
    return greedy(s);
  };
  simulate(t, opt);
  CHECK(est3 == 100);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].first == 400);
  CHECK(seen[0].second == 200 + 1000);
}

TEST_CASE("sim: EASY++ prediction: one run's history, the mean of the last two, capped by the request", "[sim]") {
  // Tsafrir, Etsion, Feitelson 2007 (--predict): the estimate is the
  // mean of the user's last two run times, never above the requested time;
  // with one run in the history, that run; with none, the request.
  // User 5, machine of 1 core so that the jobs run one after another:
  //   job 1 (run 40, request 1000): no history -> 1000
  //   job 2 (run 60, request 1000): history {40} -> 40
  //   job 3 (run 10, request 1000): history {40, 60} -> 50
  //   job 4 (run 10, request 30):   history {60, 10} -> mean 35, capped -> 30
  //   job 5 (run 10, request 1000): history {10, 10} -> 10
  SwfTrace t = parse_swf("; MaxProcs: 1\n" + swf_line(1, 0, 40, 1, 1, 1000, 5) + swf_line(2, 100, 60, 1, 1, 1000, 5) +
                         swf_line(3, 300, 10, 1, 1, 1000, 5) + swf_line(4, 500, 10, 1, 1, 30, 5) +
                         swf_line(5, 700, 10, 1, 1, 1000, 5));
  SimOptions opt;
  opt.predict = true;
  std::map<JobId, Time> est;  // as each job was first seen pending
  opt.scheduler = [&](const Snapshot& s, const SchedConfig&, std::uint64_t) {
    for (const Job& j : s.pending) est.emplace(j.id, j.estimate > 0 ? j.estimate : j.walltime);
    return greedy(s);
  };
  REQUIRE(simulate(t, opt).finished == 5);
  CHECK(est == std::map<JobId, Time>{{1, 1000}, {2, 40}, {3, 50}, {4, 30}, {5, 10}});
}

TEST_CASE("sim: bad options are refused with a clear message", "[sim]") {
  SwfTrace t = parse_swf(swf_line(1, 0, 10, 1, 1, 10));  // no header
  SimOptions opt;
  CHECK_THROWS_WITH(simulate(t, opt), Catch::Contains("MaxProcs"));
  opt.nodes = 2;
  opt.scheduler = [](const Snapshot& s, const SchedConfig&, std::uint64_t) { return greedy(s); };
  CHECK(simulate(t, opt).finished == 1);
}

TEST_CASE("sim: a planner that starts nothing leaves jobs unstarted, no hang", "[sim]") {
  SwfTrace t = parse_swf("; MaxProcs: 2\n" + swf_line(1, 0, 10, 1, 1, 10));
  SimOptions opt;
  opt.scheduler = [](const Snapshot&, const SchedConfig&, std::uint64_t) { return Plan{}; };
  SimResult r = simulate(t, opt);
  CHECK(r.unstarted == 1);
  CHECK(r.finished == 0);
}

// ---------------------------------- exact agreement with the reference --

TEST_CASE("reference: the test's own FCFS/EASY on a hand-checked case", "[sim][reference]") {
  // Machine 10. t=0: A(6 procs, 100 s) starts. B(8) cannot: shadow = 100,
  // extra = 10 - 8 = 2. C(4, est 50) fits and ends by 100: backfills; then
  // nothing is free. t=50: D(2, est 500) fits and needs no more than extra:
  // backfills (extra 0). E(1, est 500) fits but ends after the shadow and
  // there is no extra left: waits.
  std::vector<RefJob> jobs = {{1, 0, 100, 100, 6}, {2, 0, 100, 100, 8}, {3, 0, 50, 50, 4}, {4, 0, 500, 500, 2},
                              {5, 0, 500, 500, 1}};
  // t=100: A ends, 8 free: B starts. t=200: B ends: E starts.
  auto e = reference(jobs, 10, true);
  CHECK(e.at(1) == 0);
  CHECK(e.at(2) == 100);
  CHECK(e.at(3) == 0);
  CHECK(e.at(4) == 50);
  CHECK(e.at(5) == 200);
  auto f = reference(jobs, 10, false);
  CHECK(f.at(2) == 100);
  CHECK(f.at(3) == 200);
}

TEST_CASE("fcfs and easy reproduce the textbook algorithms: hand-built traces", "[sim][reference]") {
  std::string text = "; MaxProcs: 10\n" + swf_line(1, 0, 100, 6, 6, 100) + swf_line(2, 0, 100, 8, 8, 100) +
                     swf_line(3, 0, 50, 4, 4, 50) + swf_line(4, 0, 500, 2, 2, 500) + swf_line(5, 0, 500, 1, 1, 500) +
                     swf_line(6, 100, 10, 10, 10, 40) + swf_line(7, 100, 30, 1, 1, 60) + swf_line(8, 150, 5, 3, 3, 5);
  SwfTrace t = parse_swf(text);
  check_against_reference(t, Backfill::Fcfs);
  check_against_reference(t, Backfill::Easy);
}

TEST_CASE("fcfs and easy reproduce the textbook algorithms: random traces", "[sim][reference]") {
  for (std::uint32_t seed = 1; seed <= 12; ++seed) {
    INFO("seed " << seed);
    SwfTrace t = random_trace(seed, 32, 400);
    check_against_reference(t, Backfill::Fcfs);
    check_against_reference(t, Backfill::Easy);
  }
}

TEST_CASE("sim: the event queue pops as a (t, idx) min-heap, sorted while small and as a heap past it",
          "[sim][events]") {
  using detail::Ev;
  using detail::EventQueue;
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    EventQueue q;
    std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> want;
    std::set<std::pair<Time, std::uint32_t>> used;  // (t, idx) unique: one order only
    std::size_t pops = 0, peak = 0;
    // Grow past kSortedMax (odd seeds) or stay below it, with pops between
    // pushes; times from a small range (many ties, broken by idx).
    const std::size_t cap = seed % 2 ? 3 * EventQueue::kSortedMax : EventQueue::kSortedMax - 10;
    for (int step = 0; step < 20000; ++step) {
      const bool push = want.size() < cap && (want.empty() || rng() % 100 < (step < 10000 ? 60u : 40u));
      if (push) {
        Ev e{static_cast<Time>(rng() % 300), static_cast<std::uint32_t>(rng() % 5000), static_cast<std::uint32_t>(step)};
        if (!used.insert({e.t, e.idx}).second) continue;
        q.push(e);
        want.push(e);
        peak = std::max(peak, want.size());
      } else {
        REQUIRE(!q.empty());
        const Ev a = q.top(), b = want.top();
        REQUIRE(a.t == b.t);
        REQUIRE(a.idx == b.idx);
        REQUIRE(a.gen == b.gen);
        q.pop();
        want.pop();
        used.erase({a.t, a.idx});
        ++pops;
      }
      REQUIRE(q.size() == want.size());
      REQUIRE(q.empty() == want.empty());
    }
    CHECK(pops > 5000);
    CHECK(q.is_heap() == (peak > EventQueue::kSortedMax));
    while (!want.empty()) {  // the rest drains in order too
      REQUIRE(q.top().t == want.top().t);
      REQUIRE(q.top().idx == want.top().idx);
      q.pop();
      want.pop();
    }
    CHECK(q.empty());
  }
}

TEST_CASE("fcfs and easy reproduce the textbook algorithms: over 512 jobs running at once", "[sim][reference]") {
  // 2000 single-core nodes, mostly 1-4 proc jobs: the simulator's event
  // queue holds more than EventQueue::kSortedMax ends and turns into a heap.
  for (std::uint32_t seed = 1; seed <= 2; ++seed) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    std::string text = "; MaxProcs: 2000\n";
    long t = 0;
    for (int i = 1; i <= 4000; ++i) {
      t += static_cast<long>(rng() % 2);
      const long run = 1 + static_cast<long>(rng() % 40) * 25;
      const long procs = rng() % 500 == 0 ? 200 + static_cast<long>(rng() % 1800) : 1 + static_cast<long>(rng() % 4);
      text += swf_line(i, t, run, procs, procs, run + static_cast<long>(rng() % 3) * 100);
    }
    SwfTrace tr = parse_swf(text);
    // Jobs running at once in the replay (ends before starts at one time).
    SimOptions opt;
    SimResult r = simulate(tr, opt);
    std::vector<std::pair<Time, int>> ev;
    for (const JobResult& j : r.per_job) {
      ev.push_back({j.first_start, +1});
      ev.push_back({j.end, -1});
    }
    std::sort(ev.begin(), ev.end());
    int now = 0, most = 0;
    for (const auto& e : ev) most = std::max(most, now += e.second);
    CHECK(most > static_cast<int>(detail::EventQueue::kSortedMax));
    check_against_reference(tr, Backfill::Fcfs);
    check_against_reference(tr, Backfill::Easy);
  }
}

TEST_CASE("fcfs and easy reproduce the textbook algorithms: real traces", "[sim][reference]") {
  std::string why;
  for (const char* t : {"lublin_256.swf", "KTH-SP2-1996-2.1-cln.swf", "CTC-SP2-1996-3.1-cln.swf.gz"})
    if (corral_test::trace(t, &why).empty()) {
      CORRAL_SKIP(why);
      return;
    }
  const std::string dir = corral_test::traces_dir();
  SwfTrace l = read_swf(dir + "/lublin_256.swf");
  REQUIRE(l.jobs.size() > 9000);
  check_against_reference(l, Backfill::Easy);
  check_against_reference(l, Backfill::Fcfs);
  SwfTrace k = read_swf(dir + "/KTH-SP2-1996-2.1-cln.swf");
  check_against_reference(k, Backfill::Easy, 5000);
  SwfTrace c = read_swf(dir + "/CTC-SP2-1996-3.1-cln.swf.gz");
  check_against_reference(c, Backfill::Easy, 5000);
}

// ------------------------ hand-built traces: conservative, reserve, checkpoint --
// Each schedule below is worked out by hand (machine of single-core nodes,
// SWF convention: completions, then arrivals, then one pass) and asserted
// job by job as `corral sim --starts` writes it (id,first start).

TEST_CASE("conservative: a hand-built trace replays to its known schedule", "[sim][handbuilt]") {
  // docs/policies.md's policy table: conservative makes a reservation for
  // every pending job and starts a job early only if that delays none of
  // them (Mu'alem & Feitelson 2001).
  // Machine 10.           id submit run est procs
  //                        1    0     60 100   6
  //                        2    0    100 100   8
  //                        3    0    100 100  10
  //                        4    0    250 250   2
  //                        5    0     40  50   4
  //                        6   70     30  30   2
  // t=0:   1 starts (4 free). 2 reserved [100,200), 3 [200,300). 4 fits
  //        now but [0,250) meets 3's reservation: reserved [300,550).
  //        5 fits [0,50) beside everything: starts (0 free).
  // t=40:  5 ends early; nothing new fits (4 still meets 3).
  // t=60:  1 ends early (planned 100): 10 free. 2 starts (ends 160 as
  //        planned), 3 moves up to [160,260), 4 to [260,510).
  // t=70:  6 arrives: [70,100) fits beside 2 (2 free): starts.
  // t=160: 2 ends, 3 starts. t=260: 3 ends, 4 starts.
  // (EASY differs: 4 backfills at 0 on the head's extra 2 processors, a
  // reservation conservative keeps for job 3.)
  const std::string text = "; MaxProcs: 10\n" + swf_line(1, 0, 60, 6, 6, 100) + swf_line(2, 0, 100, 8, 8, 100) +
                           swf_line(3, 0, 100, 10, 10, 100) + swf_line(4, 0, 250, 2, 2, 250) +
                           swf_line(5, 0, 40, 4, 4, 50) + swf_line(6, 70, 30, 2, 2, 30);
  SwfTrace t = parse_swf(text);
  SimOptions opt;
  opt.sched.planner.backfill = Backfill::Conservative;
  SimResult r = simulate(t, opt);
  CHECK(starts_csv(r) == "1,0\n2,60\n3,160\n4,260\n5,0\n6,70\n");
  CHECK(r.finished == 6);
  CHECK(r.makespan == 510);
  CHECK(r.checkpoints == 0);
  // A fresh planner every pass (no kept plan or node state) gives the same.
  opt.scheduler = [](const Snapshot& s, const SchedConfig& c, std::uint64_t sd) { return schedule(s, c, sd); };
  CHECK(starts_csv(simulate(t, opt)) == starts_csv(r));
  opt = SimOptions{};
  opt.sched.planner.backfill = Backfill::Easy;
  CHECK(simulate(t, opt).per_job[3].first_start == 0);
}

TEST_CASE("reserve: a hand-built trace with -R y jobs replays to its known schedule", "[sim][handbuilt]") {
  // sge6-reservation-backfill.txt section 2 a)-c) and section 3 (-R y,
  // max_reservation): reservations only for jobs submitted with -R y, at
  // most max_reservation a scheduling run; other jobs backfill around the
  // reservations made, and without one a wide job starves.
  // Machine 10.           id submit run est procs -R
  //                        1    0    100 100   6   n
  //                        2    0    100 100   8   y
  //                        3    0    100 100  10   y
  //                        4    0     50  50   4   n
  //                        5   10    250 250   2   n
  //                        6   10    300 300   4   n
  const std::string text = "; MaxProcs: 10\n" + swf_line(1, 0, 100, 6, 6, 100) + swf_line(2, 0, 100, 8, 8, 100) +
                           swf_line(3, 0, 100, 10, 10, 100) + swf_line(4, 0, 50, 4, 4, 50) +
                           swf_line(5, 10, 250, 2, 2, 250) + swf_line(6, 10, 300, 4, 4, 300);
  SwfTrace t = parse_swf(text);
  SimOptions opt;
  opt.sched.planner.backfill = Backfill::Reserve;
  opt.on_arrival = [](Job& j, const SwfJob& s) { j.reserve = s.id == 2 || s.id == 3; };

  SECTION("max_reservation 1: only the first -R y job is reserved each pass") {
    // t=0:   1 starts (4 free); 2 reserved [100,200) (the one reservation);
    //        3 gets none; 4 fits [0,50): starts.
    // t=50:  4 ends (4 free): 5 [50,300) fits beside 2 (8 + 2 <= 10) and
    //        3 has no reservation to keep: starts. 6 (4) does not fit.
    // t=100: 1 ends: 2 starts (0 free); 3 now reserved [300,400) (5 ends 300).
    // t=200: 2 ends: 6 [200,500) would meet 3's reservation: waits.
    // t=300: 5 ends: 3 starts. t=400: 3 ends: 6 starts.
    opt.sched.planner.max_reservation = 1;
    SimResult r = simulate(t, opt);
    CHECK(starts_csv(r) == "1,0\n2,100\n3,300\n4,0\n5,50\n6,400\n");
    CHECK(r.makespan == 700);
  }
  SECTION("max_reservation 2: both -R y jobs are reserved") {
    // t=0:   as above, and 3 reserved [200,300) too.
    // t=50:  5 [50,300) would meet 3's reservation; 6 too: both wait.
    // t=100: 2 starts. t=200: 3 starts. t=300: 5 and 6 start (8 free).
    opt.sched.planner.max_reservation = 2;
    SimResult r = simulate(t, opt);
    CHECK(starts_csv(r) == "1,0\n2,100\n3,200\n4,0\n5,300\n6,300\n");
    CHECK(r.makespan == 600);
  }
  SECTION("no -R y job: nothing is reserved and the wide job starves") {
    // t=0: 1, 4 start. t=50: 5 starts (2 free). t=100: 2 starts (0 free).
    // t=200: 2 ends (8 free): 3 (10) does not fit, 6 does: starts.
    // t=300: 5 ends (6 free), 3 still waits. t=500: 6 ends: 3 starts.
    opt.on_arrival = nullptr;
    opt.sched.planner.max_reservation = 2;
    SimResult r = simulate(t, opt);
    CHECK(starts_csv(r) == "1,0\n2,100\n3,500\n4,0\n5,50\n6,200\n");
  }
}

TEST_CASE("checkpoint: a hand-built trace replays to its known schedule and checkpoints", "[sim][handbuilt]") {
  // checkpoint-backfill-patent.zh.txt [0053]-[0059] (conditions (a) and (b),
  // checkpoint at the window's end, the job requeued and resumed with only
  // what is left), split factor p = 0.5, threshold 1000 s, checkpoint and
  // restart cost 60 s each.
  // Machine 12.           id submit  run   est procs
  //                        1    0   1000  1000   8
  //                        2    0    500   500  10
  //                        3    0   3000  3000   2
  //                        4    0   1800  2000   2
  // t=0:    1 starts (4 free). 2 (head) is reserved at 1000: the window is
  //         [0,1000). 3: shortened 1500 ends past the window, but (b) at
  //         1000 it runs beside the head (10 + 2 <= 12): starts, not
  //         backfilled. 4: (b) fails (10 + 2 + 2 > 12); (a) shortened
  //         1000 ends at 1000, within the window: backfilled at 0.
  // t=1000: 1 ends. 8 free < 10: the window is over, 4 (backfilled, still
  //         running) is checkpointed with 1000 s of work done; writing the
  //         checkpoint holds its cores until 1060, the head is reserved then.
  // t=1060: 4 requeued. 2 starts (10 free). 4 (1000 s left + 60 s restart)
  //         is reserved at 1560.
  // t=1560: 2 ends; 4 restarts and ends at 1560 + 60 + 800 = 2420.
  // t=3000: 3 ends (never stopped).
  const std::string text = "; MaxProcs: 12\n" + swf_line(1, 0, 1000, 8, 8, 1000) + swf_line(2, 0, 500, 10, 10, 500) +
                           swf_line(3, 0, 3000, 2, 2, 3000) + swf_line(4, 0, 1800, 2, 2, 2000);
  SwfTrace t = parse_swf(text);
  SimOptions opt;
  opt.sched.planner.backfill = Backfill::Checkpoint;
  opt.sched.planner.checkpoint_split = 0.5;
  opt.sched.planner.checkpoint_threshold = 1000;
  opt.checkpoint_cost = 60;
  opt.restart_cost = 60;
  opt.record_segments = true;
  SimResult r = simulate(t, opt);
  CHECK(starts_csv(r) == "1,0\n2,1060\n3,0\n4,0\n");
  CHECK(r.checkpoints == 1);
  CHECK(r.per_job[3].checkpoints == 1);
  CHECK(r.per_job[2].checkpoints == 0);
  CHECK(r.per_job[1].end == 1560);
  CHECK(r.per_job[2].end == 3000);
  CHECK(r.per_job[3].end == 2420);
  CHECK(r.checkpoint_cost_total == 60 * 2);
  CHECK(r.restart_cost_total == 60 * 2);
  // Job 4's two segments: [0,1060) checkpointed, [1560,2420).
  std::vector<Segment> four;
  for (const Segment& g : r.segments)
    if (g.id == 4) four.push_back(g);
  REQUIRE(four.size() == 2);
  CHECK(four[0].start == 0);
  CHECK(four[0].end == 1060);
  CHECK(four[0].checkpointed);
  CHECK(four[1].start == 1560);
  CHECK(four[1].end == 2420);
  CHECK_FALSE(four[1].checkpointed);
  // Free checkpoints: the head starts at the window's end itself, job 4 is
  // reserved behind it and resumes at 1500 with 800 s left and the restart.
  opt.checkpoint_cost = 0;
  r = simulate(t, opt);
  CHECK(starts_csv(r) == "1,0\n2,1000\n3,0\n4,0\n");
  CHECK(r.per_job[3].end == 1500 + 60 + 800);
  CHECK(r.checkpoints == 1);
}
