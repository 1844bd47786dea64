// Hostile or careless local users against a real corrald: connection floods, partial frames,
// a low open-file limit, forged log lines, bad job names and fields from a raw client, umask,
// and a corrald that dies before answering a submit.
#include <catch2/catch.hpp>

#include <pwd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <climits>
#include <cstdint>
#include <filesystem>
#include <thread>

#include "harness.hpp"
#include "harness_proto.hpp"
#include "proto/proto.hpp"

using harness::Agent;
namespace proto = corral::proto;

namespace {
constexpr int kNobody = 65534;

// corrald's resident memory in KiB (VmRSS).
long rss_kb(pid_t pid) {
  std::string s = harness::slurp("/proc/" + std::to_string(pid) + "/status");
  std::size_t p = s.find("VmRSS:");
  return p == std::string::npos ? -1 : std::stol(s.substr(p + 6));
}

// corrald's CPU time (user + system) in seconds.
double cpu_s(pid_t pid) {
  std::string st = harness::slurp("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream in(st.substr(st.rfind(')') + 2));
  std::string f;
  long ut = 0, stt = 0;
  for (int i = 3; i <= 15 && in >> f; ++i) {
    if (i == 14) ut = std::stol(f);
    if (i == 15) stt = std::stol(f);
  }
  return static_cast<double>(ut + stt) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A child as `nobody` (or `uid`) running `fn` (which returns a number for the parent), then holding
// what it opened until killed. The parent gets the number once the child is done setting up.
struct Hostile {
  pid_t pid = -1;
  long result = -1;
  template <class Fn>
  explicit Hostile(Fn fn, rlim_t nofile = 8192, int uid = kNobody) {
    int p[2];
    REQUIRE(::pipe(p) == 0);
    pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::close(p[0]);
      rlimit rl{nofile, nofile};
      ::setrlimit(RLIMIT_NOFILE, &rl);
      if (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(uid)) != 0 || ::setuid(static_cast<uid_t>(uid)) != 0)
        _exit(125);
      long r = fn();
      (void)!::write(p[1], &r, sizeof r);
      for (;;) ::pause();
    }
    ::close(p[1]);
    REQUIRE(::read(p[0], &result, sizeof result) == sizeof result);
    ::close(p[0]);
  }
  ~Hostile() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

// Up to `n` connections to `socket`, kept open; stops at the first few that cannot be made.
long open_connections(const std::string& socket, int n) {
  long made = 0;
  int failures = 0;
  for (int i = 0; i < n && failures < 3; ++i) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    timeval tv{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) ++made;
    else { ::close(fd); ++failures; }
  }
  return made;
}

// `corral node` as root within `secs` seconds (timeout(1) ends a hang).
harness::Result node_within(const Agent& a, int secs, int uid = -1) {
  return harness::run({"/usr/bin/timeout", std::to_string(secs), a.corral(), "node", "--socket", a.socket}, uid);
}

std::size_t count_lines(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

// Open file descriptors of a process.
int open_fds(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); ++it)
    ++n;
  return n;
}

// A system user (made if missing) in a system group (made if missing); its uid, or -1.
int test_user_in(const std::string& user, const std::string& group) {
  std::string cmd = "getent group " + group + " >/dev/null || groupadd --system " + group + "; " +
                    "getent passwd " + user + " >/dev/null || useradd --system --no-create-home --shell "
                    "/usr/sbin/nologin -G " + group + " " + user;
  (void)!std::system(("(" + cmd + ") >/dev/null 2>&1").c_str());
  passwd* pw = ::getpwnam(user.c_str());
  return pw ? static_cast<int>(pw->pw_uid) : -1;
}

proto::JobSpec good_spec(const Agent& a) {
  proto::JobSpec s;
  s.name = "raw";
  s.script = "#!/bin/sh\ntrue\n";
  s.script_name = "--wrap";
  s.cwd = a.dir + "/work";
  s.walltime = 60;
  return s;
}

