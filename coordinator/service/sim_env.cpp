#include "coordinator/service/sim_env.hpp"

namespace corral::service {

namespace {
constexpr double kSimEpoch = 1.8e9;  // a fixed wall clock at virtual time 0
}  // namespace

class SimNet::Endpoint final : public Env {
 public:
  Endpoint(SimNet& net, std::uint64_t id) : net_(net), id_(id) {}
  std::uint64_t now_ms() override { return net_.now_; }
  double wall_s() override { return kSimEpoch + static_cast<double>(net_.now_) / 1000; }
  int random(int min, int max) override {
    return static_cast<int>(net_.uniform(static_cast<std::uint64_t>(min), static_cast<std::uint64_t>(max)));
  }
  void post(std::uint64_t delay_ms, std::function<void()> fn) override { net_.at(delay_ms, std::move(fn)); }
  void send(std::uint64_t to, const std::string&, std::string bytes) override {
    net_.transmit(id_, to, std::move(bytes));
  }
  void listen(RecvFn recv) override { recv_ = std::move(recv); }
  std::uint64_t disk_latency_ms() override { return net_.uniform(0, net_.faults_.max_disk_ms); }

  RecvFn recv_;

 private:
  SimNet& net_;
  std::uint64_t id_;
};

SimNet::SimNet(std::uint64_t seed) : rng_(seed * 0x9E3779B97F4A7C15ull + 1) {}
SimNet::~SimNet() = default;

Env& SimNet::env(std::uint64_t id) {
  auto& ep = endpoints_[id];
  if (!ep) ep = std::make_unique<Endpoint>(*this, id);
  return *ep;
}

std::uint64_t SimNet::uniform(std::uint64_t lo, std::uint64_t hi) {
  // splitmix64: fully specified, the same on every platform.
  std::uint64_t z = (rng_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return hi <= lo ? lo : lo + z % (hi - lo + 1);
}

bool SimNet::chance(double p) { return p > 0 && static_cast<double>(uniform(0, 999999)) < p * 1e6; }

void SimNet::cut(std::uint64_t a, std::uint64_t b) { cuts_.insert({std::min(a, b), std::max(a, b)}); }
void SimNet::heal(std::uint64_t a, std::uint64_t b) { cuts_.erase({std::min(a, b), std::max(a, b)}); }
bool SimNet::is_cut(std::uint64_t a, std::uint64_t b) const {
  return cuts_.count({std::min(a, b), std::max(a, b)}) > 0;
}

void SimNet::at(std::uint64_t delay, std::function<void()> fn) {
  events_.push(Event{now_ + delay, seq_++, std::move(fn)});
}

void SimNet::transmit(std::uint64_t from, std::uint64_t to, std::string bytes) {
  if (is_cut(from, to) || chance(faults_.loss)) {
    ++dropped_;
    return;
  }
  std::uint64_t delay = uniform(faults_.min_delay_ms, faults_.max_delay_ms);
  at(delay, [this, to, bytes = std::move(bytes)] {
    auto it = endpoints_.find(to);
    if (it == endpoints_.end() || !it->second->recv_) {
      ++dropped_;  // nobody listening: the member is down
      return;
    }
    ++delivered_;
    Env::RecvFn recv = it->second->recv_;  // the receiver may stop listening inside
    recv(bytes);
  });
}

bool SimNet::step() {
  if (events_.empty()) return false;
  Event e = events_.top();
  events_.pop();
  now_ = e.time;
  e.fn();
  return true;
}

void SimNet::run_for(std::uint64_t ms) {
  std::uint64_t end = now_ + ms;
  while (!events_.empty() && events_.top().time <= end) step();
  now_ = end;
}

bool SimNet::run_until(const std::function<bool()>& done, std::uint64_t max_ms) {
  std::uint64_t end = now_ + max_ms;
  while (!done()) {
    if (events_.empty() || events_.top().time > end) {
      now_ = std::max(now_, end);
      return done();
    }
    step();
  }
  return true;
}

}  // namespace corral::service
