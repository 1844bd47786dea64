// Launch benchmark on one node: a real corrald --standalone (journal fsync on),
// N jobs that exit at once (#!/bin/true), submitted over the local socket as
// fast as possible. Prints JSON: launches per second, submit-to-start latency
// (p50/p99) for the burst and for paced single submits, the agent's RSS and its
// idle CPU over ~5 s (utime+stime from /proc/PID/stat), and the CPU each launch costs: the agent's,
// the shepherd server's, and that of the shepherds + jobs (cpuacct of the agent's cgroup parent);
// cpu_bound_launches_per_s = cores / that total, what the cores would sustain with nothing else
// running (this machine is shared: loadavg_1m is printed with the figures).
// jobs_reaped_by_server_cpu_ms_per_job cross-checks the jobs' share: the server reaps every job,
// so its children's CPU is the jobs' whole CPU (the cpuacct figure misses the few syscalls a job
// makes before it joins its slot). Needs root.
// launches_per_s_during_submit / launches_per_s_after_submit split the burst at the last submit's
// acknowledgement (launches_per_s keeps its definition: first to last start).
//
//   build/bench/launch/bench_launch [--corrald PATH] [--jobs 2000] [--paced 100] [--idle 5]
//                                   [--node-state-dir DIR] [--emulate SPEC]
// --emulate SPEC: the agent emulates a node (corrald --emulate, e.g. cores=64): its jobs are
// timers that end at once, so the figures are the agent's own throughput (no root needed; the
// shepherd and job figures are 0).
// --node-state-dir: corrald's launcher records, exit files (its --node-state-dir, default
// /run/corral/node: tmpfs on most hosts) go in a fresh dir under DIR instead of the bench's
// temp dir under /tmp, to measure a host's own layout.
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/local_conn.hpp"
#include "proto/proto.hpp"

using namespace corral;

using bench::Conn;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string proc_field(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return line.substr(key.size() + 1);
  return "";
}
double rss_mb(pid_t pid, const char* key = "VmRSS") {
  return std::atof(proc_field(pid, key).c_str()) / 1024.0;
}
// Whole machine, from /proc/stat's first line: {busy ticks (all but idle and iowait), all ticks}.
// Tells a CPU-bound burst (cores busy with anything: the launch path, kernel threads that tear
// down cgroups and run RCU callbacks, this bench's client, other load) from a latency-bound one.
std::pair<double, double> machine_ticks() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;
  double v[10] = {0}, all = 0;
  for (int i = 0; i < 10 && (in >> v[i]); ++i) {}
  for (int i = 0; i < 8; ++i) all += v[i];  // guest times are already in user/nice
  return {all - v[3] - v[4], all};
}
double cpu_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t p = s.rfind(')');
  std::istringstream ss(s.substr(p + 2));
  std::string f;
  std::vector<std::string> v;
  while (ss >> f) v.push_back(f);
  // after ")": state(0) ... utime is field 14 overall -> index 11 here, stime 12
  return std::atof(v.at(11).c_str()) + std::atof(v.at(12).c_str());
}

