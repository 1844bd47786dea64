#include "agent/events.hpp"

#include <sys/stat.h>
#include <zmq.h>

#include <stdexcept>

#include "agent/log.hpp"

namespace corral::agent {

void EventPublisher::set_origin(std::string node, double boot) {
  node_ = std::move(node);
  boot_ = boot;
}

void EventPublisher::open(const std::string& endpoint) {
  if (endpoint.empty() || endpoint == "none") return;
  zctx_ = zmq_ctx_new();
  zpub_ = zmq_socket(zctx_, ZMQ_PUB);
  int linger = 0, hwm = 100000;
  zmq_setsockopt(zpub_, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(zpub_, ZMQ_SNDHWM, &hwm, sizeof hwm);
  if (endpoint.rfind("ipc://", 0) == 0) {
    std::string p = endpoint.substr(6);
    std::string dir = p.substr(0, p.rfind('/'));
    if (!dir.empty()) ::mkdir(dir.c_str(), 0755);
  }
  if (zmq_bind(zpub_, endpoint.c_str()) != 0)
    throw std::runtime_error("cannot publish on " + endpoint + ": " + zmq_strerror(zmq_errno()));
  log_line("publishing events on " + endpoint);
}

void EventPublisher::publish(proto::Event& e) {
  e.seq = ++seq_;
  e.time = wall_now();
  e.node = node_;
  e.boot = boot_;
  if (!zpub_) return;
  out_.push_back(e);
}

void EventPublisher::withdraw(std::uint64_t job) {
  // The queue holds the last numbers given out, consecutive: renumbered from its first one.
  std::uint64_t n = seq_ - out_.size();
  std::erase_if(out_, [job](const proto::Event& e) { return e.job == job; });
  for (auto& e : out_) e.seq = ++n;
  seq_ = n;
}

void EventPublisher::flush() {
  for (const auto& e : out_) {
    std::string topic = "corral." + e.kind, payload = proto::encode(e);
    zmq_send(zpub_, topic.data(), topic.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(zpub_, payload.data(), payload.size(), ZMQ_DONTWAIT);
  }
  out_.clear();
}

void EventPublisher::close() {
  if (zpub_) {
    flush();
    zmq_close(zpub_);
    zpub_ = nullptr;
  }
  if (zctx_) zmq_ctx_term(zctx_);
  zctx_ = nullptr;
}

}  // namespace corral::agent
