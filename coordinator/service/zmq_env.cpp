#include "coordinator/service/zmq_env.hpp"

#include <chrono>
#include <csignal>

#include "coordinator/service/curve_auth.hpp"

namespace corral::service {
namespace {

std::uint64_t steady_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

ZmqLoop::ZmqLoop() : start_(steady_ms()) {
  // A peer that vanishes mid-write must not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
}

ZmqLoop::~ZmqLoop() = default;

std::uint64_t ZmqLoop::now_ms() const { return steady_ms() - start_; }

void ZmqLoop::at(std::uint64_t delay_ms, std::function<void()> fn) {
  timers_.push(Timer{now_ms() + delay_ms, seq_++, std::move(fn)});
}

void ZmqLoop::watch(zmq::socket_t& s, std::function<void()> readable) {
  sockets_[s.handle()] = std::move(readable);
}

void ZmqLoop::unwatch(zmq::socket_t& s) { sockets_.erase(s.handle()); }

void ZmqLoop::run_once(std::uint64_t max_wait_ms) {
  std::uint64_t now = now_ms();
  std::uint64_t wait = max_wait_ms;
  if (!timers_.empty()) wait = timers_.top().time > now ? std::min(wait, timers_.top().time - now) : 0;
  std::vector<zmq::pollitem_t> items;
  std::vector<void*> handles;
  for (const auto& [h, fn] : sockets_) {
    items.push_back(zmq::pollitem_t{h, 0, ZMQ_POLLIN, 0});
    handles.push_back(h);
  }
  zmq::poll(items.data(), items.size(), std::chrono::milliseconds(wait));
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!(items[i].revents & ZMQ_POLLIN)) continue;
    auto it = sockets_.find(handles[i]);  // an earlier handler may have closed it
    if (it != sockets_.end()) {
      auto fn = it->second;
      fn();
    }
  }
  now = now_ms();
  while (!timers_.empty() && timers_.top().time <= now) {
    Timer t = timers_.top();
    timers_.pop();
    t.fn();
  }
}

bool ZmqLoop::run_until(const std::function<bool()>& done, std::uint64_t timeout_ms) {
  std::uint64_t end = now_ms() + timeout_ms;
  while (!done()) {
    std::uint64_t now = now_ms();
    if (now >= end) return false;
    run_once(std::min<std::uint64_t>(end - now, 10));
  }
  return true;
}

ZmqEnv::ZmqEnv(ZmqLoop& loop, const std::string& bind, CurveAuth* curve)
    : loop_(loop), curve_(curve), router_(loop.context(), zmq::socket_type::router),
      rng_(std::random_device{}()), alive_(std::make_shared<ZmqEnv*>(this)) {
  router_.set(zmq::sockopt::linger, 0);
  if (curve_) curve_->serve(router_);
  router_.bind(bind);
  address_ = router_.get(zmq::sockopt::last_endpoint);
  loop_.watch(router_, [this] { readable(); });
}

ZmqEnv::~ZmqEnv() {
  loop_.unwatch(router_);
  for (auto& [addr, s] : peers_) s.close();
  router_.close();
}

int ZmqEnv::random(int min, int max) {
  return min + static_cast<int>(rng_() % static_cast<std::uint64_t>(max - min + 1));
}

void ZmqEnv::post(std::uint64_t delay_ms, std::function<void()> fn) {
  std::weak_ptr<ZmqEnv*> w = alive_;
  loop_.at(delay_ms, [w, fn = std::move(fn)] {
    if (w.lock()) fn();
  });
}

void ZmqEnv::send(std::uint64_t, const std::string& address, std::string bytes) {
  auto it = peers_.find(address);
  if (it == peers_.end()) {
    zmq::socket_t s(loop_.context(), zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::immediate, 1);      // no queueing for a peer that is not connected
    s.set(zmq::sockopt::sndhwm, 1000);
    s.set(zmq::sockopt::reconnect_ivl, 20);
    s.set(zmq::sockopt::reconnect_ivl_max, 200);
    if (curve_ && !curve_->client(s, address)) return;
    s.connect(address);
    it = peers_.emplace(address, std::move(s)).first;
  }
  // Best effort, as raft expects of its transport: a full or absent peer loses it.
  (void)it->second.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
}

void ZmqEnv::readable() {
  while (true) {
    zmq::message_t id, body;
    if (!router_.recv(id, zmq::recv_flags::dontwait)) return;
    if (!id.more() || !router_.recv(body, zmq::recv_flags::dontwait)) continue;
    while (body.more()) {  // a stray extra frame: drain it
      zmq::message_t extra;
      if (!router_.recv(extra, zmq::recv_flags::dontwait)) break;
    }
    if (recv_) {
      RecvFn recv = recv_;
      recv(std::string_view(static_cast<const char*>(body.data()), body.size()));
    }
  }
}

}  // namespace corral::service
