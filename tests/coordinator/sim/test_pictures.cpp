// The pictures of a replay read back as SVG: the Gantt chart (axes with
// ticks in range, no two job rectangles on one processor at once, every
// job started in the range drawn on as many processors as it held,
// reservations, marks, tooltips), the timeline's series worked out by hand,
// `corral sim --gantt/--timeline` and `corral sim compare` as commands
// (KTH-SP2's second day: SKIP without the trace), and every picture
// rendered with rsvg-convert (SKIP where it is not installed).
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "coordinator/sim/pictures/gantt.hpp"
#include "coordinator/sim/pictures/series.hpp"
#include "coordinator/sim/sim.hpp"
#include "tests/coordinator/sim/png_read.hpp"
#include <nlohmann/json.hpp>

#include "tests/coordinator/sim/run_corral.hpp"
#include "tests/coordinator/sim/svg_read.hpp"
#include "tests/skip.hpp"

using namespace corral;
using namespace corral::sim;
using corral_test::Element;
using corral_test::read_svg;

namespace {

const std::string kSample = SAMPLE_SWF;
const std::string kKth = std::string(CORRAL_TRACES) + "/KTH-SP2-1996-2.1-cln.swf";
const std::string kEasy = " --policy easy --order fifo --no-predict --aging 0";

bool exists(const std::string& path) { return std::ifstream(path).good(); }

// The enclosing element of class `cls` of element i (-1: none).
int ancestor(const std::vector<Element>& els, int i, const std::string& cls) {
  for (int p = els[static_cast<std::size_t>(i)].parent; p >= 0; p = els[static_cast<std::size_t>(p)].parent)
    if (els[static_cast<std::size_t>(p)].is(cls)) return p;
  return -1;
}

// The axis of class `cls` with its tick values; the ticks must lie in its range.
std::vector<double> axis_ticks(const std::vector<Element>& els, const std::string& cls, double lo, double hi) {
  int axis = -1;
  for (std::size_t i = 0; i < els.size(); ++i)
    if (els[i].is("axis") && els[i].is(cls)) axis = static_cast<int>(i);
  REQUIRE(axis >= 0);
  const Element& a = els[static_cast<std::size_t>(axis)];
  CHECK(a.num("data-min") == Approx(lo));
  CHECK(a.num("data-max") == Approx(hi));
  std::vector<double> ticks;
  for (std::size_t i = 0; i < els.size(); ++i)
    if (els[i].is("tick") && els[i].parent == axis) {
      const double v = els[i].num("data-value");
      CHECK(v >= lo - 1e-6);
      CHECK(v <= hi + 1e-6);
      ticks.push_back(v);
    }
  return ticks;
}

struct Drawn {
  std::map<JobId, int> procs;             // processors a drawn run covers, by job (runs summed)
  std::map<JobId, std::set<int>> rows;    // rows each job covers
  std::size_t rects = 0;
};

// The Gantt chart's checks: both axes with ticks in range, job rectangles
// that never overlap (as drawn, and per processor row in trace seconds),
// each run drawn on exactly the processors it held.
Drawn check_gantt(const std::string& svg, Time from, Time to, int procs) {
  const std::vector<Element> els = read_svg(svg);
  CHECK(axis_ticks(els, "x-axis", static_cast<double>(from), static_cast<double>(to)).size() >= 3);
  CHECK(!axis_ticks(els, "y-axis", 0, procs).empty());
  struct Box {
    double x, y, w, h;
    JobId job;
  };
  std::vector<Box> boxes;
  std::map<int, std::vector<std::pair<Time, Time>>> per_row;
  std::map<int, int> covered;  // rows a job group's rectangles cover, by group
  Drawn d;
  for (std::size_t i = 0; i < els.size(); ++i) {
    const Element& e = els[i];
    if (!e.is("job-run")) continue;
    const int g = ancestor(els, static_cast<int>(i), "job");
    REQUIRE(g >= 0);
    const Element& grp = els[static_cast<std::size_t>(g)];
    const JobId id = static_cast<JobId>(grp.num("data-job"));
    boxes.push_back({e.num("x"), e.num("y"), e.num("width"), e.num("height"), id});
    const int row = static_cast<int>(e.num("data-row")), n = static_cast<int>(e.num("data-rows"));
    CHECK(row >= 0);
    CHECK(row + n <= procs);
    for (int k = row; k < row + n; ++k) {
      per_row[k].push_back({static_cast<Time>(grp.num("data-start")), static_cast<Time>(grp.num("data-end"))});
      d.rows[id].insert(k);
    }
    covered[g] += n;
    ++d.rects;
  }
  for (const auto& [g, n] : covered) {
    const Element& grp = els[static_cast<std::size_t>(g)];
    INFO("job " << grp.get("data-job"));
    CHECK(n == static_cast<int>(grp.num("data-procs")));
    d.procs[static_cast<JobId>(grp.num("data-job"))] += n;
  }
  for (auto& [row, v] : per_row) {
    std::sort(v.begin(), v.end());
    for (std::size_t k = 1; k < v.size(); ++k) {
      INFO("row " << row << ": " << v[k - 1].first << ".." << v[k - 1].second << " and " << v[k].first << ".."
                  << v[k].second);
      CHECK(v[k].first >= v[k - 1].second);
    }
  }
  std::size_t overlaps = 0;
  for (std::size_t a = 0; a < boxes.size(); ++a)
    for (std::size_t b = a + 1; b < boxes.size(); ++b) {
      const Box &p = boxes[a], &q = boxes[b];
      const double ox = std::min(p.x + p.w, q.x + q.w) - std::max(p.x, q.x);
      const double oy = std::min(p.y + p.h, q.y + q.h) - std::max(p.y, q.y);
      if (ox > 0.01 && oy > 0.01) {
        ++overlaps;
        UNSCOPED_INFO("jobs " << p.job << " and " << q.job << " overlap at x " << p.x << ", y " << p.y);
      }
    }
  CHECK(overlaps == 0);
  return d;
}

SimOptions easy_options() {
  SimOptions opt;
  opt.sched.planner.backfill = Backfill::Easy;
  opt.sched.order.policy = Order::Fifo;
  opt.record_segments = true;
  return opt;
}

// The text of the <title> of the element with class `cls` and data-job id.
std::string tooltip_of(const std::vector<Element>& els, const std::string& cls, JobId id) {
  for (std::size_t i = 0; i < els.size(); ++i)
    if (els[i].tag == "title" && els[i].parent >= 0) {
      const Element& p = els[static_cast<std::size_t>(els[i].parent)];
      if (p.is(cls) && p.get("data-job") == std::to_string(id)) return els[i].text;
    }
  return "";
}

std::set<JobId> jobs_of_class(const std::vector<Element>& els, const std::string& cls) {
  std::set<JobId> s;
  for (const Element& e : els)
    if (e.is(cls)) s.insert(static_cast<JobId>(e.num("data-job")));
  return s;
}

}  // namespace

