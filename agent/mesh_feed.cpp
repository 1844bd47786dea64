#include "agent/mesh_feed.hpp"

#include <chrono>
#include <type_traits>
#include <variant>

#include "coordinator/service/curve_auth.hpp"

namespace corral::agent {

namespace {

constexpr int kZmtpPingMs = 1000;     // a connection silent for kZmtpDeadMs is closed, and its queue dropped:
constexpr int kZmtpDeadMs = 3000;     // a subscriber cut off that long then sees a gap, not stale messages
constexpr int kGoodbyeMs = 200;       // a stopping corrald's last heartbeat: at most this long to go out

void tune(zmq::socket_t& s) {
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::heartbeat_ivl, kZmtpPingMs);
  s.set(zmq::sockopt::heartbeat_timeout, kZmtpDeadMs);
  s.set(zmq::sockopt::reconnect_ivl, 20);
  s.set(zmq::sockopt::reconnect_ivl_max, 200);
  s.set(zmq::sockopt::connect_timeout, kZmtpPingMs);  // a connect into a cut link: tried again, not for minutes
}

}  // namespace

MeshFeed::MeshFeed(service::ZmqLoop& loop, service::CurveAuth* curve, std::string mesh, std::uint64_t id,
                   const std::string& publish, Ask ask, Heard heard)
    : loop_(loop), curve_(curve), mesh_(std::move(mesh)), id_(id), ask_(std::move(ask)), heard_(std::move(heard)),
      incarnation_(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  std::chrono::system_clock::now().time_since_epoch())
                                                  .count())),
      pub_(loop.context(), zmq::socket_type::pub) {
  tune(pub_);
  pub_.set(zmq::sockopt::sndhwm, 1000);
  if (curve_) curve_->serve_publisher(pub_);
  pub_.bind(publish);
}

MeshFeed::~MeshFeed() {
  for (auto& [ep, s] : subs_) {
    loop_.unwatch(s);
    s.close();
  }
  pub_.close();
}

void MeshFeed::send(const proto::link::Message& m) {
  std::string bytes = proto::link::encode(m);
  (void)pub_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);  // no subscriber, or a full one: lost
}

void MeshFeed::publish(std::int32_t cores, std::int64_t mem_mb, std::int64_t jobfs_mb,
                       const std::vector<std::uint64_t>& running) {
  if (!node_sent_ || node_.cores != cores || node_.mem_mb != mem_mb || node_.jobfs_mb != jobfs_mb) {
    node_ = proto::link::NodeEvent{mesh_, id_, incarnation_, ++seq_, cores, mem_mb, jobfs_mb};
    node_sent_ = true;
    send(node_);
  }
  if (!jobs_sent_ || jobs_.running != running) {
    jobs_ = proto::link::JobsEvent{mesh_, id_, incarnation_, ++seq_, running};
    jobs_sent_ = true;
    send(jobs_);
  }
}

void MeshFeed::heartbeat(const View& v) {
  send(proto::link::Heartbeat{mesh_, id_, incarnation_, seq_, v.name, v.address, v.state, v.term, v.commit_index});
}

void MeshFeed::goodbye(View v) {
  v.state = std::string(proto::link::kStopping);
  heartbeat(v);
  pub_.set(zmq::sockopt::linger, kGoodbyeMs);
}

proto::link::Snapshot MeshFeed::snapshot(const View& v) const {
  return proto::link::Snapshot{mesh_,  id_,        incarnation_, seq_,         v.name,       v.address,    v.state,
                               v.term, v.commit_index, node_.cores, node_.mem_mb, node_.jobfs_mb, jobs_.running};
}

void MeshFeed::follow(const std::set<std::string>& endpoints) {
  for (auto it = subs_.begin(); it != subs_.end();) {
    if (endpoints.count(it->first)) {
      ++it;
      continue;
    }
    loop_.unwatch(it->second);
    it->second.close();
    it = subs_.erase(it);
  }
  for (const std::string& ep : endpoints) {
    if (subs_.count(ep) || no_key_.count(ep)) continue;
    zmq::socket_t s(loop_.context(), zmq::socket_type::sub);
    tune(s);
    if (curve_ && !curve_->client(s, ep)) {  // logged once: no key known for it
      no_key_.insert(ep);
      continue;
    }
    s.set(zmq::sockopt::subscribe, "");
    s.connect(ep);
    zmq::socket_t& in = subs_.emplace(ep, std::move(s)).first->second;
    loop_.watch(in, [this, &in] { readable(in); });
  }
}

void MeshFeed::readable(zmq::socket_t& s) {
  for (int n = 0; n < 256; ++n) {  // a burst at most: the loop's other sockets wait meanwhile
    zmq::message_t msg;
    if (!s.recv(msg, zmq::recv_flags::dontwait)) return;
    std::string_view bytes(static_cast<const char*>(msg.data()), msg.size());
    if (!proto::link::is_link(bytes)) continue;
    try {
      on(proto::link::decode(bytes));
    } catch (const proto::ProtoError&) {
      // dropped as a lost message: the numbers show the gap
    }
  }
}

void MeshFeed::on(const proto::link::Message& m) {
  const std::uint64_t now = loop_.now_ms();
  std::visit([&](const auto& b) {
    using T = std::decay_t<decltype(b)>;
    if constexpr (std::is_same_v<T, proto::link::NodeEvent> || std::is_same_v<T, proto::link::JobsEvent> ||
                  std::is_same_v<T, proto::link::Heartbeat>) {
      if (!ours(b)) return;
      if (feed_.on(b, now)) ask_(b.id);
      if (const service::FeedReport* r = feed_.find(b.id)) heard_(b.id, *r);
    } else if constexpr (std::is_same_v<T, proto::link::Snapshot>) {
      if (!ours(b)) return;
      feed_.on(b, now);
      if (const service::FeedReport* r = feed_.find(b.id)) heard_(b.id, *r);
    }
  }, m);
}

}  // namespace corral::agent
