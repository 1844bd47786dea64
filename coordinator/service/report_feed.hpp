// What a member's subscriber knows of each publisher (proto/mesh_link.hpp):
// its report, put together from its numbered events, heartbeats and
// snapshots. Events are numbered per publisher and incarnation; a subscriber
// that sees a gap (an event, or a heartbeat's last event, beyond the next
// number), or hears a publisher for the first time or in a new incarnation
// (it joined late, or the publisher restarted), asks that publisher for a
// snapshot and keeps asking, every kAskAgainMs, until one answers. Until
// then the report is not `current`: the coordinator does not take a report
// that may have missed a change of the jobs a node runs for a fresh one.
// Pure: the caller passes the time and sends the asks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/mesh_link.hpp"

namespace corral::service {

struct FeedReport {
  std::uint64_t incarnation = 0;
  std::uint64_t seq = 0;             // the last event applied
  std::string name, address;
  std::string state;                 // as its last heartbeat said
  std::uint64_t term = 0, commit_index = 0;
  std::int32_t cores = 0;
  std::int64_t mem_mb = 0, jobfs_mb = 0;
  std::vector<std::uint64_t> running;
  bool current = false;              // a snapshot came, and no gap since
  std::uint64_t at_ms = 0;           // last heard (any message)
  std::uint64_t snapshots_asked = 0;
};

class ReportFeed {
 public:
  static constexpr std::uint64_t kAskAgainMs = 500;

  // Each returns whether the publisher must be asked for a snapshot now.
  bool on(const proto::link::NodeEvent& e, std::uint64_t now_ms);
  bool on(const proto::link::JobsEvent& e, std::uint64_t now_ms);
  bool on(const proto::link::Heartbeat& h, std::uint64_t now_ms);
  // The answer to an ask: the whole report (an older one than known is ignored).
  void on(const proto::link::Snapshot& s, std::uint64_t now_ms);

  const FeedReport* find(std::uint64_t id) const;
  const std::map<std::uint64_t, FeedReport>& all() const { return reports_; }

 private:
  struct Track {
    bool want = false;               // a snapshot is wanted
    bool asked = false;              // since it is wanted
    std::uint64_t asked_ms = 0;      // when last asked
  };
  // The publisher's entry for a message of `incarnation`, or null for a stale one (an
  // older incarnation). A new publisher or incarnation starts empty, wanting a snapshot.
  FeedReport* entry(std::uint64_t id, std::uint64_t incarnation, std::uint64_t now_ms);
  // An event numbered `seq`: whether to apply it (not one applied already).
  bool next(std::uint64_t id, FeedReport& r, std::uint64_t seq);
  void want(std::uint64_t id, FeedReport& r);
  bool ask(std::uint64_t id, FeedReport& r, std::uint64_t now_ms);

  std::map<std::uint64_t, FeedReport> reports_;
  std::map<std::uint64_t, Track> track_;
};

}  // namespace corral::service
