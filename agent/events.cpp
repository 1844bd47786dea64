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
  out_.emplace_back("corral." + e.kind, proto::encode(e));
}

void EventPublisher::flush() {
  for (const auto& [topic, payload] : out_) {
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
