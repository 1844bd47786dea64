// `corral sim` as a command: the JSON keys with values worked out
// by hand, --starts, --gantt clipping, the MONITOR schedule file (--monitor),
// --max-reservation with -R y jobs (--reserve-min-procs) and
// --default-duration; bad input refused with exit code 2. Also the
// simulator's on_monitor lines (simulate() level).
//
// The hand-built trace is tests/coordinator/sim/data/sample.swf (also
// tools/demo's fallback): a 4-processor machine,
//   job 1: submit   0, 2 procs, run 100 (requested 100)
//   job 2: submit   5, cancelled (run -1): skipped by the SWF rules
//   job 3: submit  10, 4 procs, run  50 (requested  50)
//   job 4: submit  20, 2 procs, run  30 (requested  30)
//   job 5: submit  60, 1 proc,  run 200 (requested 200)
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "coordinator/sim/sim.hpp"
#include "tests/coordinator/sim/run_corral.hpp"
#include "tests/coordinator/sim/svg_read.hpp"
#include "tests/skip.hpp"
#include "tests/traces.hpp"

using namespace corral;
using namespace corral::sim;

#ifndef SAMPLE_SWF
#error "SAMPLE_SWF must name tests/coordinator/sim/data/sample.swf"
#endif

namespace {

// The jobs a Gantt chart draws.
std::set<JobId> drawn_jobs(const std::string& svg) {
  std::set<JobId> s;
  for (const corral_test::Element& e : corral_test::read_svg(svg))
    if (e.is("job")) s.insert(static_cast<JobId>(e.num("data-job")));
  return s;
}

const std::string kSample = SAMPLE_SWF;
// Textbook EASY, requested times as estimates: the name alone.
const std::string kEasy = " --policy easy";
// Grid Engine's reserve policy, jobs of >= 3 processors submitted -R y (job 3).
const std::string kReserve = " --policy reserve --reserve-min-procs 3";

// The schedule file (--monitor) of the sample under EASY on one node of 4
// cores (one Q line a job: all.q@n0), worked out by hand. Passes run at the
// instants where jobs are pending (completions, then arrivals, then the
// pass). Each interval begins with "::::::::" (sge6-reservation-backfill.txt
// 2d); a last one closes the file, as in the specification's example.
// Durations are the requested times.
//   t=0   job 1 starts now (2 of 4 cores)                     STARTING
//   t=10  job 3 (the head) needs 4: reserved at 100, when job 1 ends
//                                                             RESERVING
//   t=20  job 4 ends at 50, before 100: starts (backfill)     STARTING
//   t=50  job 4 ended; job 3 still reserved
//   t=60  job 5 (1 core until 260) would overlap job 3's 4 cores at
//         100..150: not started, and no line (only the head is reserved)
//   t=100 job 1 ended: job 3 starts                           STARTING
//         job 5 is the head now: reserved at 150              RESERVING
//   t=150 job 3 ended: job 5 starts                           STARTING
//   t=350 job 5 ends: nothing pending, no pass.
// Job ids are the trace's (the replay numbers the 4 jobs 1..4).
const char* const kExpected =
    "::::::::\n"
    "1:1:STARTING:0:100:Q:all.q@n0:slots:2.000000\n"
    "::::::::\n"
    "1:1:RUNNING:0:100:Q:all.q@n0:slots:2.000000\n"
    "3:1:RESERVING:100:50:Q:all.q@n0:slots:4.000000\n"
    "::::::::\n"
    "1:1:RUNNING:0:100:Q:all.q@n0:slots:2.000000\n"
    "3:1:RESERVING:100:50:Q:all.q@n0:slots:4.000000\n"
    "4:1:STARTING:20:30:Q:all.q@n0:slots:2.000000\n"
    "::::::::\n"
    "1:1:RUNNING:0:100:Q:all.q@n0:slots:2.000000\n"
    "3:1:RESERVING:100:50:Q:all.q@n0:slots:4.000000\n"
    "::::::::\n"
    "1:1:RUNNING:0:100:Q:all.q@n0:slots:2.000000\n"
    "3:1:RESERVING:100:50:Q:all.q@n0:slots:4.000000\n"
    "::::::::\n"
    "3:1:STARTING:100:50:Q:all.q@n0:slots:4.000000\n"
    "5:1:RESERVING:150:200:Q:all.q@n0:slots:1.000000\n"
    "::::::::\n"
    "5:1:STARTING:150:200:Q:all.q@n0:slots:1.000000\n"
    "::::::::\n";

}  // namespace