std::string refusal(const Agent& a, const proto::JobSpec& s) {
  proto::Message m = harness::raw_request(a.socket, proto::SubmitReq{s});
  auto* e = std::get_if<proto::ErrorRep>(&m);
  return e ? e->code + ": " + e->message : "accepted";
}
}  // namespace

TEST_CASE("thousands of idle connections of one user: root is served, the user is told why", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("idleflood");
  a.start();
  Hostile flood([&] { return open_connections(a.socket, 4200); });
  INFO("connections nobody made: " << flood.result);
  auto r = node_within(a, 10);
  INFO(r.err);
  CHECK(r.rc == 0);
  auto n = node_within(a, 10, kNobody);
  INFO("nobody's corral node: rc " << n.rc << ": " << n.err);
  CHECK(n.rc == 1);
  CHECK(n.err.find("connections to corrald (at most") != std::string::npos);
  CHECK(count_lines(a.log(), "refused") <= 8);  // rate-limited, however many were refused
}

TEST_CASE("silent connections are closed after client_timeout", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("idle", {"--set", "client_timeout=1"});
  a.start();
  int fd = harness::connect_unix(a.socket);
  REQUIRE(fd >= 0);
  pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 15000) == 1);  // corrald hangs up
  char b;
  CHECK(::read(fd, &b, 1) == 0);
  ::close(fd);
  CHECK(a.log().find("silent for 1 s") != std::string::npos);
  CHECK(a.cli({"node"}).rc == 0);
}

TEST_CASE("partial large frames do not grow corrald by their announced size", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("bigframes");
  a.start();
  long before = rss_kb(a.pid);
  constexpr int kConns = 12;
  constexpr std::size_t kSend = 15u << 20;  // of a 16 MiB frame: never completed
  Hostile big([&] {
    std::vector<int> fds;
    std::vector<std::size_t> sent(kConns, 0);
    std::string chunk(1 << 16, 'x');
    for (int i = 0; i < kConns; ++i) {
      int fd = harness::connect_unix(a.socket);
      if (fd < 0) return -1L;
      ::fcntl(fd, F_SETFL, O_NONBLOCK);
      std::uint32_t len = htonl(proto::kMaxFrame);
      (void)!::write(fd, &len, 4);
      fds.push_back(fd);
    }
    // Push until every byte went or corrald stops taking them for 3 s.
    for (;;) {
      std::vector<pollfd> ps;
      for (int i = 0; i < kConns; ++i)
        if (sent[i] < kSend) ps.push_back({fds[i], POLLOUT, 0});
      if (ps.empty() || ::poll(ps.data(), ps.size(), 3000) <= 0) break;
      for (int i = 0; i < kConns; ++i) {
        if (sent[i] >= kSend) continue;
        ssize_t k = ::send(fds[i], chunk.data(), std::min(chunk.size(), kSend - sent[i]), MSG_NOSIGNAL);
        if (k > 0) sent[i] += static_cast<std::size_t>(k);
      }
    }
    long total = 0;
    for (auto s : sent) total += static_cast<long>(s);
    return total;
  });
  REQUIRE(node_within(a, 10).rc == 0);  // and its reply is read: every byte sent has been seen
  long after = rss_kb(a.pid);
  INFO("corrald VmRSS " << before << " KiB before, " << after << " KiB after; nobody sent " << big.result
                        << " bytes on " << kConns << " connections");
  CHECK(after - before < 64 * 1024);
}

