// A member's published channel (docs/mesh.md, "Channels"): its PUB socket,
// at its publish address, carries its node (once and on change), the jobs it
// runs (on every change), each a numbered event, and a heartbeat; its SUB
// sockets, one per publisher it follows, feed a ReportFeed, and the
// snapshots a gap calls for go over the request channel (the caller's
// `ask`). Every socket uses CURVE when the mesh does: the PUB socket lets in
// only subscribers with an allowed key. On the mesh thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "coordinator/service/report_feed.hpp"
#include "coordinator/service/zmq_env.hpp"
#include "proto/mesh_link.hpp"

namespace corral::service {
class CurveAuth;
}

namespace corral::agent {

class MeshFeed {
 public:
  // What this member says of itself beside its node: as a heartbeat and a snapshot carry it.
  struct View {
    std::string name, address, state;
    std::uint64_t term = 0, commit_index = 0;
  };
  // Asks `publisher` for a snapshot (over the request channel).
  using Ask = std::function<void(std::uint64_t publisher)>;
  // A publisher's report changed or was heard again (`current` or not).
  using Heard = std::function<void(std::uint64_t publisher, const service::FeedReport& r)>;

  // Binds the PUB socket at `publish` ("tcp://host:port"); throws zmq::error_t.
  MeshFeed(service::ZmqLoop& loop, service::CurveAuth* curve, std::string mesh, std::uint64_t id,
           const std::string& publish, Ask ask, Heard heard);
  ~MeshFeed();
  MeshFeed(const MeshFeed&) = delete;
  MeshFeed& operator=(const MeshFeed&) = delete;

  // Publishes an event for each part of the node that differs from the last published.
  void publish(std::int32_t cores, std::int64_t mem_mb, std::int64_t jobfs_mb,
               const std::vector<std::uint64_t>& running);
  void heartbeat(const View& v);
  // The last heartbeat (state kStopping), sent before the socket closes.
  void goodbye(View v);
  // The answer to a snapshot ask: what was last published, and its number.
  proto::link::Snapshot snapshot(const View& v) const;

  // Follows exactly these publishers ("tcp://host:port" of their publish addresses).
  void follow(const std::set<std::string>& endpoints);
  // A message of the channel (or a snapshot from the request channel).
  void on(const proto::link::Message& m);
  const service::ReportFeed& reports() const { return feed_; }
  std::uint64_t incarnation() const { return incarnation_; }

 private:
  void send(const proto::link::Message& m);
  void readable(zmq::socket_t& s);
  template <class T>
  bool ours(const T& m) const { return m.mesh == mesh_ && m.id != 0 && m.id != id_; }

  service::ZmqLoop& loop_;
  service::CurveAuth* curve_;
  std::string mesh_;
  std::uint64_t id_;
  Ask ask_;
  Heard heard_;
  std::uint64_t incarnation_;          // this start's: the wall clock in ms
  std::uint64_t seq_ = 0;              // the last event published
  bool node_sent_ = false, jobs_sent_ = false;
  proto::link::NodeEvent node_;        // as last published
  proto::link::JobsEvent jobs_;
  zmq::socket_t pub_;
  std::map<std::string, zmq::socket_t> subs_;  // by publisher endpoint
  std::set<std::string> no_key_;               // publishers whose key the allowed file lacks
  service::ReportFeed feed_;
};

}  // namespace corral::agent