// --------------------------------------------------------------- Gantt --

// The sample under EASY (tests/coordinator/sim/test_cli.cpp works it out):
// job 3 (the head from t=10) is reserved at 100 and starts there; job 5 is
// the head from 100, reserved at 150 and starts there; job 4 is backfilled
// (no reservation); job 1 started at once.
TEST_CASE("gantt: the sample under EASY: axes, every job on its processors, reservations, tooltips", "[pictures]") {
  const SwfTrace t = read_swf(kSample);
  const SimResult r = simulate(t, easy_options());
  GanttOptions g;
  g.to = 400;
  g.title = "sample";
  const std::string svg = gantt_svg(r, g);
  const Drawn d = check_gantt(svg, 0, 400, 4);
  CHECK(d.procs == std::map<JobId, int>{{1, 2}, {3, 4}, {4, 2}, {5, 1}});
  const std::vector<Element> els = read_svg(svg);
  CHECK(jobs_of_class(els, "reservation") == std::set<JobId>{3, 5});
  const std::string tip = tooltip_of(els, "job", 3);
  CHECK(tip.find("job 3, user 2, 4 procs on n0-n3") != std::string::npos);
  CHECK(tip.find("submit 00:00:10, start 00:01:40, end 00:02:30") != std::string::npos);
  CHECK(tip.find("wait 1m 30s") != std::string::npos);
  CHECK(tip.find("reserved to start at 00:01:40") != std::string::npos);
  CHECK(tooltip_of(els, "reservation", 5).find("reserved from 00:02:30") != std::string::npos);
  // The range and the absolute time (unknown here: trace seconds) in the title.
  CHECK(svg.find("from 0 to 6m 40s after the trace's first submit (trace seconds 0 to 400)") != std::string::npos);
}