TEST_CASE("a connection flood under a low open-file limit: no busy loop, few log lines", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("lownofile");
  // corrald under a hard limit of 128 open files: started through a wrapper that sets it.
  std::string real = harness::env_or("CORRALD", "build/agent/corrald"), wrapper = a.dir + "/corrald-lowfiles";
  {
    std::ofstream w(wrapper);
    w << "#!/bin/sh\nulimit -n 128\nexec '" << real << "' \"$@\"\n";
  }
  ::chmod(wrapper.c_str(), 0755);
  ::setenv("CORRALD", wrapper.c_str(), 1);
  try {
    a.start();
  } catch (...) {
    ::setenv("CORRALD", real.c_str(), 1);
    throw;
  }
  ::setenv("CORRALD", real.c_str(), 1);
  REQUIRE(harness::slurp("/proc/" + std::to_string(a.pid) + "/limits").find("Max open files            128") !=
          std::string::npos);
  Hostile flood([&] { return open_connections(a.socket, 1000); });
  double cpu0 = cpu_s(a.pid);
  auto t0 = std::chrono::steady_clock::now();
  // A window in which a busy loop would burn the CPU and write its line thousands of times.
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3)) REQUIRE(node_within(a, 10).rc == 0);
  double cpu = cpu_s(a.pid) - cpu0;
  std::string log = a.log();
  INFO("corrald CPU over 3 s: " << cpu << " s; connections made: " << flood.result);
  CHECK(count_lines(log, "accept:") <= 5);
  CHECK(count_lines(log, "refused") <= 8);
  CHECK(cpu < 1.5);
}

TEST_CASE("out of file descriptors (EMFILE): one log line, no busy loop, served once they close", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("emfile");
  a.start();
  // Its limit lowered under it: the connection cap it computed at start no longer keeps it below
  // the limit, so a flood runs it out of descriptors.
  const int limit = open_fds(a.pid) + 16;
  auto pl = harness::run({"/usr/bin/prlimit", "--pid", std::to_string(a.pid),
                          "--nofile=" + std::to_string(limit) + ":" + std::to_string(limit)});
  INFO(pl.err);
  REQUIRE(pl.rc == 0);
  std::string log;
  {
    Hostile flood([&] { return open_connections(a.socket, 300); });
    INFO("connections made: " << flood.result);
    for (int t = 0; t < 200 && log.find("Too many open files") == std::string::npos; ++t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      log = a.log();
    }
    REQUIRE(log.find("Too many open files") != std::string::npos);
    double cpu0 = cpu_s(a.pid);
    // The window is what is measured: a busy loop (accept failing at once, again and again)
    // would burn the CPU in it.
    std::this_thread::sleep_for(std::chrono::seconds(3));
    double cpu = cpu_s(a.pid) - cpu0;
    INFO("corrald CPU over 3 s out of descriptors: " << cpu << " s");
    CHECK(cpu < 0.5);
  }  // the flood goes: its connections close
  // Served again once the descriptors are free (within seconds, not one paused second per
  // batch of the dead connections still queued).
  harness::Result r;
  for (int t = 0; t < 100 && (r = node_within(a, 10)).rc != 0; ++t)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  INFO(r.err);
  CHECK(r.rc == 0);
  log = a.log();
  INFO(log);
  CHECK(count_lines(log, "Too many open files") == 1);
}