// CPU seconds of every process named `comm` whose parent is `ppid` (the shepherd server);
// *pid_out: one of them. reaped: the CPU of their own reaped children instead (cutime+cstime):
// the server reaps every job, so this is the jobs' whole CPU, also before they joined their slot.
double children_cpu_s(pid_t ppid, const std::string& comm, pid_t* pid_out = nullptr, bool reaped = false) {
  double ticks = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string n = e.path().filename().string();
    if (n.empty() || !std::isdigit(static_cast<unsigned char>(n[0]))) continue;
    std::ifstream in(e.path() / "stat");
    std::string st((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto l = st.find('('), r = st.rfind(')');
    if (l == std::string::npos || r == std::string::npos || st.substr(l + 1, r - l - 1) != comm) continue;
    std::istringstream ss(st.substr(r + 2));
    std::vector<std::string> v;
    std::string f;
    while (ss >> f) v.push_back(f);
    if (v.size() > 12 && std::atoi(v[1].c_str()) == ppid) {
      std::size_t k = reaped ? 13 : 11;
      if (v.size() > k + 1) ticks += std::atof(v[k].c_str()) + std::atof(v[k + 1].c_str());
      if (pid_out) *pid_out = static_cast<pid_t>(std::atol(n.c_str()));
    }
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// cpuacct.usage of the agent's cgroup parent: every job and shepherd (hierarchical), in s.
double slots_cpu_s(const std::string& parent) {
  std::ifstream in("/sys/fs/cgroup/cpuacct/" + parent + "/cpuacct.usage");
  double ns = 0;
  in >> ns;
  return ns / 1e9;
}

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  std::string corrald = "build/agent/corrald";
  int jobs = 2000, paced = 100;
  double idle = 5;
  std::string node_parent;  // --node-state-dir: where corrald's node files go (default: the temp dir)
  std::string emulate;      // --emulate SPEC
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--corrald") corrald = argv[i + 1];
    else if (a == "--jobs") jobs = std::atoi(argv[i + 1]);
    else if (a == "--paced") paced = std::atoi(argv[i + 1]);
    else if (a == "--idle") idle = std::atof(argv[i + 1]);
    else if (a == "--node-state-dir") node_parent = argv[i + 1];
    else if (a == "--emulate") emulate = argv[i + 1];
    else {
      std::fprintf(stderr, "bench_launch: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (::geteuid() != 0 && emulate.empty()) {
    std::fprintf(stderr, "bench_launch: needs root (cgroups, job users)\n");
    return 2;
  }
  char tmpl[] = "/tmp/corral-bench-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  ::chmod(dir.c_str(), 0755);
  std::string sock = dir + "/sock", pub = "ipc://" + dir + "/events";
  std::string cg = "corral-bench-" + std::to_string(::getpid());
  std::string node_dir = dir + "/node";
  if (!node_parent.empty()) {
    std::string t = node_parent + "/corral-bench-node-XXXXXX";
    if (!::mkdtemp(t.data())) {
      std::fprintf(stderr, "bench_launch: cannot make a dir in %s: %s\n", node_parent.c_str(), std::strerror(errno));
      ::rmdir(dir.c_str());
      return 2;
    }
    node_dir = t;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    std::vector<std::string> args = {corrald, "--standalone", "--foreground", "--state-dir", dir + "/state",
                                      "--socket", sock, "--pub", pub, "--cgroup-parent", cg,
                                      "--node-state-dir", node_dir, "--jobfs-root", dir + "/jobfs",
                                      "--ckpt-root", dir + "/ckpt", "--log", dir + "/corrald.log", "--set", "fsync=yes"};
    if (!emulate.empty()) args.insert(args.end(), {"--emulate", emulate});
    std::vector<char*> av;
    for (auto& s : args) av.push_back(s.data());
    av.push_back(nullptr);
    execv(av[0], av.data());
    _exit(127);
  }
  for (int i = 0; i < 500; ++i) {
    Conn c(sock);
    if (c.fd >= 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double rss_start = rss_mb(pid);

  // Subscriber thread: every started/ended event.
  void* ctx = zmq_ctx_new();
  void* sub = zmq_socket(ctx, ZMQ_SUB);
  int hwm = 0, tmo = 100;
  zmq_setsockopt(sub, ZMQ_RCVHWM, &hwm, sizeof hwm);
  zmq_setsockopt(sub, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
  zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "corral.", 7);
  zmq_connect(sub, pub.c_str());
  std::mutex mu;
  std::map<std::uint64_t, double> started, submitted;
  std::map<std::uint64_t, double> ended;
  std::uint64_t last_seq = 0, gaps = 0;
  std::atomic<bool> quit{false};
  std::thread th([&] {
    while (!quit) {
      char topic[64];
      if (zmq_recv(sub, topic, sizeof topic, 0) < 0) continue;
      zmq_msg_t m;
      zmq_msg_init(&m);
      zmq_msg_recv(&m, sub, 0);
      auto msg = proto::decode(std::string_view(static_cast<char*>(zmq_msg_data(&m)), zmq_msg_size(&m)));
      zmq_msg_close(&m);
      auto& e = std::get<proto::Event>(msg);
      std::lock_guard<std::mutex> g(mu);
      if (last_seq && e.seq != last_seq + 1) ++gaps;
      last_seq = e.seq;
      if (e.kind == "started") {
        started[e.job] = e.time;
        submitted[e.job] = e.submit_time;
      } else if (e.kind == "ended") {
        ended[e.job] = e.time;
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // subscription settles

  proto::JobSpec spec;
  spec.name = "bench";
  spec.script = "#!/bin/true\n";
  spec.cwd = dir;
  spec.stdout_path = "/dev/null";
  spec.stderr_path = "/dev/null";
  spec.walltime = 60;
  extern char** environ;
  for (char** e = environ; *e; ++e) spec.env.emplace_back(*e);

  auto wait_ended = [&](std::size_t n, double timeout) {
    double t0 = now_s();
    while (now_s() - t0 < timeout) {
      {
        std::lock_guard<std::mutex> g(mu);
        if (ended.size() >= n) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  };

  // Burst: every job submitted at once on one connection.
  Conn c(sock);
  long tck = sysconf(_SC_CLK_TCK);
  double cpu_burst0 = cpu_ticks(pid);
  double server0 = children_cpu_s(pid, "corral-shepherd"), slots0 = slots_cpu_s(cg);
  double reaped0 = children_cpu_s(pid, "corral-shepherd", nullptr, true);
  auto mach0 = machine_ticks();
  rusage self0{};
  ::getrusage(RUSAGE_SELF, &self0);
  double t_sub0 = now_s();
  // Pipelined, up to 32 submits in flight (as many clients at once would be).
  int sent = 0, acked = 0;
  while (acked < jobs) {
    while (sent < jobs && sent - acked < 32) {
      c.send(proto::SubmitReq{spec});
      ++sent;
    }
    auto r = c.recv();
    if (!std::holds_alternative<proto::SubmitRep>(r)) {
      std::fprintf(stderr, "submit refused\n");
      return 1;
    }
    ++acked;
  }
  double t_sub1 = now_s();
  auto mach_sub = machine_ticks();  // the cores' busy share after the last submit's ack
  bool ok = wait_ended(static_cast<std::size_t>(jobs), 600);
  double t_end = now_s();
  auto mach1 = machine_ticks();
  rusage self1{};
  ::getrusage(RUSAGE_SELF, &self1);
  auto tv_s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  double bench_cpu_s = tv_s(self1.ru_utime) - tv_s(self0.ru_utime) + tv_s(self1.ru_stime) - tv_s(self0.ru_stime);
  double agent_cpu_burst_s = (cpu_ticks(pid) - cpu_burst0) / static_cast<double>(tck);
  pid_t server = 0;
  double server_cpu_s = children_cpu_s(pid, "corral-shepherd", &server) - server0, jobs_cpu_s = slots_cpu_s(cg) - slots0;
  double server_rss = server > 0 ? rss_mb(server) : 0;
  double reaped_cpu_s = children_cpu_s(pid, "corral-shepherd", nullptr, true) - reaped0;
  // CPU per launch of everything on the launch path (agent, shepherd server, shepherds + jobs):
  // what the machine's cores would sustain if nothing else ran on them.
  // The jobs' share: the larger of the cpuacct figure and the server's reaped children (the latter
  // also holds what a job spends before it joins its slot).
  double cpu_ms_per_job = (agent_cpu_burst_s + server_cpu_s + std::max(jobs_cpu_s, reaped_cpu_s)) * 1000.0 / jobs;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<double> lat;
  double first_start = 1e300, last_start = 0;
  {
    std::lock_guard<std::mutex> g(mu);
    for (auto& [id, t] : started) {
      lat.push_back((t - submitted[id]) * 1000);
      first_start = std::min(first_start, t);
      last_start = std::max(last_start, t);
    }
  }
  std::size_t burst_started = lat.size();
  // The launch rate while the 2,000 submits are still coming in (the client and the agent's
  // fsync'd group commits share the cores with the launches) and after the last one is
  // acknowledged: starts before / after t_sub1, each over its own span.
  std::size_t n_during = 0, n_after = 0;
  double first_after = 1e300;
  {
    std::lock_guard<std::mutex> g(mu);
    for (auto& [id, t] : started) {
      if (t < t_sub1) ++n_during;
      else ++n_after, first_after = std::min(first_after, t);
    }
  }
  double rate_during = n_during > 0 && t_sub1 > first_start ? static_cast<double>(n_during) / (t_sub1 - first_start) : 0.0;
  double rate_after = n_after > 1 && last_start > first_after ? static_cast<double>(n_after - 1) / (last_start - first_after) : 0.0;
  double rss_after = rss_mb(pid), rss_peak = rss_mb(pid, "VmHWM");

  // Paced: one job at a time on an idle node (latency without queueing).
  std::vector<double> plat;
  for (int i = 0; i < paced; ++i) {
    c.send(proto::SubmitReq{spec});
    auto r = c.recv();
    auto id = std::get<proto::SubmitRep>(r).id;
    for (int k = 0; k < 500; ++k) {
      {
        std::lock_guard<std::mutex> g(mu);
        if (ended.count(id)) {
          plat.push_back((started[id] - submitted[id]) * 1000);
          break;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  // Idle CPU.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  double c0 = cpu_ticks(pid), w0 = now_s();
  std::this_thread::sleep_for(std::chrono::duration<double>(idle));
  double c1 = cpu_ticks(pid), w1 = now_s();
  double idle_pct = (c1 - c0) / static_cast<double>(tck) / (w1 - w0) * 100.0;
  double rss_idle = rss_mb(pid);

  quit = true;
  th.join();
  zmq_close(sub);
  zmq_ctx_term(ctx);
  ::kill(pid, SIGTERM);
  int st;
  ::waitpid(pid, &st, 0);
  // The floor on this machine: the same #!/bin/true script posix_spawned and waited for, two at a
  // time, with no scheduler, cgroups or shepherd at all (rate and CPU per spawn).
  std::string bare = dir + "/true.sh";
  std::ofstream(bare) << "#!/bin/true\n";
  ::chmod(bare.c_str(), 0755);
  rusage ru0{}, ru1{};
  ::getrusage(RUSAGE_CHILDREN, &ru0);
  const int bare_n = 400;
  double b0 = now_s();
  for (int i = 0; i < bare_n; i += 2) {
    pid_t ps[2];
    char* av[] = {bare.data(), nullptr};
    for (auto& p : ps)
      if (::posix_spawn(&p, bare.c_str(), nullptr, nullptr, av, environ) != 0) p = -1;
    for (auto p : ps)
      if (p > 0) ::waitpid(p, nullptr, 0);
  }
  double bare_rate = bare_n / (now_s() - b0);
  ::getrusage(RUSAGE_CHILDREN, &ru1);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  double bare_cpu_ms = (secs(ru1.ru_utime) - secs(ru0.ru_utime) + secs(ru1.ru_stime) - secs(ru0.ru_stime)) * 1000.0 / bare_n;

  if (std::getenv("CORRAL_BENCH_KEEP")) std::fprintf(stderr, "kept %s\n", dir.c_str());
  std::string cleanup = (std::getenv("CORRAL_BENCH_KEEP") ? std::string() : "rm -rf '" + dir + "' '" + node_dir + "'; ") + "for d in /sys/fs/cgroup/*/" + cg +
                        "; do rmdir \"$d\" 2>/dev/null; done";
  (void)!std::system(cleanup.c_str());

  double span = last_start - first_start;
  // Other load on the machine shares its 2 cores with the jobs: printed with the figures.
  double load1 = 0;
  if (std::FILE* la = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(la, "%lf", &load1) != 1) load1 = -1;
    std::fclose(la);
  }
  std::printf(
      "{\"bench\":\"launch\",\"emulate\":\"%s\",\"jobs\":%d,\"all_ended\":%s,\"started_seen\":%zu,\"event_gaps\":%llu,"
      "\"submit_rate_per_s\":%.1f,\"launches_per_s\":%.1f,\"end_to_end_per_s\":%.1f,"
      "\"burst_latency_ms\":{\"p50\":%.2f,\"p99\":%.2f,\"max\":%.2f},"
      "\"paced_latency_ms\":{\"n\":%zu,\"p50\":%.2f,\"p99\":%.2f},"
      "\"agent_rss_mb\":{\"start\":%.1f,\"after_burst\":%.1f,\"peak\":%.1f,\"idle\":%.1f},"
      "\"agent_idle_cpu_pct\":%.3f,\"idle_window_s\":%.1f,\"agent_cpu_ms_per_job\":%.3f,"
      "\"server_cpu_ms_per_job\":%.3f,\"shepherd_and_job_cpu_ms_per_job\":%.3f,\"cpu_ms_per_launch\":%.3f,"
      "\"cpu_bound_launches_per_s\":%.1f,\"server_rss_mb\":%.1f,\"jobs_reaped_by_server_cpu_ms_per_job\":%.3f,"
      "\"bare_spawn_2wide_per_s\":%.1f,\"bare_spawn_cpu_ms\":%.3f,\"loadavg_1m\":%.2f,"
      "\"burst_machine_busy_pct\":%.1f,\"burst_machine_cpu_ms_per_launch\":%.3f,\"bench_client_cpu_ms_per_job\":%.3f,"
      "\"submit_phase_s\":%.3f,\"launches_during_submit\":%zu,\"launches_per_s_during_submit\":%.1f,"
      "\"launches_per_s_after_submit\":%.1f,\"after_submit_machine_busy_pct\":%.1f}\n",
      emulate.c_str(), jobs, ok ? "true" : "false", burst_started, static_cast<unsigned long long>(gaps),
      jobs / (t_sub1 - t_sub0), span > 0 ? static_cast<double>(burst_started - 1) / span : 0.0,
      jobs / (t_end - t_sub0), pct(lat, 0.5), pct(lat, 0.99), pct(lat, 1.0), plat.size(),
      pct(plat, 0.5), pct(plat, 0.99), rss_start, rss_after, rss_peak, rss_idle, idle_pct, w1 - w0,
      agent_cpu_burst_s * 1000.0 / jobs, server_cpu_s * 1000.0 / jobs, jobs_cpu_s * 1000.0 / jobs, cpu_ms_per_job,
      cpu_ms_per_job > 0 ? static_cast<double>(ncpu) * 1000.0 / cpu_ms_per_job : 0.0, server_rss,
      reaped_cpu_s * 1000.0 / jobs, bare_rate, bare_cpu_ms, load1,
      mach1.second > mach0.second ? 100.0 * (mach1.first - mach0.first) / (mach1.second - mach0.second) : 0.0,
      (mach1.first - mach0.first) * 1000.0 / static_cast<double>(tck) / jobs, bench_cpu_s * 1000.0 / jobs,
      t_sub1 - t_sub0, n_during, rate_during, rate_after,
      mach1.second > mach_sub.second ? 100.0 * (mach1.first - mach_sub.first) / (mach1.second - mach_sub.second) : 0.0);
  return ok ? 0 : 1;
}
