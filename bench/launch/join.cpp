// The job's side of a launch, alone: how often (and how long) a vforked child blocks while it
// joins four fresh cgroup v1 slots (cpuset, memory, freezer, cpuacct) by writing "0" to their
// join files, as corral-shepherd's vfork child does. Two workers run at once (one per slot, as in
// bench_launch); each makes its slot groups, vforks a child that joins them and _exits, waits for
// it (wait4: its voluntary context switches say whether it blocked; one of them is its exit), and
// removes the groups. Compares, back to back:
//   procs / tasks       the join file (cgroup.procs takes the global threadgroup rwsem, whose
//                       write side waits for an RCU grace period when idle; tasks with "0" does not)
//   unpinned / pinned   the vforking worker runs anywhere / on its slot's CPU (a child that is
//                       not on its slot's CPU must be migrated at the cpuset join: a sleep)
// Prints JSON. Needs root and cgroup v1 cpuset, memory, freezer, cpuacct.
//   build/bench/launch/bench_join [--n 300] [--rounds 2]
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char* const kCtl[4] = {"cpuset", "memory", "freezer", "cpuacct"};
const std::string kRoot = "/sys/fs/cgroup/";

bool put(const std::string& path, const std::string& v) {
  int f = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (f < 0) return false;
  bool ok = ::write(f, v.data(), v.size()) == static_cast<ssize_t>(v.size());
  ::close(f);
  return ok;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct Result {
  long blocked = 0, vol = 0, n = 0, failed = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};

// One worker: n launches into slot groups <parent>/w<k>_<i> on CPU `cpu`. Writes its figures to fd.
void worker(const std::string& parent, int k, int cpu, int n, const char* file, bool pin, int fd) {
  if (pin) {
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET(cpu, &cs);
    ::sched_setaffinity(0, sizeof cs, &cs);
  }
  std::vector<double> t;
  Result r;
  for (int i = 0; i < n; ++i) {
    std::string slot = parent + "/w" + std::to_string(k) + "_" + std::to_string(i);
    std::string join[4];
    for (int c = 0; c < 4; ++c) {
      ::mkdir((kRoot + kCtl[c] + "/" + slot).c_str(), 0755);
      join[c] = kRoot + kCtl[c] + "/" + slot + "/" + file;
    }
    put(kRoot + "cpuset/" + slot + "/cpuset.cpus", std::to_string(cpu));
    put(kRoot + "cpuset/" + slot + "/cpuset.mems", "0");
    const char* jp[4] = {join[0].c_str(), join[1].c_str(), join[2].c_str(), join[3].c_str()};
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid = ::vfork();
    if (pid == 0) {
      for (const char* p : jp) {
        int f = ::open(p, O_WRONLY | O_CLOEXEC);
        if (f < 0 || ::write(f, "0", 1) != 1) ::_exit(1);
        ::close(f);
      }
      ::_exit(0);
    }
    t.push_back(ms_since(t0));
    int st = 0;
    struct rusage ru {};
    ::wait4(pid, &st, 0, &ru);
    r.failed += st != 0;
    r.vol += ru.ru_nvcsw - 1;  // less its exit
    r.blocked += ru.ru_nvcsw > 1;
    for (int c = 0; c < 4; ++c) ::rmdir((kRoot + kCtl[c] + "/" + slot).c_str());
    ::usleep(2000);  // a job's life, roughly: the next launch is not back to back
  }
  std::sort(t.begin(), t.end());
  r.n = n;
  for (double x : t) r.mean += x / n;
  r.p50 = t[t.size() / 2];
  r.p90 = t[t.size() * 9 / 10];
  r.p99 = t[t.size() * 99 / 100];
  (void)!::write(fd, &r, sizeof r);
}

}  // namespace

int main(int argc, char** argv) {
  int n = 300, rounds = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--n")) n = std::max(10, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[i + 1]));
  }
  std::string parent = "corral_bench_join_" + std::to_string(::getpid());
  for (const char* c : kCtl)
    if (::mkdir((kRoot + c + "/" + parent).c_str(), 0755) != 0) {
      std::fprintf(stderr, "bench_join: cannot create %s%s/%s: %s (needs root and cgroup v1)\n", kRoot.c_str(), c,
                   parent.c_str(), std::strerror(errno));
      return 1;
    }
  cpu_set_t all;
  CPU_ZERO(&all);
  ::sched_getaffinity(0, sizeof all, &all);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &all)) cpus.push_back(c);
  std::string cpulist;
  for (int c : cpus) cpulist += (cpulist.empty() ? "" : ",") + std::to_string(c);
  put(kRoot + "cpuset/" + parent + "/cpuset.cpus", cpulist);
  put(kRoot + "cpuset/" + parent + "/cpuset.mems", "0");
  std::printf("{\"bench\":\"join\",\"launches_per_case\":%d,\"workers\":2,\"cases\":[", n * 2 * rounds);
  bool first = true;
  for (int round = 0; round < rounds; ++round)
    for (const char* file : {"cgroup.procs", "tasks"})
      for (bool pin : {false, true}) {
        int p[2];
        if (::pipe(p) != 0) return 1;
        for (int k = 0; k < 2; ++k)
          if (::fork() == 0) {
            worker(parent, k, cpus[static_cast<std::size_t>(k) % cpus.size()], n, file, pin, p[1]);
            ::_exit(0);
          }
        ::close(p[1]);
        Result sum, r;
        while (::read(p[0], &r, sizeof r) == static_cast<ssize_t>(sizeof r)) {
          sum.n += r.n, sum.blocked += r.blocked, sum.vol += r.vol, sum.failed += r.failed;
          sum.mean += r.mean / 2, sum.p50 += r.p50 / 2, sum.p90 += r.p90 / 2, sum.p99 += r.p99 / 2;
        }
        ::close(p[0]);
        while (::wait(nullptr) > 0) {}
        std::printf("%s{\"round\":%d,\"file\":\"%s\",\"pinned\":%s,\"launches\":%ld,\"children_blocked_pct\":%.1f,"
                    "\"sleeps_per_launch\":%.3f,\"join_ms_mean\":%.3f,\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,"
                    "\"failed\":%ld}",
                    first ? "" : ",", round, file, pin ? "true" : "false", sum.n,
                    100.0 * static_cast<double>(sum.blocked) / static_cast<double>(std::max(1L, sum.n)),
                    static_cast<double>(sum.vol) / static_cast<double>(std::max(1L, sum.n)), sum.mean, sum.p50,
                    sum.p90, sum.p99, sum.failed);
        first = false;
      }
  double la[3] = {0, 0, 0};
  ::getloadavg(la, 3);
  std::printf("],\"loadavg_1m\":%.2f}\n", la[0]);
  for (const char* c : kCtl) ::rmdir((kRoot + c + "/" + parent).c_str());
  return 0;
}
