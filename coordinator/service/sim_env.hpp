// A deterministic world for replicas: virtual time, one seeded random source,
// and a network that loses, delays and reorders messages and can be cut
// between any two members. Every event runs from step(), one at a time, in
// (time, sequence) order, so one seed replays one history exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/service/env.hpp"

namespace corral::service {

struct SimFaults {
  double loss = 0;                 // probability that a message is lost
  unsigned min_delay_ms = 1;       // each message takes a delay in [min, max]:
  unsigned max_delay_ms = 5;       // a spread reorders messages
  unsigned max_disk_ms = 2;        // a disk write takes [0, max]
};

class SimNet {
 public:
  explicit SimNet(std::uint64_t seed);
  ~SimNet();

  // The Env of member `id` (made on first use, kept across its crashes).
  Env& env(std::uint64_t id);

  void set_faults(const SimFaults& f) { faults_ = f; }
  const SimFaults& faults() const { return faults_; }
  // Messages between a and b (both ways) are lost until heal().
  void cut(std::uint64_t a, std::uint64_t b);
  void heal(std::uint64_t a, std::uint64_t b);
  void heal_all() { cuts_.clear(); }
  bool is_cut(std::uint64_t a, std::uint64_t b) const;

  std::uint64_t now() const { return now_; }
  // A number in [lo, hi] from the world's random source.
  std::uint64_t uniform(std::uint64_t lo, std::uint64_t hi);
  bool chance(double p);

  // Runs the next event; false when nothing is scheduled.
  bool step();
  // Runs every event due within `ms` of now, then sets the clock there.
  void run_for(std::uint64_t ms);
  // Runs until `done()` holds (true) or `max_ms` of virtual time passed (false).
  bool run_until(const std::function<bool()>& done, std::uint64_t max_ms);

  std::uint64_t delivered() const { return delivered_; }
  std::uint64_t dropped() const { return dropped_; }

 private:
  class Endpoint;
  struct Event {
    std::uint64_t time;
    std::uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Event& o) const {
      return time != o.time ? time > o.time : seq > o.seq;
    }
  };
  void at(std::uint64_t delay, std::function<void()> fn);
  void transmit(std::uint64_t from, std::uint64_t to, std::string bytes);

  std::uint64_t now_ = 0;
  std::uint64_t seq_ = 0;
  std::uint64_t rng_;
  SimFaults faults_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::map<std::uint64_t, std::unique_ptr<Endpoint>> endpoints_;
  std::set<std::pair<std::uint64_t, std::uint64_t>> cuts_;
  std::uint64_t delivered_ = 0;
  std::uint64_t dropped_ = 0;
};

}  // namespace corral::service
