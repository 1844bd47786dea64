// Ports on 127.0.0.1 nobody listens on right now, for meshes of corrald on
// loopback (the mesh tests without namespaces, bench/failover).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>

namespace corral_test {

// `port` 0: any free one. Returns the port bound, or 0 when it is taken.
inline int try_port(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("no socket for a free port on 127.0.0.1");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  return ok ? ntohs(a.sin_port) : 0;
}

inline int free_port() {
  int p = try_port(0);
  if (p == 0) throw std::runtime_error("no free port on 127.0.0.1");
  return p;
}

// A mesh member's listen port P with P + 1 free too (its publish port, docs/mesh.md), and
// neither handed out before by this process.
inline int free_port_pair() {
  static std::mutex mu;
  static std::set<int> given;
  std::lock_guard<std::mutex> lock(mu);
  for (int tries = 0; tries < 200; ++tries) {
    int p = free_port();
    if (p >= 65535 || given.count(p) || given.count(p + 1) || try_port(p + 1) == 0) continue;
    given.insert({p, p + 1});
    return p;
  }
  throw std::runtime_error("no two free ports in a row on 127.0.0.1");
}

}  // namespace corral_test
