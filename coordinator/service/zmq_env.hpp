// The real world for replicas: wall-clock time, a poll loop, and raft's
// messages carried over ZeroMQ (one ROUTER per member to receive, one DEALER
// per peer to send), so the mesh's later CURVE encryption covers them too.
// One ZmqLoop may drive several members (tests run a whole mesh in one
// thread); everything runs on the thread that calls run_*().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "coordinator/service/env.hpp"

namespace corral::service {

class ZmqLoop {
 public:
  ZmqLoop();
  ~ZmqLoop();

  zmq::context_t& context() { return ctx_; }
  std::uint64_t now_ms() const;
  void at(std::uint64_t delay_ms, std::function<void()> fn);
  void watch(zmq::socket_t& s, std::function<void()> readable);
  void unwatch(zmq::socket_t& s);

  // Runs due timers and ready sockets, waiting at most `max_wait_ms`.
  void run_once(std::uint64_t max_wait_ms);
  // Runs until `done()` holds (true) or `timeout_ms` passed (false).
  bool run_until(const std::function<bool()>& done, std::uint64_t timeout_ms);

 private:
  struct Timer {
    std::uint64_t time;
    std::uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Timer& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  zmq::context_t ctx_;
  std::uint64_t start_;
  std::uint64_t seq_ = 0;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  std::map<void*, std::function<void()>> sockets_;
};

class CurveAuth;

class ZmqEnv final : public Env {
 public:
  // Binds the member's ROUTER at `bind` (e.g. "tcp://127.0.0.1:0" for any
  // free port; address() then tells which). With `curve` (it outlives this
  // env), every socket uses CURVE (curve_auth.hpp).
  ZmqEnv(ZmqLoop& loop, const std::string& bind, CurveAuth* curve = nullptr);
  ~ZmqEnv() override;

  const std::string& address() const { return address_; }

  std::uint64_t now_ms() override { return loop_.now_ms(); }
  int random(int min, int max) override;
  void post(std::uint64_t delay_ms, std::function<void()> fn) override;
  void send(std::uint64_t to, const std::string& address, std::string bytes) override;
  void listen(RecvFn recv) override { recv_ = std::move(recv); }

 private:
  void readable();

  ZmqLoop& loop_;
  CurveAuth* curve_;
  zmq::socket_t router_;
  std::string address_;
  std::map<std::string, zmq::socket_t> peers_;  // by address
  RecvFn recv_;
  std::mt19937_64 rng_;
  // Posted work holds a weak reference: once this env is gone it does nothing.
  std::shared_ptr<ZmqEnv*> alive_;
};

}  // namespace corral::service
