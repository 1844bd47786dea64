// What a big job array costs corrald, against the same work as separate jobs (the only way before
// arrays): the submit's wall time, the journal's size once it is accepted, and the standalone
// scheduling pass while it is queued. corrald runs --standalone on an emulated 64-core node (no
// root); every task is a timer longer than the bench, so the queue stays full. Pass times are
// corrald's own (its CORRAL_TRACE "schedule N ms" lines, every pass for `--watch` seconds after the
// submit). Prints one JSON object.
//   build/bench/arrays/bench_arrays --corrald build/agent/corrald [--tasks 100000] [--mode array|jobs]
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "bench/mesh_procs.hpp"

using corral::bench::Conn;
namespace proto = corral::proto;
namespace bench = corral::bench;

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

long file_size(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long>(st.st_size) : -1;
}

// corrald's pass times (ms) from its log's trace lines.
std::vector<double> pass_times(const std::string& log) {
  std::ifstream in(log);
  std::vector<double> out;
  const std::string key = "trace: schedule ";
  for (std::string line; std::getline(in, line);)
    if (auto at = line.find(key); at != std::string::npos) out.push_back(std::atof(line.c_str() + at + key.size()));
  return out;
}

struct Options {
  std::string corrald = "build/agent/corrald", mode = "array";
  long tasks = 100000;
  double watch = 5;
};

// Starts corrald in `dir` (its trace lines on), submits, watches, prints the JSON line.
int measure(const Options& o, const std::string& dir) {
  const std::string sock = dir + "/sock", log = dir + "/corrald.log";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    ::setenv("CORRAL_TRACE", "1", 1);
    std::vector<std::string> args = {o.corrald, "--standalone", "--no-config", "--foreground", "--state-dir", dir + "/state",
                                      "--socket", sock, "--pub", "ipc://" + dir + "/events", "--node-state-dir", dir + "/node",
                                      "--jobfs-root", dir + "/jobfs", "--ckpt-root", dir + "/ckpt", "--log", log,
                                      "--emulate", "cores=64,mem=256G"};
    std::vector<char*> av;
    for (auto& s : args) av.push_back(s.data());
    av.push_back(nullptr);
    ::execv(av[0], av.data());
    _exit(127);
  }
  bench::g_children.push_back(pid);
  for (int i = 0; i < 500 && Conn(sock).fd < 0; ++i) bench::sleep_ms(10);

  proto::JobSpec spec = corral::testing::quiet_job("bench", "#!/bin/sh\n#CORRAL_EMULATE runtime=3600s\n", dir);
  spec.walltime = 7200;
  Conn c(sock);
  const auto t0 = std::chrono::steady_clock::now();
  bool ok = true;
  if (o.mode == "array") {
    spec.array = proto::ArraySpec{1, o.tasks, 1, 0};
    c.send(proto::SubmitReq{spec});
    ok = std::holds_alternative<proto::SubmitRep>(c.recv());
  } else {
    const long window = 256;  // pipelined, as a script of submits would be at best
    long sent = 0, got = 0;
    while (got < o.tasks) {
      for (; sent < o.tasks && sent - got < window; ++sent) c.send(proto::SubmitReq{spec});
      ok = std::holds_alternative<proto::SubmitRep>(c.recv()) && ok;
      ++got;
    }
  }
  const double submit_ms = ms_since(t0);
  const long journal_at_submit = file_size(dir + "/state/journal");
  bench::sleep_ms(static_cast<int>(o.watch * 1000));
  const long journal_after = file_size(dir + "/state/journal");
  std::vector<double> passes = pass_times(log);
  std::printf(
      "{\"bench\":\"arrays\",\"mode\":\"%s\",\"tasks\":%ld,\"accepted\":%s,\"submit_ms\":%.1f,"
      "\"journal_bytes_at_submit\":%ld,\"journal_bytes_after_watch\":%ld,\"watch_s\":%g,\"passes\":%zu,"
      "\"pass_ms_p50\":%.3f,\"pass_ms_max\":%.3f}\n",
      o.mode.c_str(), o.tasks, ok ? "true" : "false", submit_ms, journal_at_submit, journal_after, o.watch, passes.size(),
      bench::quantile(passes, 0.5), bench::quantile(passes, 1.0));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const bool parsed = bench::parse_options("bench_arrays", argc, argv, [&o](const std::string& k, const std::string& v) {
    if (k == "--corrald") o.corrald = v;
    else if (k == "--tasks") o.tasks = std::atol(v.c_str());
    else if (k == "--mode") o.mode = v;
    else if (k == "--watch") o.watch = std::atof(v.c_str());
    else return false;
    return true;
  });
  if (!parsed || (o.mode != "array" && o.mode != "jobs")) {
    std::fprintf(stderr, "usage: bench_arrays [--corrald PATH] [--tasks N] [--mode array|jobs] [--watch SECONDS]\n");
    return 2;
  }
  return bench::run_in_temp_dir("bench-arrays", [&o](const std::string& dir) { return measure(o, dir); });
}
