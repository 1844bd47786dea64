// corrald's event publisher: job and node events over ZeroMQ PUB, topic
// "corral.<kind>", each numbered (seq) so that a subscriber sees any gap.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "proto/proto.hpp"

namespace corral::agent {

class EventPublisher {
 public:
  EventPublisher() = default;
  ~EventPublisher() { close(); }
  EventPublisher(const EventPublisher&) = delete;
  EventPublisher& operator=(const EventPublisher&) = delete;

  // Who publishes: stamped on every event (node name, agent boot time).
  void set_origin(std::string node, double boot);
  // Binds `endpoint` (an ipc:// directory is made); "" or "none" publishes
  // nothing. Throws std::runtime_error when it cannot bind.
  void open(const std::string& endpoint);
  // Numbers and stamps `e`, and queues it when open. flush() sends it: before
  // any reply leaves, so that ZeroMQ's I/O threads do not compete for the
  // CPUs between a job's end and the next start on its slot.
  void publish(proto::Event& e);
  // Sends what is queued, in order. Never blocks on a slow subscriber: at the
  // high-water mark events are dropped (the subscriber sees the gap in seq).
  void flush();
  // Sends what is queued and closes the socket.
  void close();

 private:
  void* zctx_ = nullptr;  // raw API keeps the header light
  void* zpub_ = nullptr;
  std::uint64_t seq_ = 0;
  std::string node_;
  double boot_ = 0;
  std::vector<std::pair<std::string, std::string>> out_;  // (topic, payload), not yet sent
};

}  // namespace corral::agent
