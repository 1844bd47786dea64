// The Env raft runs on in a mesh member: the mesh's own messages on the same
// sockets (link messages, proto/mesh_link.hpp; jobs messages, proto/mesh_jobs.hpp)
// are taken out of the received bytes before raft sees them.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "coordinator/service/env.hpp"
#include "proto/mesh_jobs.hpp"
#include "proto/mesh_link.hpp"

namespace corral::service {

class LinkEnv final : public Env {
 public:
  using Handler = std::function<void(std::string_view)>;
  LinkEnv(Env& inner, Handler on_link, Handler on_jobs)
      : inner_(inner), on_link_(std::move(on_link)), on_jobs_(std::move(on_jobs)) {
    inner_.listen([this](std::string_view b) {
      if (proto::link::is_link(b)) on_link_(b);
      else if (proto::jobs::is_jobs(b)) on_jobs_(b);
      else if (raft_) raft_(b);
    });
  }
  ~LinkEnv() override { inner_.listen({}); }
  std::uint64_t now_ms() override { return inner_.now_ms(); }
  double wall_s() override { return inner_.wall_s(); }
  int random(int min, int max) override { return inner_.random(min, max); }
  void post(std::uint64_t delay_ms, std::function<void()> fn) override { inner_.post(delay_ms, std::move(fn)); }
  void send(std::uint64_t to, const std::string& address, std::string bytes) override {
    inner_.send(to, address, std::move(bytes));
  }
  void listen(RecvFn recv) override { raft_ = std::move(recv); }
  std::uint64_t disk_latency_ms() override { return inner_.disk_latency_ms(); }

 private:
  Env& inner_;
  Handler on_link_, on_jobs_;
  RecvFn raft_;
};

}  // namespace corral::service
