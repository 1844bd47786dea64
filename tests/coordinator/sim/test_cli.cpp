// `corral sim` as a command (issue 2): the JSON keys with values worked out
// by hand, --starts, --gantt clipping.
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
#include <sstream>
#include <string>
#include <vector>

#ifndef SAMPLE_SWF
#error "SAMPLE_SWF must name tests/coordinator/sim/data/sample.swf"
#endif

namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

// A scratch directory, removed with its files.
struct TempDir {
  std::string path;
  TempDir() {
    char d[] = "/tmp/corral-simcli-XXXXXX";
    REQUIRE(mkdtemp(d));
    path = d;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string operator/(const std::string& f) const { return path + "/" + f; }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs `corral sim ARGS`: exit code, stdout, stderr.
Run corral_sim(const std::string& args) {
  TempDir tmp;
  Run r;
  const std::string cmd = std::string(CORRAL_EXE) + " sim " + args + " 2>" + (tmp / "err");
  FILE* f = popen(cmd.c_str(), "r");
  REQUIRE(f);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int st = pclose(f);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = slurp(tmp / "err");
  return r;
}

// The raw JSON value of "key" (numbers here).
std::string value_of(const std::string& json, const std::string& key) {
  const std::string k = "\"" + key + "\": ";
  const std::size_t p = json.find(k);
  if (p == std::string::npos) return "(absent)";
  const std::size_t b = p + k.size();
  return json.substr(b, json.find_first_of(",}", b) - b);
}

const std::string kSample = SAMPLE_SWF;
// Textbook EASY, requested times as estimates.
const std::string kEasy = " --policy easy --order fifo --no-predict --aging 0";

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
  const std::string a = slurp(tmp / "a.svg");
  CHECK(a.rfind("<svg", 0) == 0);
  CHECK(a.find("t = 0 .. 90 s") != std::string::npos);
  CHECK(a.find("<title>job 1: 0..100, 2 procs</title>") != std::string::npos);
  CHECK(a.find("<title>job 4: 20..50, 2 procs</title>") != std::string::npos);
  CHECK(a.find("job 3:") == std::string::npos);
  CHECK(a.find("job 5:") == std::string::npos);
  // [120, 200): job 3 (100..150) and job 5 (150..350) only.
  REQUIRE(corral_sim(kSample + kEasy + " --gantt " + (tmp / "b.svg") + " --from 2m --to 200").code == 0);
  const std::string b = slurp(tmp / "b.svg");
  CHECK(b.find("<title>job 3: 100..150, 4 procs</title>") != std::string::npos);
  CHECK(b.find("<title>job 5: 150..350, 1 procs</title>") != std::string::npos);
  CHECK(b.find("job 1:") == std::string::npos);
  CHECK(b.find("job 4:") == std::string::npos);
}