// ------------------------------------------------------------------ JSON --

TEST_CASE("corral sim prints every key of the issue, values as worked out by hand", "[cli]") {
  // EASY on the sample: t=0 job 1 starts (2 free). t=10 job 3 (4 procs)
  // is the blocked head: shadow time 100 (job 1's end), extra 0. t=20 job
  // 4 ends at 50 <= 100: backfilled. t=60 job 5 would end at 260 > 100 and
  // needs 1 > extra 0: waits. t=100 job 3 starts (ends 150); t=150 job 5
  // (ends 350).
  //   jobs 4 (job 2 skipped); waits 0, 90, 0, 90: mean 45, max 90;
  //   makespan 350 - 0; utilization (2*100 + 4*50 + 2*30 + 1*200) / (4*350)
  //   = 660/1400 = 0.471429; bounded slowdowns 1, (150-10)/50 = 2.8, 1,
  //   (350-60)/200 = 1.45: mean 6.25/4 = 1.5625; no preemption, no checkpoint.
  const Run r = corral_sim(kSample + kEasy);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(value_of(r.out, "jobs") == "4");
  CHECK(value_of(r.out, "skipped") == "1");
  CHECK(value_of(r.out, "utilization") == "0.471429");
  CHECK(value_of(r.out, "mean_wait") == "45");
  CHECK(value_of(r.out, "max_wait") == "90");
  CHECK(value_of(r.out, "mean_bsld") == "1.5625");
  CHECK(value_of(r.out, "makespan") == "350");
  CHECK(value_of(r.out, "preemptions") == "0");
  CHECK(value_of(r.out, "checkpoints") == "0");
  CHECK(r.out.front() == '{');
  CHECK(r.out.substr(r.out.size() - 2) == "}\n");
}

TEST_CASE("corral sim --starts writes id,start lines; --gantt draws only the jobs in --from..--to", "[cli]") {
  TempDir tmp;
  const Run r = corral_sim(kSample + kEasy + " --starts " + (tmp / "starts.csv") + " --gantt " + (tmp / "a.svg") +
                           " --from 0 --to 90");
  INFO(r.err);
  REQUIRE(r.code == 0);
  // Trace order (submit, id), trace ids; the skipped job 2 is not there.
  CHECK(slurp(tmp / "starts.csv") == "1,0\n3,100\n4,20\n5,150\n");
  // [0, 90): job 1 (0..100) and job 4 (20..50) only.
  CHECK(drawn_jobs(slurp(tmp / "a.svg")) == std::set<JobId>{1, 4});
  // [120, 200): job 3 (100..150) and job 5 (150..350) only.
  REQUIRE(corral_sim(kSample + kEasy + " --gantt " + (tmp / "b.svg") + " --from 2m --to 200").code == 0);
  CHECK(drawn_jobs(slurp(tmp / "b.svg")) == std::set<JobId>{3, 5});
}

// A 2-processor machine, three jobs of 2 processors: 1 runs 0..100, then
// sjf serves the short job 3 (10 s) before the long job 2 (500 s) unless
// job 2 has aged by t=100.
const char* const kThree =
    "; MaxProcs: 2\n"
    "1  0 -1 100 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1\n"
    "2 10 -1 500 2 -1 -1 2 500 -1 1 2 1 -1 1 -1 -1 -1\n"
    "3 20 -1  10 2 -1 -1 2  10 -1 1 3 1 -1 1 -1 -1 -1\n";