TEST_CASE("operators act on every job and are served past the per-user limit; others are not",
          "[agent]") {
  SKIP_UNLESS_ROOT();
  const int op = test_user_in("corralop", "corralops");
  if (op < 0) {
    CORRAL_SKIP("cannot create the user corralop in group corralops (useradd, groupadd)");
    return;
  }
  const int stranger = 4242;  // no account, no group
  Agent a("operators", {"--set", "operators=corralops"});
  a.start();
  auto s = a.submit({"-l", "walltime=600", "--wrap", "sleep 300"}, kNobody);
  REQUIRE(s.rc == 0);
  std::string id = harness::trim(s.out);
  REQUIRE(harness::wait_state(a, id, "running") == "running");

  auto no = a.cli({"cancel", id}, stranger);
  CHECK(no.rc != 0);
  CHECK(no.err.find("only its owner, root or a member of group corralops may cancel it") != std::string::npos);
  auto nosus = a.cli({"suspend", id}, stranger);
  CHECK(nosus.rc != 0);
  CHECK(nosus.err.find("only root or a member of group corralops may suspend jobs") != std::string::npos);
  for (const char* act : {"suspend", "resume"}) {
    auto r = a.cli({act, id}, op);
    INFO(act << ": " << r.err);
    CHECK(r.rc == 0);
  }
  auto c = a.cli({"cancel", id}, op);
  INFO(c.err);
  CHECK(c.rc == 0);
  REQUIRE(harness::wait_state(a, id, "ended") == "ended");
  CHECK(a.log().find("job " + id + " cancel requested by corralop") != std::string::npos);

  // Past the per-user limit (128): the operator is served, another user is told why.
  {
    Hostile ops([&] { return open_connections(a.socket, 200); }, 8192, op);
    CHECK(ops.result == 200);
    auto r = node_within(a, 10, op);
    INFO(r.err);
    CHECK(r.rc == 0);
  }
  Hostile many([&] { return open_connections(a.socket, 200); }, 8192, stranger);
  auto r = node_within(a, 10, stranger);
  CHECK(r.rc != 0);
  CHECK(r.err.find("connections to corrald (at most 128)") != std::string::npos);
}

TEST_CASE("a newline sent to corrald cannot forge a log line", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("forge");
  a.start();
  msgpack::sbuffer sb;
  msgpack::packer<msgpack::sbuffer> pk(sb);
  pk.pack_array(4);
  pk.pack(std::string("corral"));
  pk.pack(proto::kVersion);
  pk.pack(std::string("x\n2026-01-01T00:00:00.000Z corrald: FORGED"));
  pk.pack_map(0);
  int fd = harness::connect_unix(a.socket);
  REQUIRE(fd >= 0);
  std::string f = proto::frame(std::string_view(sb.data(), sb.size()));
  REQUIRE(::write(fd, f.data(), f.size()) == static_cast<ssize_t>(f.size()));
  char b[4096];
  while (::read(fd, b, sizeof b) > 0) {
  }
  ::close(fd);
  std::string log = a.log();
  CHECK(log.find("unknown message type") != std::string::npos);
  CHECK(log.find("\n2026-01-01T00:00:00.000Z corrald: FORGED") == std::string::npos);
}

TEST_CASE("job names that cannot work are refused at submit with the reason", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("names");
  a.start();
  struct Case {
    std::string name, msg;
  };
  std::vector<Case> cases = {{std::string(255, 'n'), "at most 200"},
                             {"a/b", "'/'"},
                             {"two\nlines", "control characters"},
                             {"", "empty"}};
  for (const auto& c : cases) {
    auto r = a.submit({"-N", c.name, "-l", "walltime=60", "--wrap", "true"});
    INFO("name '" << c.name << "': " << r.err);
    CHECK(r.rc == 2);
    CHECK(r.err.find(c.msg) != std::string::npos);
    if (c.name.empty()) continue;  // a raw client's empty name is "not given"
    proto::JobSpec s = good_spec(a);
    s.name = c.name;
    std::string why = refusal(a, s);
    INFO("raw: " << why);
    CHECK(why.rfind("invalid: ", 0) == 0);
    CHECK(why.find(c.msg) != std::string::npos);
  }
  auto st = a.cli({"stat"});
  CHECK(st.out.find("n/b") == std::string::npos);
  CHECK(count_lines(st.out, "") == 1);  // the header only: nothing was accepted
}

