// A mesh of real corrald processes for the benchmarks: `--emulate` agents (jobs
// are timers, no root) as voters, and members that do not vote, on 127.0.0.1 ports, each with its CURVE key
// pair (`corral keygen`) and one allowed file, as on a rack. Every process it
// starts is killed at exit, whatever the path (install_signal_handlers()).
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/local_conn.hpp"
#include "proto/proto.hpp"
#include "tests/free_port.hpp"
#include "tests/quiet_job.hpp"

namespace corral::bench {

inline double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
inline void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// The q-quantile of v (nearest rank); -1 when empty.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
}

// Every corrald this program started.
inline std::vector<pid_t> g_children;
inline void kill_children() {
  for (pid_t p : g_children)
    if (p > 0) ::kill(p, SIGKILL);
  for (pid_t p : g_children)
    if (p > 0) ::waitpid(p, nullptr, 0);
  g_children.clear();
}
inline void kill_children_and_exit(int) {
  for (pid_t p : g_children)
    if (p > 0) ::kill(p, SIGKILL);
  _exit(3);
}
inline void install_signal_handlers() {
  for (int s : {SIGINT, SIGTERM, SIGHUP}) std::signal(s, kill_children_and_exit);
}

// Options as "--name value" pairs, each handed to `set`, which returns false
// for a name it does not know. False, with the reason on stderr, on any
// option without a value or unknown.
inline bool parse_options(const char* prog, int argc, char** argv,
                          const std::function<bool(const std::string&, const std::string&)>& set) {
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", prog, a.c_str());
      return false;
    }
    if (!set(a, argv[i + 1])) {
      std::fprintf(stderr, "%s: unknown option %s\n", prog, a.c_str());
      return false;
    }
  }
  return true;
}