TEST_CASE("corral sim --oracle-starts ages a job after its wait in another run", "[cli][oracle]") {
  TempDir tmp;
  std::ofstream(tmp / "three.swf") << kThree;
  const std::string sjf = " " + (tmp / "three.swf") + " --policy easy --order sjf --aging 1000 --starts " + (tmp / "s.csv");
  auto starts = [&](const std::string& ref, const std::string& opts) {
    std::ofstream(tmp / "ref.csv") << ref;
    const Run r = corral_sim(sjf + " --oracle-starts " + (tmp / "ref.csv") + opts);
    INFO(r.err);
    REQUIRE(r.code == 0);
    return slurp(tmp / "s.csv");
  };
  const std::string short_first = "1,0\n2,110\n3,100\n", long_first = "1,0\n2,100\n3,600\n";
  REQUIRE(corral_sim(sjf).code == 0);
  CHECK(slurp(tmp / "s.csv") == short_first);
  CHECK(starts("2,10\n", "") == long_first);                          // waited 0: aged at 10
  CHECK(starts("2,10\n", " --oracle-min-wait 1") == short_first);    // too short a wait to count
  CHECK(starts("2,210\n", "") == short_first);                       // ages at 210, after t=100
  CHECK(starts("2,210\n", " --oracle-fraction 0.25") == long_first); // ages at 10 + 50 = 60
  CHECK(starts("1,0\n3,-1\n9,5\n", "") == short_first);            // other jobs, never started, unknown
  const Run r = corral_sim(sjf + " --oracle-starts " + (tmp / "ref.csv") + " --oracle-fraction 0.5 --oracle-min-wait 1m");
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["oracle_starts"] == tmp / "ref.csv");
  CHECK(j["oracle_fraction"] == 0.5);
  CHECK(j["oracle_min_wait"] == 60);
  CHECK_FALSE(nlohmann::json::parse(corral_sim(sjf).out).contains("oracle_starts"));
  // Bad input: refused with the file and line, nothing run.
  auto refused = [&](const std::string& ref, const std::string& opts, const std::string& why) {
    std::ofstream(tmp / "ref.csv") << ref;
    const Run bad = corral_sim(sjf + opts);
    INFO(bad.err);
    CHECK(bad.code == 2);
    CHECK(bad.out.empty());
    CHECK(bad.err.find(why) != std::string::npos);
  };
  const std::string ref = " --oracle-starts " + (tmp / "ref.csv");
  refused("2,10\nx\n", ref, "ref.csv:2: expected 'id,start'");
  refused("2,10\n2,30\n", ref, "ref.csv:2: job 2 given twice");
  refused("2,-5\n", ref, "ref.csv:1: expected 'id,start'");
  refused("", " --oracle-starts " + (tmp / "none.csv"), "cannot read");
  refused("", " --oracle-fraction 2", "--oracle-fraction needs --oracle-starts FILE");
  refused("", ref + " --oracle-fraction -1", "--oracle-fraction: '-1' is not a number in [0, 1000]");
  // Job::age_at counts only where jobs age: textbook EASY has no aging.
  std::ofstream(tmp / "ref.csv") << "2,10\n";
  const Run no_aging = corral_sim(" " + (tmp / "three.swf") + " --policy easy" + ref);
  CHECK(no_aging.code == 2);
  CHECK(no_aging.err.find("--oracle-starts needs aging") != std::string::npos);
}

// --------------------------------------------------------------- MONITOR --

TEST_CASE("corral sim --monitor writes the schedule file line for line", "[cli][monitor]") {
  TempDir tmp;
  const Run r = corral_sim(kSample + kEasy + " --nodes 1 --cores 4 --monitor " + (tmp / "schedule") + " --starts " +
                           (tmp / "starts.csv"));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::vector<std::string> got = lines_of(slurp(tmp / "schedule")), want = lines_of(kExpected);
  CHECK(got.size() == want.size());
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    INFO("line " << i + 1);
    CHECK(got[i] == want[i]);
  }
  CHECK(slurp(tmp / "schedule") == kExpected);
  CHECK(value_of(r.out, "passes") == "7");
  // Monitoring changes no decision.
  CHECK(slurp(tmp / "starts.csv") == "1,0\n3,100\n4,20\n5,150\n");
}

TEST_CASE("corral sim --monitor: an unwritable file is refused at once with exit code 2", "[cli][monitor]") {
  TempDir tmp;
  Run r = corral_sim(kSample + " --monitor " + (tmp / "no/such/dir/schedule"));
  CHECK(r.code == 2);
  CHECK(r.err.find("--monitor: cannot write '" + (tmp / "no/such/dir/schedule") + "'") != std::string::npos);
  CHECK(r.out.empty());  // refused before the replay
  r = corral_sim(kSample + " --monitor " + tmp.path);  // a directory
  CHECK(r.code == 2);
  CHECK(r.err.find("cannot write") != std::string::npos);
  r = corral_sim(kSample + " --monitor");
  CHECK(r.code == 2);
  CHECK(r.err.find("--monitor needs a value") != std::string::npos);
}

