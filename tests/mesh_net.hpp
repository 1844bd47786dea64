// A private test network for mesh tests: N network namespaces, each with one veth link to a
// bridge that lives in a namespace of its own (the hub), so the machine's own namespace gets no
// address, route or link. The nodes' addresses are in a private /24 chosen not to overlap any
// route of the machine; the namespaces have no default route, and before anything runs in them
// check_routes() makes sure each routes only to that /24 (and lo), else the Net refuses to be.
// Everything it made (namespaces, links, the processes in them) goes when it is destroyed, also
// when a test throws; a Net first removes what earlier runs left (names with kPrefix whose
// process is gone). Needs root and `ip netns`; unavailable() says why not, and the tests then
// run on loopback, saying so.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace mesh_net {

// Every namespace a Net makes is named "<kPrefix><pid>-<what>".
inline constexpr const char* kPrefix = "corraltest-";

struct Shell {
  int rc = -1;
  std::string out;
};

// Runs `cmd` with /bin/sh, stderr with stdout.
inline Shell sh(const std::string& cmd) {
  Shell r;
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char b[4096];
  std::size_t n;
  while ((n = std::fread(b, 1, sizeof b, p)) > 0) r.out.append(b, n);
  int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

// Removes every namespace named kPrefix<pid>-... and its processes, for `pid` (0: every pid
// that no longer runs: what crashed runs left).
inline void remove_namespaces(pid_t pid) {
  for (const std::string& l : lines(sh("ip netns list").out)) {
    const std::string name = l.substr(0, l.find(' '));
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string rest = name.substr(std::char_traits<char>::length(kPrefix));
    const pid_t owner = static_cast<pid_t>(std::atol(rest.substr(0, rest.find('-')).c_str()));
    if (pid ? owner != pid : (owner <= 0 || ::kill(owner, 0) == 0)) continue;
    for (const std::string& p : lines(sh("ip netns pids " + name).out)) ::kill(std::atoi(p.c_str()), SIGKILL);
    sh("ip netns del " + name);
  }
}

// Why namespaces cannot be used here, or "".
inline std::string unavailable() {
  if (::geteuid() != 0) return "not root";
  const std::string probe = kPrefix + std::to_string(::getpid()) + "-probe";
  Shell r = sh("ip netns add " + probe);
  if (r.rc != 0) return "ip netns unavailable: " + r.out;
  sh("ip netns del " + probe);
  return {};
}

// The first 10.X.Y.0/24 (X from 200) that no IPv4 route of this machine overlaps.
inline std::string free_subnet() {
  std::vector<std::pair<std::uint32_t, int>> routes;  // network, prefix length
  for (const std::string& l : lines(sh("ip -4 route show table all").out)) {
    std::stringstream in(l);
    std::string dst;
    in >> dst;
    if (dst == "local" || dst == "broadcast" || dst == "unicast") in >> dst;
    if (dst == "default") continue;  // everything: overlaps every subnet, yet it is where we must not go
    const std::size_t slash = dst.find('/');
    const int len = slash == std::string::npos ? 32 : std::atoi(dst.c_str() + slash + 1);
    unsigned a, b, c, d;
    if (std::sscanf(dst.c_str(), "%u.%u.%u.%u", &a, &b, &c, &d) != 4) continue;
    routes.emplace_back((a << 24) | (b << 16) | (c << 8) | d, len);
  }
  for (unsigned x = 200; x < 255; ++x)
    for (unsigned y = 0; y < 255; ++y) {
      const std::uint32_t net = (10u << 24) | (x << 16) | (y << 8);
      bool clash = false;
      for (auto [r, len] : routes) {
        const int common = std::min(len, 24);
        const std::uint32_t mask = common == 0 ? 0 : ~std::uint32_t{0} << (32 - common);
        clash = clash || (net & mask) == (r & mask);
      }
      if (!clash) return "10." + std::to_string(x) + "." + std::to_string(y);
    }
  throw std::runtime_error("mesh_net: no free 10.X.Y.0/24 (every one overlaps a route here)");
}

class Net {
 public:
  // n namespaces on one bridge; throws (having removed what it made) when it cannot, or when a
  // namespace routes anywhere but its subnet.
  explicit Net(int n) : tag_(kPrefix + std::to_string(::getpid()) + "-"), net_(free_subnet()) {
    remove_namespaces(0);
    try {
      hub_ = tag_ + "hub";
      run("ip netns add " + hub_);
      run("ip -n " + hub_ + " link add br0 type bridge");
      run("ip -n " + hub_ + " link set br0 up");
      for (int i = 0; i < n; ++i) add_node(i);
      for (int i = 0; i < n; ++i)
        if (std::string why = check_routes(i); !why.empty()) throw std::runtime_error(why);
    } catch (...) {
      remove_namespaces(::getpid());
      throw;
    }
  }
  ~Net() { remove_namespaces(::getpid()); }
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  int size() const { return static_cast<int>(ns_.size()); }
  const std::string& ns(int i) const { return ns_.at(static_cast<std::size_t>(i)); }
  std::string address(int i) const { return net_ + "." + std::to_string(i + 1); }
  std::string subnet() const { return net_ + ".0/24"; }
  // The argv prefix that runs a program inside node i's network namespace. nsenter, not
  // `ip netns exec`: that one also makes a mount namespace with a fresh /sys, where the cgroup
  // mounts corrald needs are gone. Same pid as the program (it execs).
  std::vector<std::string> exec_prefix(int i) const { return {"/usr/bin/nsenter", "--net=/run/netns/" + ns(i), "--"}; }
  // Node i's link down (a partition: it reaches nobody, nobody reaches it) and up again.
  void cut(int i) { run("ip -n " + hub_ + " link set " + port(i) + " down"); }
  void restore(int i) { run("ip -n " + hub_ + " link set " + port(i) + " up"); }

  // "" when node i's routes (IPv4 and IPv6, every table) lead only to the subnet or lo; else
  // the first route that leads elsewhere.
  std::string check_routes(int i) const {
    Shell r4 = sh("ip -n " + ns(i) + " -4 route show table all");
    Shell r6 = sh("ip -n " + ns(i) + " -6 route show table all");
    if (r4.rc != 0 || r6.rc != 0) return "mesh_net: cannot read the routes of " + ns(i) + ": " + r4.out + r6.out;
    for (const std::string& l : lines(r4.out + r6.out)) {
      std::stringstream in(l);
      std::string dst;
      in >> dst;
      if (dst == "local" || dst == "broadcast" || dst == "multicast" || dst == "anycast") in >> dst;
      const bool on_lo = l.find(" dev lo ") != std::string::npos || (l.size() >= 7 && l.compare(l.size() - 7, 7, " dev lo") == 0);
      const bool ours = dst.rfind(net_ + ".", 0) == 0 || dst.rfind("fe80::", 0) == 0 || dst == "ff00::/8";
      if (dst == "default" || !(on_lo || ours))
        return "mesh_net: namespace " + ns(i) + " routes beyond " + subnet() + ": '" + l + "'; refusing to run";
    }
    return {};
  }

 private:
  void run(const std::string& cmd) {
    Shell r = sh(cmd);
    if (r.rc != 0) throw std::runtime_error("mesh_net: " + cmd + ": " + r.out);
  }
  std::string port(int i) const { return "p" + std::to_string(i); }

  void add_node(int i) {
    const std::string name = tag_ + std::to_string(i);
    run("ip netns add " + name);
    ns_.push_back(name);
    run("ip -n " + hub_ + " link add " + port(i) + " type veth peer name eth0 netns " + name);
    run("ip -n " + hub_ + " link set " + port(i) + " master br0 up");
    run("ip -n " + name + " link set lo up");
    run("ip -n " + name + " addr add " + address(i) + "/24 dev eth0");
    run("ip -n " + name + " link set eth0 up");
  }

  std::string tag_, net_, hub_;
  std::vector<std::string> ns_;
};

}  // namespace mesh_net