TEST_CASE("gantt: a job on hosts that are not contiguous is drawn on each of them", "[pictures]") {
  const SwfTrace t = parse_swf("; MaxProcs: 4\n1 0 -1 100 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1\n"
                               "2 0 -1 100 2 -1 -1 2 100 -1 1 2 1 -1 1 -1 -1 -1\n");
  SimOptions opt;
  opt.record_segments = true;
  // Job 1 on hosts 0 and 2, job 2 on 1 and 3.
  opt.scheduler = [](const Snapshot& s, const SchedConfig&, std::uint64_t) {
    Plan p;
    for (const Job& j : s.pending) {
      const std::uint32_t a = j.id == 1 ? 0 : 1;
      Decision dec;
      dec.action = Action::Start;
      dec.job = j.id;
      dec.at = s.now;
      dec.slots = 2;
      dec.placement = {Placement{a, 1, {}, 1}, Placement{a + 2, 1, {}, 1}};
      p.decisions.push_back(dec);
    }
    return p;
  };
  const SimResult r = simulate(t, opt);
  GanttOptions g;
  g.to = 200;
  const Drawn d = check_gantt(gantt_svg(r, g), 0, 200, 4);
  CHECK(d.rects == 4);
  CHECK(d.rows.at(1) == std::set<int>{0, 2});
  CHECK(d.rows.at(2) == std::set<int>{1, 3});
}

TEST_CASE("gantt: checkpoints and preemptions are marked where the run stopped", "[pictures]") {
  const SwfTrace t = parse_swf("; MaxProcs: 4\n1 0 -1 500 4 -1 -1 4 500 -1 1 1 1 -1 1 -1 -1 -1\n"
                               "2 50 -1 100 4 -1 -1 4 100 -1 1 2 1 -1 1 -1 -1 -1\n");
  for (const Action how : {Action::Checkpoint, Action::Requeue}) {
    SimOptions opt;
    opt.record_segments = true;
    opt.checkpoint_cost = 0;
    // Job 1 starts; job 2's arrival at 50 stops it; then whatever waits starts.
    opt.scheduler = [how](const Snapshot& s, const SchedConfig&, std::uint64_t) {
      Plan p;
      if (s.now == 50 && !s.running.empty()) {
        p.decisions.push_back({how, 1, s.now, 0, {}, {}, {}});
        p.decisions.push_back({Action::Start, 2, s.now, 4, {Placement{0, 1, {}, 4}}, {}, {}});
        return p;
      }
      if (s.running.empty() && !s.pending.empty())
        p.decisions.push_back({Action::Start, s.pending.front().id, s.now, 4, {Placement{0, 1, {}, 4}}, {}, {}});
      return p;
    };
    const SimResult r = simulate(t, opt);
    GanttOptions g;
    g.to = 1000;
    const std::string svg = gantt_svg(r, g);
    check_gantt(svg, 0, 1000, 4);
    const std::vector<Element> els = read_svg(svg);
    const bool ckpt = how == Action::Checkpoint;
    CHECK(jobs_of_class(els, "checkpoint") == (ckpt ? std::set<JobId>{1} : std::set<JobId>{}));
    CHECK(jobs_of_class(els, "preemption") == (ckpt ? std::set<JobId>{} : std::set<JobId>{1}));
    CHECK(tooltip_of(els, "job", 1).find(ckpt ? "ended by a checkpoint" : "ended by a preemption") != std::string::npos);
  }
}