TEST_CASE("sim on_monitor: one block per pass, trace ids, the same schedule as without", "[cli][monitor]") {
  SwfTrace tr = read_swf(kSample);
  REQUIRE(tr.jobs.size() == 4);
  SimOptions opt;  // fifo, requested times, EASY
  opt.nodes = 1;
  opt.cores = 4;
  std::vector<std::vector<std::string>> blocks;
  opt.on_monitor = [&](const std::vector<std::string>& l) { blocks.push_back(l); };
  const SimResult r = simulate(tr, opt);
  REQUIRE(blocks.size() == r.passes);
  REQUIRE(blocks.size() == 7);  // t = 0, 10, 20, 50, 60, 100, 150
  for (const auto& b : blocks) {
    REQUIRE(!b.empty());
    CHECK(b.front() == "::::::::");
  }
  // Under EASY job 3 is the head: reserved (cores planned at 100).
  CHECK(blocks[1] == std::vector<std::string>{"::::::::", "1:1:RUNNING:0:100:Q:all.q@n0:slots:2.000000",
                                              "3:1:RESERVING:100:50:Q:all.q@n0:slots:4.000000"});
  CHECK(blocks[6] == std::vector<std::string>{"::::::::", "5:1:STARTING:150:200:Q:all.q@n0:slots:1.000000"});
  opt.on_monitor = nullptr;
  CHECK(starts_csv(simulate(tr, opt)) == starts_csv(r));

  // On a real trace too: monitoring (fast paths off) changes no start under
  // any policy, reservations included. MONITOR only observes: a cores-only
  // reservation is not pinned to the hosts its RESERVING lines name
  // (planner.cpp monitor()); when it pinned them, a backfill needed hosts
  // outside the pins and lublin's first differing start was job 53 (easy).
  std::string why;
  const std::string lublin_path = corral_test::trace("lublin_256.swf", &why);
  if (lublin_path.empty()) {
    CORRAL_SKIP(why);
    return;
  }
  SwfTrace lublin = read_swf(lublin_path);
  for (Backfill bf : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative, Backfill::Reserve}) {
    SimOptions o;
    o.max_jobs = 300;
    o.sched.planner.backfill = bf;
    // reserve: every job of 16 procs or more asks for a reservation (-R y).
    if (bf == Backfill::Reserve) o.on_arrival = [](Job& j, const SwfJob& sj) { j.reserve = sj.procs >= 16; };
    const std::string plain = starts_csv(simulate(lublin, o));
    std::size_t lines = 0, seps = 0, reserving = 0, shown = 0;
    o.on_monitor = [&](const std::vector<std::string>& l) {
      lines += l.size();
      for (const std::string& x : l) {
        seps += x == "::::::::";
        if (x.find(":RESERVING:") != std::string::npos) {
          ++reserving;
          shown += x.find(":Q:all.q@") != std::string::npos;
        }
      }
    };
    const SimResult m = simulate(lublin, o);
    INFO(name(bf));
    CHECK(starts_csv(m) == plain);
    CHECK(seps == m.passes);
    CHECK(lines > seps);
    // Reservations were made and shown on hosts (fcfs makes none).
    if (bf == Backfill::Fcfs) {
      CHECK(reserving == 0);
    } else {
      CHECK(reserving > 100);
      CHECK(shown == reserving);
    }
  }
}

TEST_CASE("monitor_trace_ids maps the replay's ids to the trace's, separators kept", "[cli][monitor]") {
  SwfTrace tr;
  tr.jobs.resize(2);
  tr.jobs[0].id = 7;
  tr.jobs[1].id = 12345;
  std::vector<std::string> l = {"::::::::", "1:1:RUNNING:0:5:Q:all.q@n0:slots:1.000000",
                                "2:1:RESERVING:9:5:G:global:lic:2.000000", "3:1:STARTING:0:1:Q:q@n:slots:1.000000"};
  monitor_trace_ids(l, tr);
  CHECK(l[0] == "::::::::");
  CHECK(l[1] == "7:1:RUNNING:0:5:Q:all.q@n0:slots:1.000000");
  CHECK(l[2] == "12345:1:RESERVING:9:5:G:global:lic:2.000000");
  CHECK(l[3] == "3:1:STARTING:0:1:Q:q@n:slots:1.000000");  // no such replay job: left alone
}

