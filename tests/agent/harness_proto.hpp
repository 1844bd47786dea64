// The harness's raw clients of corrald: a request straight on its socket and a subscriber to
// its events. Apart from harness.hpp so that the tests that only drive `corral` do not compile
// the message definitions.
#pragma once

#include <zmq.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness.hpp"
#include "proto/proto.hpp"

namespace harness {

// One request straight on corrald's socket, bypassing `corral` and its checks (a raw client).
inline corral::proto::Message raw_request(const std::string& socket, const corral::proto::Message& req) {
  int fd = connect_unix(socket);
  if (fd < 0) throw std::runtime_error("cannot connect to " + socket);
  std::string out = corral::proto::frame(corral::proto::encode(req));
  if (::write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size())) throw std::runtime_error("write");
  corral::proto::FrameReader rd;
  std::string frame;
  char b[65536];
  ssize_t n;
  while (!rd.next(frame) && (n = ::read(fd, b, sizeof b)) > 0) rd.feed(b, static_cast<std::size_t>(n));
  ::close(fd);
  if (frame.empty()) throw std::runtime_error("corrald closed without answering");
  return corral::proto::decode(frame);
}

// A subscriber to an agent's events (its --pub endpoint), in the order they came.
struct Events {
  void* ctx = zmq_ctx_new();
  void* sub = zmq_socket(ctx, ZMQ_SUB);
  std::vector<corral::proto::Event> got;

  // Connected once an event (a heartbeat: set heartbeat_interval short) has come.
  explicit Events(const Agent& a) {
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
    int tmo = 200;
    zmq_setsockopt(sub, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    REQUIRE(zmq_connect(sub, a.pub.c_str()) == 0);
    for (int i = 0; i < 50 && got.empty(); ++i) recv_one();
    REQUIRE(!got.empty());
  }
  ~Events() {
    zmq_close(sub);
    zmq_ctx_term(ctx);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;

  // One event (waits up to 200 ms); false if none came.
  bool recv_one() {
    char topic[64];
    int n = zmq_recv(sub, topic, sizeof topic, 0);
    if (n < 0) return false;
    zmq_msg_t m;
    zmq_msg_init(&m);
    zmq_msg_recv(&m, sub, 0);
    std::string payload(static_cast<char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
    zmq_msg_close(&m);
    auto msg = corral::proto::decode(payload);
    REQUIRE(std::holds_alternative<corral::proto::Event>(msg));
    auto& e = std::get<corral::proto::Event>(msg);
    CHECK(std::string(topic, static_cast<std::size_t>(std::min(n, 64))) == "corral." + e.kind);
    got.push_back(e);
    return true;
  }
  const corral::proto::Event* find(const std::string& kind, std::uint64_t job) const {
    for (const auto& e : got)
      if (e.kind == kind && e.job == job) return &e;
    return nullptr;
  }
  // Reads events (up to ~20 s) until `kind` of `job` has come.
  const corral::proto::Event* await(const std::string& kind, std::uint64_t job) {
    for (int i = 0; i < 100 && !find(kind, job); ++i) recv_one();
    return find(kind, job);
  }
};

}  // namespace harness