TEST_CASE("gantt: hosts of several cores: runs never share a core, every run on its procs", "[pictures]") {
  const std::string lublin = std::string(CORRAL_TRACES) + "/lublin_256.swf";
  if (!exists(lublin)) {
    CORRAL_SKIP("no " + lublin);
    return;
  }
  const SwfTrace t = read_swf(lublin);
  for (const Backfill b : {Backfill::Easy, Backfill::Checkpoint}) {
    SimOptions opt;
    opt.sched.planner.backfill = b;
    opt.sched.preempt.enabled = b == Backfill::Checkpoint;
    opt.nodes = 64;
    opt.cores = 4;
    opt.max_jobs = 400;
    opt.record_segments = true;
    const SimResult r = simulate(t, opt);
    GanttOptions g;
    g.origin = t.jobs.front().submit;
    g.to = 2 * 86400;
    g.cores_per_node = 4;
    const Drawn d = check_gantt(gantt_svg(r, g), 0, 2 * 86400, 256);
    std::size_t started = 0;
    for (const JobResult& j : r.per_job)
      if (j.first_start >= g.origin && j.first_start < g.origin + g.to) {
        ++started;
        CHECK(d.procs.count(j.id) == 1);
      }
    CHECK(started > 50);
  }
}

// ------------------------------------------------------------ timeline --

TEST_CASE("timeline: busy processors and the queue, worked out by hand on the sample", "[pictures]") {
  const SimResult r = simulate(read_swf(kSample), easy_options());
  const Series s = series_of(r, 350);  // one-second bins over 0..350
  REQUIRE(s.busy.size() == 350);
  CHECK(s.bin == 1);
  CHECK(s.busy[10] == 2);   // job 1
  CHECK(s.busy[30] == 4);   // jobs 1 and 4
  CHECK(s.busy[120] == 4);  // job 3
  CHECK(s.busy[200] == 1);  // job 5
  CHECK(s.queued[5] == 0);
  CHECK(s.queued[30] == 1);  // job 3 waits 10..100
  CHECK(s.queued[70] == 2);  // and job 5 60..150
  CHECK(s.queued[120] == 1);
  CHECK(s.queued[160] == 0);
  CHECK(s.queued_ph[70] == Approx((4 * 50 + 1 * 200) / 3600.0));
  // A coarser bin is the time-weighted mean: 0..50 holds job 3's wait 10..50.
  const Series c = series_of(r, 7);
  CHECK(c.bin == 50);
  CHECK(c.queued[0] == Approx(40.0 / 50));
}

// ------------------------------------------------------------ commands --

TEST_CASE("corral sim --gantt --from 1d --to 2d on KTH-SP2: the second day, not empty", "[pictures][cli]") {
  if (!exists(kKth)) {
    CORRAL_SKIP("no " + kKth);
    return;
  }
  TempDir tmp;
  const Run r = corral_sim(kKth + kEasy + " --gantt " + (tmp / "g.svg") + " --from 1d --to 2d --starts " +
                           (tmp / "s.csv"));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string svg = slurp(tmp / "g.svg");
  const Drawn d = check_gantt(svg, 86400, 2 * 86400, 100);
  CHECK(d.rects > 20);
  // Every job that first started on the second day is drawn.
  const Time origin = read_swf(kKth).jobs.front().submit;
  std::istringstream in(slurp(tmp / "s.csv"));
  std::size_t started = 0;
  for (std::string line; std::getline(in, line);) {
    const JobId id = std::stoull(line.substr(0, line.find(',')));
    const Time start = std::stoll(line.substr(line.find(',') + 1));
    if (start < origin + 86400 || start >= origin + 2 * 86400) continue;
    ++started;
    INFO("job " << id << " started at " << start);
    CHECK(d.procs.count(id) == 1);
  }
  CHECK(started > 20);
  // The absolute time in the title: KTH's second 0 is 1996-09-23 12:00:31 UTC,
  // its first submit 599,850 s later.
  CHECK(svg.find("from 1d to 2d after the trace's first submit: 1996-10-01 10:38 UTC to 1996-10-02 10:38 UTC") !=
        std::string::npos);
}