// ------------------------------------------- max_reservation, -R y, default_duration --

TEST_CASE("corral sim --max-reservation 0 vs 1 changes the schedule of -R y jobs", "[cli][reserve]") {
  TempDir tmp;
  // max_reservation 1: job 3 (-R y) is reserved at 100, job 5 waits for it
  // (see the MONITOR test): starts 0, 100, 20, 150.
  Run r = corral_sim(kSample + kReserve + " --max-reservation 1 --starts " + (tmp / "one.csv"));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(value_of(r.out, "max_reservation") == "1");
  CHECK(value_of(r.out, "reserve_min_procs") == "3");
  CHECK(slurp(tmp / "one.csv") == "1,0\n3,100\n4,20\n5,150\n");
  // Its schedule file is EASY's but for job 5's reservation at t=100 (job
  // 5 is -R n here; EASY reserves for whichever job heads the queue).
  r = corral_sim(kSample + kReserve + " --max-reservation 1 --nodes 1 --cores 4 --monitor " + (tmp / "one.sched"));
  REQUIRE(r.code == 0);
  std::string easy = kExpected;
  const std::string five = "5:1:RESERVING:150:200:Q:all.q@n0:slots:1.000000\n";
  REQUIRE(easy.find(five) != std::string::npos);
  CHECK(slurp(tmp / "one.sched") == easy.erase(easy.find(five), five.size()));
  // max_reservation 0: no reservation, every job that fits starts. t=60 job
  // 5 takes a free core until 260; at 100 only 3 cores are free, so job 3
  // starts when job 5 ends: starts 0, 260, 20, 60.
  r = corral_sim(kSample + kReserve + " --max-reservation 0 --starts " + (tmp / "zero.csv"));
  REQUIRE(r.code == 0);
  CHECK(slurp(tmp / "zero.csv") == "1,0\n3,260\n4,20\n5,60\n");
  CHECK(value_of(r.out, "max_wait") == "250");
  r = corral_sim(kSample + kReserve + " --max-reservation 0 --nodes 1 --cores 4 --monitor " + (tmp / "zero.sched"));
  REQUIRE(r.code == 0);
  const std::string zero = slurp(tmp / "zero.sched");
  CHECK(zero.find("RESERVING") == std::string::npos);
  CHECK(zero.find("5:1:STARTING:60:200:Q:all.q@n0:slots:1.000000\n") != std::string::npos);
  // No job -R y (Grid Engine's default -R n): as with max_reservation 0.
  r = corral_sim(kSample + " --policy reserve --starts " + (tmp / "none.csv"));
  REQUIRE(r.code == 0);
  CHECK(slurp(tmp / "none.csv") == "1,0\n3,260\n4,20\n5,60\n");
  // --reserve-all: job 3 -R y as well (jobs 1, 4 start at once, job 5 is
  // not reserved past the one reservation): as with --reserve-min-procs 3.
  r = corral_sim(kSample + " --policy reserve --reserve-all --starts " +
                 (tmp / "all.csv"));
  REQUIRE(r.code == 0);
  CHECK(slurp(tmp / "all.csv") == "1,0\n3,100\n4,20\n5,150\n");
  // There job 5 is reserved at t=100 as under EASY: the same file.
  r = corral_sim(kSample + " --policy reserve --reserve-all --nodes 1 --cores 4 --monitor " +
                 (tmp / "all.sched"));
  REQUIRE(r.code == 0);
  CHECK(slurp(tmp / "all.sched") == kExpected);
}