// Runs `run(dir)` in a new temporary directory, then kills every corrald it
// started and removes the directory (kept when CORRAL_BENCH_KEEP is set).
// Its exit code, or 1 after an exception.
inline int run_in_temp_dir(const char* prog, const std::function<int(const std::string&)>& run) {
  install_signal_handlers();
  std::string tmpl = std::string("/tmp/corral-") + prog + "-XXXXXX";
  std::string dir = ::mkdtemp(tmpl.data());
  int rc = 0;
  try {
    rc = run(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    rc = 1;
  }
  kill_children();
  if (!std::getenv("CORRAL_BENCH_KEEP")) std::filesystem::remove_all(dir);
  else std::fprintf(stderr, "%s: kept %s\n", prog, dir.c_str());
  return rc;
}

struct MeshNode {
  std::string dir, sock, listen, name;
  pid_t pid = -1;
};

class MeshProcs {
 public:
  // `voters` voters (3 or 5) then `members` members that do not vote, each `corrald --emulate
  // EMULATE`, under `dir`; `extra`: more corrald arguments for every one.
  MeshProcs(std::string corrald, std::string dir, int voters, std::string emulate,
            std::vector<std::string> extra = {}, int members = 0)
      : corrald_(std::move(corrald)), dir_(std::move(dir)), emulate_(std::move(emulate)), extra_(std::move(extra)) {
    for (int i = 0; i < voters + members; ++i) {
      MeshNode n;
      n.name = i < voters ? "n" + std::to_string(i + 1) : "m" + std::to_string(i - voters + 1);
      n.dir = dir_ + "/" + n.name;
      n.sock = n.dir + "/sock";
      n.listen = "127.0.0.1:" + std::to_string(corral_test::free_port_pair());
      std::filesystem::create_directories(n.dir);
      if (i < voters) voters_ += (i ? "," : "") + n.listen;
      nodes.push_back(n);
    }
  }
  ~MeshProcs() { kill_children(); }
  MeshProcs(const MeshProcs&) = delete;
  MeshProcs& operator=(const MeshProcs&) = delete;

  // Each member's CURVE key pair (`corral keygen`) and the one allowed file.
  void make_keys(const std::string& corral) {
    std::string allowed;
    for (const MeshNode& n : nodes) {
      std::string cmd = "'" + corral + "' keygen --out '" + n.dir + "/keys' >/dev/null 2>&1";
      if (std::system(cmd.c_str()) != 0) throw std::runtime_error("corral keygen failed: " + cmd);
      std::ifstream in(n.dir + "/keys/mesh.key.pub");
      std::string pub;
      in >> pub;
      allowed += pub + " " + n.listen + "  # " + n.name + "\n";
    }
    std::ofstream(dir_ + "/allowed") << allowed;
  }

  void start(int i) {
    MeshNode& n = nodes[i];
    std::vector<std::string> args = {corrald_, "--no-config", "--foreground", "--emulate", emulate_,
                                     "--state-dir", n.dir + "/state", "--socket", n.sock, "--pub", "ipc://" + n.dir + "/events",
                                     "--node-state-dir", n.dir + "/node", "--jobfs-root", n.dir + "/jobfs",
                                     "--ckpt-root", n.dir + "/ckpt", "--log", n.dir + "/corrald.log",
                                     "--set", "mesh=bench", "--set", "voters=" + voters_, "--set", "node_name=" + n.name,
                                     "--set", "listen=" + n.listen, "--set", "mesh_key=" + n.dir + "/keys/mesh.key",
                                     "--set", "mesh_allowed_keys=" + dir_ + "/allowed"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      std::vector<char*> av;
      for (auto& s : args) av.push_back(s.data());
      av.push_back(nullptr);
      ::execv(av[0], av.data());
      _exit(127);
    }
    n.pid = pid;
    g_children.push_back(pid);
  }
  void start_all() {
    for (int i = 0; i < size(); ++i) start(i);
  }

  // Signals member i's corrald and waits for its exit (SIGTERM: a coordinator hands over first).
  void stop(int i, int sig) {
    ::kill(nodes[i].pid, sig);
    ::waitpid(nodes[i].pid, nullptr, 0);
    std::replace(g_children.begin(), g_children.end(), nodes[i].pid, pid_t(-1));
    nodes[i].pid = -1;
  }

  int size() const { return static_cast<int>(nodes.size()); }
  std::vector<int> all_but(int k) const {
    std::vector<int> v;
    for (int i = 0; i < size(); ++i)
      if (i != k) v.push_back(i);
    return v;
  }

  template <class Rep>
  std::optional<Rep> ask(int i, const proto::Message& req) const {
    try {
      Conn c(nodes[i].sock);
      if (c.fd < 0) return std::nullopt;
      c.send(req);
      proto::Message m = c.recv();
      if (auto* r = std::get_if<Rep>(&m)) return *r;
    } catch (const std::exception&) {
    }
    return std::nullopt;
  }
  std::optional<proto::MeshStatus> status(int i) const {
    auto r = ask<proto::MeshRep>(i, proto::MeshReq{false});
    if (!r) return std::nullopt;
    return r->mesh;
  }

  // The member every member in `up` names as coordinator, which says it leads; -1 after `ms`.
  int coordinator(const std::vector<int>& up, int ms) const {
    for (double end = wall_s() + ms / 1000.0; wall_s() < end; sleep_ms(20)) {
      std::string who;
      bool same = true;
      for (int i : up) {
        auto s = status(i);
        if (!s || s->coordinator.empty() || (!who.empty() && s->coordinator != who)) same = false;
        else who = s->coordinator;
      }
      if (!same) continue;
      for (int i : up)
        if (nodes[i].name == who && status(i)->state == "leader") return i;
    }
    return -1;
  }

  // When each job was launched (epoch seconds, each time), by id, from every member's log
  // (appended across restarts; its lines are stamped to the millisecond, UTC).
  std::map<std::uint64_t, std::vector<double>> launches() const {
    std::map<std::uint64_t, std::vector<double>> out;
    std::regex started(R"(^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)\.(\d+)Z corrald: job (\d+) started on cores)");
    for (const MeshNode& n : nodes) {
      std::ifstream in(n.dir + "/corrald.log");
      std::string line;
      std::smatch sm;
      while (std::getline(in, line)) {
        if (!std::regex_search(line, sm, started)) continue;
        std::tm t{};
        t.tm_year = std::stoi(sm[1]) - 1900;
        t.tm_mon = std::stoi(sm[2]) - 1;
        t.tm_mday = std::stoi(sm[3]);
        t.tm_hour = std::stoi(sm[4]);
        t.tm_min = std::stoi(sm[5]);
        t.tm_sec = std::stoi(sm[6]);
        out[std::stoull(sm[8])].push_back(static_cast<double>(::timegm(&t)) + std::stoi(sm[7]) / 1000.0);
      }
    }
    return out;
  }

  std::vector<MeshNode> nodes;

 private:
  std::string corrald_, dir_, voters_, emulate_;
  std::vector<std::string> extra_;
};

// A job for an emulated node: a timer of `runtime_ms`, one core.
inline proto::JobSpec emulated_job(const std::string& name, const std::string& dir, int runtime_ms) {
  return testing::quiet_job(name, "#!/bin/sh\n#CORRAL_EMULATE runtime=" + std::to_string(runtime_ms) + "ms\n", dir);
}

}  // namespace corral::bench
