// What a big job array costs corrald, against the same work as separate jobs (the only way before
// arrays): the submit's wall time, the journal's size once it is accepted, and the standalone
// scheduling pass while it is queued. corrald runs --standalone on an emulated 64-core node (no
// root); every task is a timer longer than the bench, so the queue stays full. Pass times are
// corrald's own (its CORRAL_TRACE "schedule N ms" lines, every pass for `--watch` seconds after the
// submit). Prints one JSON object.
//   build/bench/arrays/bench_arrays --corrald build/agent/corrald [--tasks 100000] [--mode array|jobs]
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/local_conn.hpp"

using corral::bench::Conn;
namespace proto = corral::proto;

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

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string corrald = "build/agent/corrald", mode = "array";
  long tasks = 100000;
  double watch = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--corrald") corrald = argv[i + 1];
    else if (a == "--tasks") tasks = std::atol(argv[i + 1]);
    else if (a == "--mode") mode = argv[i + 1];
    else if (a == "--watch") watch = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_arrays: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (mode != "array" && mode != "jobs") {
    std::fprintf(stderr, "bench_arrays: --mode array or jobs\n");
    return 2;
  }
  char tmpl[] = "/tmp/corral-bench-arrays-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string sock = dir + "/sock", log = dir + "/corrald.log";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    ::setenv("CORRAL_TRACE", "1", 1);
    std::vector<std::string> args = {corrald, "--standalone", "--no-config", "--foreground", "--state-dir", dir + "/state",
                                      "--socket", sock, "--pub", "ipc://" + dir + "/events", "--node-state-dir", dir + "/node",
                                      "--jobfs-root", dir + "/jobfs", "--ckpt-root", dir + "/ckpt", "--log", log,
                                      "--emulate", "cores=64,mem=256G"};
    std::vector<char*> av;
    for (auto& s : args) av.push_back(s.data());
    av.push_back(nullptr);
    ::execv(av[0], av.data());
    _exit(127);
  }
  for (int i = 0; i < 500 && Conn(sock).fd < 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));

  proto::JobSpec spec;
  spec.name = "bench";
  spec.script = "#!/bin/sh\n#CORRAL_EMULATE runtime=3600s\n";
  spec.script_name = "--wrap";
  spec.cwd = dir;
  spec.walltime = 7200;
  spec.umask = 022;
  Conn c(sock);
  const auto t0 = std::chrono::steady_clock::now();
  bool ok = true;
  if (mode == "array") {
    spec.array = proto::ArraySpec{1, tasks, 1, 0};
    c.send(proto::SubmitReq{spec});
    ok = std::holds_alternative<proto::SubmitRep>(c.recv());
  } else {
    const long window = 256;  // pipelined, as a script of submits would be at best
    long sent = 0, got = 0;
    while (got < tasks) {
      for (; sent < tasks && sent - got < window; ++sent) c.send(proto::SubmitReq{spec});
      ok = std::holds_alternative<proto::SubmitRep>(c.recv()) && ok;
      ++got;
    }
  }
  const double submit_ms = ms_since(t0);
  const long journal_at_submit = file_size(dir + "/state/journal");
  std::this_thread::sleep_for(std::chrono::duration<double>(watch));
  const long journal_after = file_size(dir + "/state/journal");
  const std::vector<double> passes = pass_times(log);
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  std::printf(
      "{\"bench\":\"arrays\",\"mode\":\"%s\",\"tasks\":%ld,\"accepted\":%s,\"submit_ms\":%.1f,"
      "\"journal_bytes_at_submit\":%ld,\"journal_bytes_after_%gs\":%ld,\"passes\":%zu,"
      "\"pass_ms_p50\":%.3f,\"pass_ms_max\":%.3f}\n",
      mode.c_str(), tasks, ok ? "true" : "false", submit_ms, journal_at_submit, watch, journal_after, passes.size(),
      pct(passes, 0.5), passes.empty() ? 0.0 : *std::max_element(passes.begin(), passes.end()));
  std::string rm = "rm -rf '" + dir + "'";
  (void)!std::system(rm.c_str());
  return ok ? 0 : 1;
}
