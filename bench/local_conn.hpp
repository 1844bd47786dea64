// A client of corrald's local socket for the benchmarks: framed proto
// messages, one request and its answer at a time (or pipelined by the caller).
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "proto/proto.hpp"

namespace corral::bench {

struct Conn {
  int fd = -1;
  proto::FrameReader rd;
  explicit Conn(const std::string& path) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ~Conn() {
    if (fd >= 0) ::close(fd);
  }
  void send(const proto::Message& m) {
    std::string f = proto::frame(proto::encode(m));
    std::size_t off = 0;
    while (off < f.size()) {
      ssize_t n = ::write(fd, f.data() + off, f.size() - off);
      if (n <= 0) throw std::runtime_error("write to corrald failed");
      off += static_cast<std::size_t>(n);
    }
  }
  proto::Message recv() {
    std::string frame;
    char b[65536];
    while (!rd.next(frame)) {
      ssize_t n = ::read(fd, b, sizeof b);
      if (n <= 0) throw std::runtime_error("corrald closed the connection");
      rd.feed(b, static_cast<std::size_t>(n));
    }
    return proto::decode(frame);
  }
};

}  // namespace corral::bench