TEST_CASE("corral sim --from/--to: durations from the first submit; bad ranges refused", "[pictures][cli]") {
  TempDir tmp;
  CHECK(corral_sim(kSample + " --gantt " + (tmp / "a.svg") + " --from 2m --to 1m").code == 2);
  CHECK(corral_sim(kSample + " --from 1d").code == 2);  // no --gantt
  CHECK(corral_sim(kSample + " --gantt " + (tmp / "a.svg") + " --from 1x").code == 2);
  const Run help = corral_sim("--help");
  CHECK(help.out.find("counted from the trace's first submit") != std::string::npos);
  CHECK(help.out.find("--timeline FILE.svg") != std::string::npos);
}

TEST_CASE("corral sim --timeline: utilization and queue with the policy in the title", "[pictures][cli]") {
  TempDir tmp;
  const Run r = corral_sim(kSample + kEasy + " --timeline " + (tmp / "t.svg"));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string svg = slurp(tmp / "t.svg");
  CHECK(svg.find("utilization and queue over time, policy easy") != std::string::npos);
  const std::vector<Element> els = read_svg(svg);
  CHECK(axis_ticks(els, "x-axis", 0, 350).size() >= 3);
  for (const char* cls : {"utilization", "queue-jobs", "queue-proc-hours"}) {
    INFO(cls);
    CHECK(std::count_if(els.begin(), els.end(), [&](const Element& e) { return e.tag == "path" && e.is(cls); }) == 1);
  }
}

TEST_CASE("corral sim compare: the table, --json with corral sim's figures, --svg; bad names refused", "[pictures][cli]") {
  TempDir tmp;
  const Run one = corral_sim(kSample + " --policy conservative");
  REQUIRE(one.code == 0);
  const Run js = corral_sim("compare " + kSample + " --policies easy,conservative --json");
  INFO(js.err);
  REQUIRE(js.code == 0);
  // The conservative entry carries the figures of `corral sim --policy conservative`.
  const nlohmann::json all = nlohmann::json::parse(js.out);
  const nlohmann::json alone = nlohmann::json::parse(one.out);
  REQUIRE(all["policies"].size() == 2);
  const nlohmann::json& cons = all["policies"][1];
  CHECK(cons["policy"] == "conservative");
  for (const char* k : {"mean_wait", "max_wait", "mean_bsld", "utilization", "checkpoints"}) {
    INFO(k);
    CHECK(cons[k].get<double>() == Approx(alone[k].get<double>()).epsilon(1e-5));
  }
  CHECK(std::count(js.out.begin(), js.out.end(), '\n') == 1);
  const Run table = corral_sim("compare " + kSample + " --policies easy,conservative --svg " + (tmp / "c.svg"));
  REQUIRE(table.code == 0);
  const std::vector<std::string> lines = lines_of(table.out);
  REQUIRE(lines.size() == 4);
  CHECK(lines[1].find("mean wait") != std::string::npos);
  CHECK(lines[2].rfind("easy ", 0) == 0);
  CHECK(lines[3].rfind("conservative ", 0) == 0);
  const std::vector<Element> els = read_svg(slurp(tmp / "c.svg"));
  CHECK(std::count_if(els.begin(), els.end(), [](const Element& e) { return e.is("bars"); }) == 5);
  CHECK(std::count_if(els.begin(), els.end(), [](const Element& e) { return e.is("bar"); }) == 10);
  CHECK(std::count_if(els.begin(), els.end(), [](const Element& e) { return e.is("timeline"); }) == 2);
  const Run bad = corral_sim("compare " + kSample + " --policies easy,magic");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("magic") != std::string::npos);
  CHECK(corral_sim("compare --policies easy").code == 2);
  CHECK(corral_sim("compare " + kSample + " --policies easy,easy").code == 2);
}