TEST_CASE("corral sim --default-duration plans jobs without a requested time with it", "[cli][reserve]") {
  // EASY on 4 processors; job 1 gives no requested time (SWF field 9 = -1).
  //   job 1: submit  0, 2 procs, run 100, no request
  //   job 2: submit 10, 4 procs, run  50
  //   job 3: submit 20, 2 procs, run 150
  // SWF convention (estimate = run time 100): job 2's shadow time is 100,
  // job 3 (ends 170) cannot backfill: starts 0, 100, 150.
  // --default-duration 1000: job 1 is planned until 1000, job 3 backfills
  // at 20 (ends 170 <= 1000); job 1 really ends at 100 (the duration is not
  // enforced), job 2 starts when job 3 ends: starts 0, 170, 20.
  TempDir tmp;
  std::ofstream(tmp / "t.swf") << "; MaxProcs: 4\n"
                               << "1  0 -1 100 2 -1 -1 2  -1 -1 1 1 1 -1 1 -1 -1 -1\n"
                               << "2 10 -1  50 4 -1 -1 4  50 -1 1 2 1 -1 1 -1 -1 -1\n"
                               << "3 20 -1 150 2 -1 -1 2 150 -1 1 3 1 -1 1 -1 -1 -1\n";
  Run r = corral_sim((tmp / "t.swf") + kEasy + " --starts " + (tmp / "conv.csv"));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(slurp(tmp / "conv.csv") == "1,0\n2,100\n3,150\n");
  CHECK(value_of(r.out, "default_duration") == "(absent)");
  r = corral_sim((tmp / "t.swf") + kEasy + " --default-duration 1000 --starts " + (tmp / "dd.csv"));
  REQUIRE(r.code == 0);
  CHECK(slurp(tmp / "dd.csv") == "1,0\n2,170\n3,20\n");
  CHECK(value_of(r.out, "default_duration") == "1000");
  // The sample's jobs all give a requested time: nothing changes.
  r = corral_sim(kSample + kEasy + " --default-duration 1h --starts " + (tmp / "s.csv"));
  REQUIRE(r.code == 0);
  CHECK(slurp(tmp / "s.csv") == "1,0\n3,100\n4,20\n5,150\n");
}

