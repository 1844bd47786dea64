// Everything a replica takes from the world, behind one interface: the clock,
// randomness, deferred work and the network. The deterministic simulation
// (sim_env.hpp) and the real ZeroMQ loop (zmq_env.hpp) implement it; the raft
// layer reads no clock and opens no socket of its own, so a seed replays a
// whole cluster's history exactly.
#pragma once

#include <cstdint>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace corral::service {

class Env {
 public:
  using RecvFn = std::function<void(std::string_view bytes)>;

  virtual ~Env() = default;
  // Milliseconds on a clock that never goes back.
  virtual std::uint64_t now_ms() = 0;
  // Seconds since the epoch, for the times the log records and the plan
  // reasons about (the simulation's is virtual too, so a seed replays).
  virtual double wall_s() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  // A number in [min, max].
  virtual int random(int min, int max) = 0;
  // Runs `fn` on the loop after `delay_ms` (0: on a later turn, never inline).
  virtual void post(std::uint64_t delay_ms, std::function<void()> fn) = 0;
  // Best effort: the bytes may be lost, delayed or reordered.
  virtual void send(std::uint64_t to, const std::string& address, std::string bytes) = 0;
  // Incoming bytes go to `recv` from now on; an empty function stops them.
  virtual void listen(RecvFn recv) = 0;
  // How long a write to stable storage takes here (the simulation varies it).
  virtual std::uint64_t disk_latency_ms() { return 0; }
};

}  // namespace corral::service