TEST_CASE("a raw client's fields are checked as strictly as corral submit checks them", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("rawfields");
  a.start();
  struct Case {
    void (*set)(proto::JobSpec&);
    std::string msg;
  };
  std::vector<Case> cases = {
      {[](proto::JobSpec& s) { s.walltime = INT64_MAX; }, "walltime of"},
      {[](proto::JobSpec& s) { s.walltime = -5; }, "walltime must not be negative"},
      {[](proto::JobSpec& s) { s.ncpus = -3; }, "ncpus must be at least 1"},
      {[](proto::JobSpec& s) { s.ncpus = INT32_MAX; }, "ncpus="},
      {[](proto::JobSpec& s) { s.mem_mb = INT64_MAX; }, "beyond any node"},
      {[](proto::JobSpec& s) { s.jobfs_mb = -1; }, "jobfs must not be negative"},
      {[](proto::JobSpec& s) { s.umask = 01000; }, "umask"},
      {[](proto::JobSpec& s) { s.cwd = "relative"; }, "absolute path"},
      {[](proto::JobSpec& s) { s.env = {"NOEQUALS"}; }, "not KEY=VALUE"},
      {[](proto::JobSpec& s) { s.queue = std::string(100, 'q'); }, "queue name"},
      {[](proto::JobSpec& s) { s.slots_min = 2; s.slots_max = 4; }, "parallel environment name"},
      {[](proto::JobSpec& s) { s.stdout_path = "out\nx"; }, "newline"},
  };
  for (const auto& c : cases) {
    proto::JobSpec s = good_spec(a);
    c.set(s);
    std::string why = refusal(a, s);
    INFO("expected '" << c.msg << "', got " << why);
    CHECK(why.rfind("invalid: ", 0) == 0);
    CHECK(why.find(c.msg) != std::string::npos);
  }
  CHECK(refusal(a, good_spec(a)) == "accepted");
  // The command refuses the same with the same words, before sending.
  auto r = a.submit({"-l", "walltime=99999999999", "--wrap", "true"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("walltime of") != std::string::npos);
}

TEST_CASE("a job's files follow the submitter's umask", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("umask");
  a.start();
  mode_t old = ::umask(077);  // the submitting `corral` inherits it
  auto r = a.submit({"-l", "walltime=60", "-o", "out.txt", "--wrap", "echo hi; touch made.txt"});
  ::umask(old);
  REQUIRE(r.rc == 0);
  std::string id = harness::trim(r.out);
  REQUIRE(harness::wait_state(a, id, "ended") == "ended");
  struct stat out{}, made{};
  REQUIRE(::stat((a.dir + "/work/out.txt").c_str(), &out) == 0);
  REQUIRE(::stat((a.dir + "/work/made.txt").c_str(), &made) == 0);
  CHECK((out.st_mode & 077) == 0);
  CHECK((made.st_mode & 077) == 0);
  CHECK(harness::run({"/bin/cat", a.dir + "/work/out.txt"}, kNobody).rc != 0);  // nobody cannot read it
}

TEST_CASE("corrald gone before answering a submit: the client says it may have been accepted", "[agent]") {
  std::string dir = harness::make_tmpdir("fakeserver");
  std::string path = dir + "/sock";
  int ls = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  REQUIRE(::bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(ls, 4) == 0);
  std::thread server([ls] {  // reads the whole request, then dies without a word
    int fd = ::accept(ls, nullptr, nullptr);
    proto::FrameReader rd;
    std::string frame;
    char b[65536];
    ssize_t n;
    while (!rd.next(frame) && (n = ::read(fd, b, sizeof b)) > 0) rd.feed(b, static_cast<std::size_t>(n));
    ::close(fd);
  });
  auto r = harness::run({harness::env_or("CORRAL", "build/tools/corral"), "submit", "-N", "lost", "--wrap", "true"},
                        -1, dir, {"CORRAL_SOCKET=" + path});
  server.join();
  ::close(ls);
  (void)!std::system(("rm -rf '" + dir + "'").c_str());
  INFO(r.err);
  CHECK(r.rc == 1);
  CHECK(r.err.find("may have been accepted") != std::string::npos);
  CHECK(r.err.find("corral stat") != std::string::npos);
  CHECK(r.err.find("'lost'") != std::string::npos);
}