TEST_CASE("corral sim: bad --max-reservation, --reserve-*, --default-duration, names, options are refused, exit 2", "[cli][reserve]") {
  struct Case {
    const char* args;
    const char* says;
  };
  const Case cases[] = {
      {" --policy reserve --max-reservation -1", "--max-reservation: '-1' is not a whole number in [0, 1048576]"},
      {" --policy reserve --max-reservation many", "--max-reservation: 'many' is not a whole number"},
      {" --policy reserve --max-reservation", "--max-reservation needs a value"},
      {" --aging 5 --aging 0", "--aging given more than once"},
      {" --policy easy --max-reservation 2", "--max-reservation needs --policy reserve"},
      {" --max-reservation 2", "--max-reservation needs --policy reserve"},
      {" --policy reserve --reserve-min-procs 0", "--reserve-min-procs: '0' is not a whole number in [1, "},
      {" --policy conservative --reserve-min-procs 4", "--reserve-min-procs needs --policy reserve"},
      {" --reserve-all", "--reserve-all needs --policy reserve"},
      {" --policy reserve --reserve-all=yes", "--reserve-all takes no value"},
      {" --policy reserve --reserve-all --reserve-min-procs 2", "either --reserve-all or --reserve-min-procs N"},
      {" --default-duration 0", "--default-duration: must be at least 1 s"},
      {" --default-duration soon", "--default-duration: expected a duration (3600, 90s, 30m, 12h, 7d or 2w), got 'soon'"},
      {" --default-duration -5m", "--default-duration: expected a duration"},
      // Names and durations: what is valid is named.
      {" --policy magic", "--policy: unknown policy 'magic' (fcfs, easy, conservative, reserve, checkpoint, corral)"},
      {" --order random", "--order: unknown order 'random' (fifo, sjf, saf, wfp3, lxf, sjbf, lxbf)"},
      {" --aging 2y", "--aging: expected a duration (3600, 90s, 30m, 12h, 7d or 2w), got '2y'"},
      {" --scout-min 1", "--scout-min: '1' is not a whole number in [2, 1048576]"},
      {" --bogus", "unknown option '--bogus'"},
      {" --predict=yes", "--predict takes no value"},
      {" extra.swf", "unexpected argument 'extra.swf'"},
  };
  for (const Case& c : cases) {
    const Run r = corral_sim(kSample + c.args);
    INFO(c.args << " -> " << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find(c.says) != std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("corral sim: --policy easy alone is textbook EASY; corral is the default and says so", "[cli]") {
  TempDir tmp;
  // The bare name gives the schedule of EASY spelled out in full.
  Run r = corral_sim(kSample + " --policy easy --starts " + (tmp / "bare.csv"));
  REQUIRE(r.code == 0);
  const auto bare = nlohmann::json::parse(r.out);
  CHECK(bare["policy"] == "easy");
  CHECK(bare["order"] == "fifo");
  CHECK(bare["aging"] == 0);
  CHECK(bare["aged_ahead"] == 0);
  CHECK(bare["predict"] == false);
  CHECK(bare["repredict"] == false);
  CHECK(bare["preempt"] == false);
  CHECK(bare["reserve_depth"] == 1);
  CHECK(bare["reserve_wait"] == 0);
  CHECK(bare["predictor"] == "mean2");
  CHECK(bare["checkpointable"] == 1);
  r = corral_sim(kSample + " --policy easy --order fifo --aging 0 --no-predict --no-preempt --starts " + (tmp / "full.csv"));
  REQUIRE(r.code == 0);
  CHECK(slurp(tmp / "bare.csv") == slurp(tmp / "full.csv"));
  CHECK(slurp(tmp / "bare.csv") == "1,0\n3,100\n4,20\n5,150\n");  // the hand-worked EASY schedule
  // No --policy: Corral's setting, named.
  r = corral_sim(kSample);
  REQUIRE(r.code == 0);
  auto def = nlohmann::json::parse(r.out);
  CHECK(def["policy"] == "corral");
  CHECK(def["order"] == "lxf");
  CHECK(def["aging"] == 2 * 86400);
  CHECK(def["aging_wide"] == 0);
  CHECK(def["aged_ahead"] == 6);
  CHECK(def["predict"] == true);
  CHECK(def["predictor"] == "similar");
  CHECK(def["predict_order_only"] == true);
  CHECK(def["repredict"] == true);
  CHECK(def["preempt"] == false);
  CHECK(def["split_factor"] == 0.05);
  CHECK(def["reserve_depth"] == 3);
  CHECK(def["reserve_wait"] == 2 * 86400);
  CHECK(def["aging_factor"] == 0);
  CHECK(def["reserve_factor"] == 0);
  CHECK(def["aging_backlog"] == 0);
  CHECK(def["scout_min"] == 2);
  def.erase("sim_seconds");
  r = corral_sim(kSample + " --policy corral");
  auto named = nlohmann::json::parse(r.out);
  named.erase("sim_seconds");
  CHECK(named == def);
  // Options layer on any policy; durations in weeks too.
  r = corral_sim(kSample + " --policy easy --predict --aging 2w --aging-factor 10 --reserve-factor 5 --aging-backlog 0.5 --scout-min 20");
  REQUIRE(r.code == 0);
  const auto layered = nlohmann::json::parse(r.out);
  CHECK(layered["policy"] == "easy");
  CHECK(layered["predict"] == true);
  CHECK(layered["aging"] == 2 * 7 * 86400);
  CHECK(layered["aging_factor"] == 10);
  CHECK(layered["reserve_factor"] == 5);
  CHECK(layered["aging_backlog"] == 0.5);
  CHECK(layered["scout_min"] == 20);
  CHECK(layered["order"] == "fifo");
}

TEST_CASE("corral sim JSON: control characters in the trace name are escaped", "[cli][json]") {
  TempDir tmp;
  const std::string path = tmp / "a\tb\x01\"c.swf";
  std::ofstream(path) << slurp(kSample);
  const Run r = corral_sim("'" + path + "' --policy easy");
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (char c : r.out.substr(0, r.out.size() - 1)) CHECK(static_cast<unsigned char>(c) >= 0x20);
  CHECK(nlohmann::json::parse(r.out)["trace"] == path);
}

TEST_CASE("corral sim --help lists the new options", "[cli]") {
  const Run r = corral_sim("--help");
  REQUIRE(r.code == 0);
  for (const char* o : {"--monitor FILE", "--max-reservation N", "--reserve-min-procs N", "--reserve-all",
                        "--default-duration T", "--no-preempt-aged", "corral (the default)", "2w"})
    CHECK(r.out.find(o) != std::string::npos);
}
