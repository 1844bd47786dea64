// corral-shepherd --server spoken to directly (fd 3 requests, fd 4 wake pipe), no Launcher and
// no cgroups: each job's status and records, what jobs leave behind, the server's leaving.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "agent/node/child_fail.hpp"
#include "helpers.hpp"

using namespace corral::node;
using nodetest::nap;
using nodetest::slurp;
using nodetest::TempDir;
using nodetest::wait_until;

extern char** environ;

namespace {

struct Job {
  std::uint64_t id;
  std::vector<std::string> argv;
  int cpu;
  std::vector<std::string> procs;  // join files (none here: no cgroups)
};

// A server of our own: the test is its agent.
struct Server {
  TempDir dir;
  int req = -1, wake = -1;
  pid_t pid = -1;
  std::vector<WakeRecord> seen;

  Server() {
    int sv[2], wp[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    REQUIRE(::pipe2(wp, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    // As the launcher does: 0-2 /dev/null (a job held in its setup must not hold our output open).
    for (int fd = 0; fd < 3; ++fd) posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", O_RDWR, 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    posix_spawn_file_actions_adddup2(&fa, wp[1], 4);
    // SHEPHERD_UNDER_TEST: another build of the server (to check these tests fail on one).
    const char* other = std::getenv("SHEPHERD_UNDER_TEST");
    std::string bin = other ? other : CORRAL_SHEPHERD_BUILD;
    char* argv[] = {bin.data(), const_cast<char*>("--server"), nullptr};
    REQUIRE(::posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(sv[1]);
    ::close(wp[1]);
    req = sv[0];
    wake = wp[0];
  }
  ~Server() {
    close_requests();
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (wake >= 0) ::close(wake);
  }
  void close_requests() {
    if (req >= 0) ::close(req);
    req = -1;
  }
  std::string exit_file(std::uint64_t id) const { return dir.path + "/job." + std::to_string(id) + ".exit"; }
  std::string out_file(std::uint64_t id) const { return dir.path + "/job." + std::to_string(id) + ".out"; }

  // The request as the launcher encodes it (launcher.cpp start()).
  std::string encode(const Job& j) const {
    std::string r(4, '\0');
    auto put = [&r](const std::string& x) {
      auto l = static_cast<std::uint32_t>(x.size());
      r.append(reinterpret_cast<const char*>(&l), 4);
      r += x;
    };
    std::string fail = dir.path + "/job." + std::to_string(j.id) + ".fail";
    for (const std::string& f : {std::to_string(j.id), exit_file(j.id), fail, std::string("0"), std::string("0"),
                                 std::string(""), std::string("0"), dir.path, out_file(j.id), out_file(j.id),
                                 std::to_string(O_WRONLY | O_CREAT | O_TRUNC), j.argv.front()})
      put(f);
    put(std::to_string(j.procs.size()));
    for (auto& p : j.procs) put(p);
    put(std::to_string(j.argv.size()));
    for (auto& a : j.argv) put(a);
    put("1");
    put("PATH=/usr/bin:/bin");
    put("1");
    put(std::to_string(j.cpu));
    auto total = static_cast<std::uint32_t>(r.size() - 4);
    std::memcpy(r.data(), &total, 4);
    return r;
  }
  void send(const std::string& bytes) {
    REQUIRE(::write(req, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  }
  void start(const Job& j) { send(encode(j)); }

  // Reads wake records until `pred` holds or the time is up.
  template <class P>
  bool read_until(P pred, int timeout_ms) {
    for (int t = 0; t < timeout_ms && !pred(); t += 10) {
      struct pollfd p {wake, POLLIN, 0};
      if (::poll(&p, 1, 10) == 1) {
        WakeRecord w;
        if (::read(wake, &w, sizeof w) == static_cast<ssize_t>(sizeof w)) seen.push_back(w);
      }
    }
    return pred();
  }
  int count(std::uint64_t id, std::int32_t kind) const {
    int n = 0;
    for (auto& w : seen) n += w.id == id && (w.kind & kWakeKindMask) == kind;
    return n;
  }
  std::int32_t job_pid(std::uint64_t id) const {
    for (auto& w : seen)
      if (w.id == id && w.kind == kWakeRunning) return w.pid;
    return -1;
  }
  bool ended(std::uint64_t id) const { return count(id, kWakeEnded) > 0; }
  // "running" came first, then exactly one "ended".
  bool in_order(std::uint64_t id) const {
    int state = 0;
    for (auto& w : seen) {
      if (w.id != id) continue;
      if (w.kind == kWakeRunning && state == 0) state = 1;
      else if ((w.kind & kWakeKindMask) == kWakeEnded && state == 1) state = 2;
      else return false;
    }
    return state == 2;
  }
  int status(std::uint64_t id) const {
    std::string s = slurp(exit_file(id));
    // The "ended" record carries the same status (round 8: the agent reads it from there).
    for (auto& w : seen)
      if (w.id == id && (w.kind & kWakeKindMask) == kWakeEnded) {
        CHECK((w.kind & kWakeHasStatus) != 0);
        if (!s.empty()) CHECK(wake_status(w.kind) == std::stoi(s));
      }
    return s.empty() ? -1 : std::stoi(s);
  }
  bool gone() {
    return wait_until([&] { return ::waitpid(pid, nullptr, WNOHANG) == pid; }, 5000) && (pid = -1, true);
  }
};

// The state letter of a process and its parent ("" if it is gone).
std::pair<std::string, pid_t> proc_state(pid_t p) {
  std::string s = slurp("/proc/" + std::to_string(p) + "/stat");
  auto r = s.rfind(')');
  if (r == std::string::npos) return {"", 0};
  std::istringstream in(s.substr(r + 2));
  std::string st;
  pid_t pp = 0;
  in >> st >> pp;
  return {st, pp};
}

}  // namespace

TEST_CASE("shepherd: a job's end is reported while its children live on; what it left is reaped by the server",
          "[node][shepherd]") {
  Server s;
  // K on CPU 0 exits soon; O on CPU 1 leaves a child behind that outlives it by 0.6 s.
  s.start({21, {"/bin/sh", "-c", "sleep 0.2; exit 4"}, 0, {}});
  s.start({25, {"/bin/sh", "-c", "sleep 0.6 & echo $!; exit 0"}, 1, {}});
  REQUIRE(s.read_until([&] { return s.ended(25); }, 5000));
  CHECK(s.in_order(25));
  CHECK(s.status(25) == 0);
  pid_t orphan = 0;
  std::istringstream(slurp(s.out_file(25))) >> orphan;
  REQUIRE(orphan > 0);
  // O's end was reported while its child lives; the child is now the server's.
  auto [ost, oparent] = proc_state(orphan);
  CHECK(ost != "");
  CHECK(ost != "Z");
  CHECK(oparent == s.pid);
  REQUIRE(s.read_until([&] { return s.ended(21); }, 5000));
  CHECK(s.in_order(21));
  CHECK(s.status(21) == (4 << 8));
  CHECK(proc_state(s.job_pid(21)).first == "");
  // The orphan exits: reaped by the server, not left a zombie.
  CHECK(wait_until([&] { return proc_state(orphan).first == ""; }, 3000));
  s.close_requests();
  CHECK(s.gone());
}

TEST_CASE("shepherd: without its agent the server stays until its last job and what it left are reaped",
          "[node][shepherd]") {
  Server s;
  s.start({31, {"/bin/sh", "-c", "sleep 0.4 & exit 2"}, 0, {}});
  s.start({33, {"/bin/sh", "-c", "sleep 0.2; exit 3"}, 1, {}});
  REQUIRE(s.read_until([&] { return s.job_pid(31) > 0 && s.job_pid(33) > 0; }, 5000));
  s.close_requests();
  // Job 31 has ended (its sleep lives on); 33 has not: the server must still be there.
  REQUIRE(s.read_until([&] { return s.ended(31); }, 5000));
  if (!s.ended(33)) CHECK(::waitpid(s.pid, nullptr, WNOHANG) == 0);  // jobs left: it stays
  REQUIRE(s.gone());
  CHECK(s.status(31) == (2 << 8));
  CHECK(s.status(33) == (3 << 8));
}