TEST_CASE("corral sim compare: bad command lines refused in corral's words", "[pictures][cli]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"compare " + kSample + " --bogus", "corral sim compare: unknown option '--bogus' (see corral sim compare --help)"},
      {"compare " + kSample + " --policies", "corral sim compare: --policies needs a value"},
      {"compare " + kSample + " --json=yes", "corral sim compare: --json takes no value"},
      {"compare " + kSample + " --svg=", "corral sim compare: --svg: empty file name"},
      {"compare " + kSample + " --policies easy,", "corral sim compare: --policies: empty name in 'easy,'"},
      {"compare " + kSample + " --policies easy,easy", "corral sim compare: --policies: 'easy' given twice"},
      {"compare " + kSample + " --nodes 0", "corral sim compare: --nodes: '0' is not a whole number in [1, 1048576]"},
      {"compare " + kSample + " other.swf", "corral sim compare: only one TRACE may be given (got '" + kSample + "' and 'other.swf')"},
      {"compare --json", "corral sim compare: missing TRACE (see corral sim compare --help)"},
  };
  for (const auto& [args, said] : cases) {
    INFO(args);
    const Run r = corral_sim(args);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == said + "\n");
  }
  const Run help = corral_sim("compare --help");
  CHECK(help.code == 0);
  CHECK(help.out.rfind("usage: corral sim compare TRACE", 0) == 0);
}

// ------------------------------------------------------------ rendering --

namespace {

bool on_path(const std::string& prog) {
  const char* path = std::getenv("PATH");
  std::istringstream in(path ? path : "");
  for (std::string dir; std::getline(in, dir, ':');)
    if (!dir.empty() && ::access((dir + "/" + prog).c_str(), X_OK) == 0) return true;
  return false;
}

// Renders svg with rsvg-convert; the PNG must have the picture's size and
// show something: at least 2 % of its pixels not white, 0.5 % coloured.
void check_renders(const TempDir& tmp, const std::string& name) {
  INFO(name);
  const std::string svg = tmp / (name + ".svg"), png = tmp / (name + ".png");
  const int st = std::system(("rsvg-convert -o '" + png + "' '" + svg + "' 2>'" + png + ".err'").c_str());
  INFO(slurp(png + ".err"));
  REQUIRE(st == 0);
  const corral_test::Image img = corral_test::read_png(slurp(png));
  const std::vector<Element> els = read_svg(slurp(svg));
  CHECK(img.width == static_cast<std::uint32_t>(els.front().num("width")));
  CHECK(img.height == static_cast<std::uint32_t>(els.front().num("height")));
  std::size_t ink = 0, colour = 0;
  for (std::size_t p = 0; p + 3 < img.rgba.size(); p += 4) {
    const int r = img.rgba[p], g = img.rgba[p + 1], b = img.rgba[p + 2], a = img.rgba[p + 3];
    if (a > 0 && (r < 240 || g < 240 || b < 240)) ++ink;
    if (a > 0 && std::max({r, g, b}) - std::min({r, g, b}) > 40) ++colour;
  }
  const double n = static_cast<double>(img.width) * img.height;
  CHECK(static_cast<double>(ink) / n > 0.02);
  CHECK(static_cast<double>(colour) / n > 0.005);
}

}  // namespace

TEST_CASE("every picture renders with rsvg-convert and is not blank", "[pictures][render]") {
  if (!on_path("rsvg-convert")) {
    CORRAL_SKIP("rsvg-convert is not installed (Debian: librsvg2-bin)");
    return;
  }
  TempDir tmp;
  REQUIRE(corral_sim(kSample + " --gantt " + (tmp / "gantt.svg") + " --to 6m --timeline " + (tmp / "timeline.svg"))
              .code == 0);
  REQUIRE(corral_sim("compare " + kSample + " --policies easy,conservative,checkpoint --svg " + (tmp / "compare.svg"))
              .code == 0);
  for (const char* name : {"gantt", "timeline", "compare"}) check_renders(tmp, name);
  if (exists(kKth)) {
    REQUIRE(corral_sim(kKth + " --gantt " + (tmp / "kth-gantt.svg") + " --from 1d --to 2d --timeline " +
                       (tmp / "kth-timeline.svg"))
                .code == 0);
    for (const char* name : {"kth-gantt", "kth-timeline"}) check_renders(tmp, name);
  }
}
