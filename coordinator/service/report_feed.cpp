#include "coordinator/service/report_feed.hpp"

namespace corral::service {

FeedReport* ReportFeed::entry(std::uint64_t id, std::uint64_t incarnation, std::uint64_t now_ms) {
  auto it = reports_.find(id);
  if (it != reports_.end() && incarnation < it->second.incarnation) return nullptr;
  if (it == reports_.end() || incarnation > it->second.incarnation) {
    const std::uint64_t asked = it == reports_.end() ? 0 : it->second.snapshots_asked;
    FeedReport fresh;
    fresh.incarnation = incarnation;
    fresh.snapshots_asked = asked;
    it = reports_.insert_or_assign(id, std::move(fresh)).first;
    track_[id] = Track{true, false, 0};
  }
  it->second.at_ms = now_ms;
  return &it->second;
}

bool ReportFeed::next(std::uint64_t id, FeedReport& r, std::uint64_t seq) {
  if (seq <= r.seq) return false;  // applied already (a snapshot got ahead of it)
  if (seq != r.seq + 1) want(id, r);  // a gap: the events between are lost
  r.seq = seq;  // an event carries its whole kind (the node, or every job): apply it anyway
  return true;
}

void ReportFeed::want(std::uint64_t id, FeedReport& r) {
  Track& t = track_[id];
  if (!t.want) t = Track{true, false, 0};
  r.current = false;
}

bool ReportFeed::ask(std::uint64_t id, FeedReport& r, std::uint64_t now_ms) {
  Track& t = track_[id];
  if (!t.want) return false;
  if (t.asked && now_ms < t.asked_ms + kAskAgainMs) return false;  // its answer may be on its way
  t.asked = true;
  t.asked_ms = now_ms;
  ++r.snapshots_asked;
  return true;
}

bool ReportFeed::on(const proto::link::NodeEvent& e, std::uint64_t now_ms) {
  FeedReport* r = entry(e.id, e.incarnation, now_ms);
  if (!r) return false;
  if (next(e.id, *r, e.seq)) {
    r->cores = e.cores;
    r->mem_mb = e.mem_mb;
    r->jobfs_mb = e.jobfs_mb;
  }
  return ask(e.id, *r, now_ms);
}

bool ReportFeed::on(const proto::link::JobsEvent& e, std::uint64_t now_ms) {
  FeedReport* r = entry(e.id, e.incarnation, now_ms);
  if (!r) return false;
  if (next(e.id, *r, e.seq)) r->running = e.running;
  return ask(e.id, *r, now_ms);
}

bool ReportFeed::on(const proto::link::Heartbeat& h, std::uint64_t now_ms) {
  FeedReport* r = entry(h.id, h.incarnation, now_ms);
  if (!r) return false;
  r->name = h.name;
  r->address = h.address;
  r->state = h.state;
  r->term = h.term;
  r->commit_index = h.commit_index;
  if (h.seq > r->seq) want(h.id, *r);  // its last event never came
  return ask(h.id, *r, now_ms);
}

void ReportFeed::on(const proto::link::Snapshot& s, std::uint64_t now_ms) {
  FeedReport* r = entry(s.id, s.incarnation, now_ms);
  if (!r) return;
  Track& t = track_[s.id];
  if (s.seq < r->seq) return;  // older than events applied since: a newer answer follows the next ask
  r->seq = s.seq;
  r->name = s.name;
  r->address = s.address;
  r->state = s.state;
  r->term = s.term;
  r->commit_index = s.commit_index;
  r->cores = s.cores;
  r->mem_mb = s.mem_mb;
  r->jobfs_mb = s.jobfs_mb;
  r->running = s.running;
  r->current = true;
  t.want = false;
}

const FeedReport* ReportFeed::find(std::uint64_t id) const {
  auto it = reports_.find(id);
  return it == reports_.end() ? nullptr : &it->second;
}

}  // namespace corral::service
