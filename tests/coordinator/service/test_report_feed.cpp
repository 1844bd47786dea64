// ReportFeed: a subscriber's sequence tracking of each publisher's numbered
// events (coordinator/service/report_feed.hpp).
#include <catch2/catch.hpp>

#include "coordinator/service/report_feed.hpp"

namespace report_feed_test {

using corral::service::FeedReport;
using corral::service::ReportFeed;
namespace flink = corral::proto::link;

constexpr std::uint64_t kPub = 2;

flink::NodeEvent feed_node(std::uint64_t inc, std::uint64_t seq, int cores) {
  return {"m", kPub, inc, seq, cores, 1000, 0};
}
flink::JobsEvent feed_jobs(std::uint64_t inc, std::uint64_t seq, std::vector<std::uint64_t> running) {
  return {"m", kPub, inc, seq, std::move(running)};
}
flink::Heartbeat feed_beat(std::uint64_t inc, std::uint64_t seq) {
  return {"m", kPub, inc, seq, "n2", "h:1", "follower", 3, 9};
}
flink::Snapshot feed_snap(std::uint64_t inc, std::uint64_t seq, int cores, std::vector<std::uint64_t> running) {
  return {"m", kPub, inc, seq, "n2", "h:1", "follower", 3, 9, cores, 1000, 0, std::move(running)};
}

// A feed that heard publisher 2 (incarnation 5) from its first message and got its snapshot at `seq`.
ReportFeed feed_joined(std::uint64_t seq, std::vector<std::uint64_t> running = {}) {
  ReportFeed f;
  REQUIRE(f.on(feed_beat(5, seq), 0));  // first heard: asked
  f.on(feed_snap(5, seq, 4, std::move(running)), 1);
  REQUIRE(f.find(kPub)->current);
  return f;
}


TEST_CASE("report feed: events in order are applied and ask for nothing", "[report_feed]") {
  ReportFeed f = feed_joined(2);
  CHECK_FALSE(f.on(feed_jobs(5, 3, {7}), 10));
  CHECK_FALSE(f.on(feed_node(5, 4, 8), 20));
  CHECK_FALSE(f.on(feed_beat(5, 4), 30));
  CHECK_FALSE(f.on(feed_jobs(5, 5, {}), 40));
  const FeedReport* r = f.find(kPub);
  CHECK(r->current);
  CHECK(r->seq == 5);
  CHECK(r->cores == 8);
  CHECK(r->running.empty());
  CHECK(r->at_ms == 40);
  CHECK(r->snapshots_asked == 1);  // the first hearing's only
  CHECK_FALSE(f.on(feed_beat(5, 5), 1000));  // ever after
}

TEST_CASE("report feed: a gap in the events asks for a snapshot, which heals it", "[report_feed]") {
  ReportFeed f = feed_joined(2, {1});
  CHECK(f.on(feed_jobs(5, 4, {1, 7}), 10));  // 3 was lost
  const FeedReport* r = f.find(kPub);
  CHECK_FALSE(r->current);  // the coordinator does not take it as fresh
  CHECK(r->running == std::vector<std::uint64_t>{1, 7});  // the event's whole set, applied anyway
  CHECK(r->snapshots_asked == 2);
  CHECK_FALSE(f.on(feed_beat(5, 4), 100));   // asked not long ago
  CHECK(f.on(feed_beat(5, 4), 10 + ReportFeed::kAskAgainMs));  // the answer was lost: asked again
  CHECK(r->snapshots_asked == 3);
  f.on(feed_snap(5, 4, 6, {1, 7}), 600);
  CHECK(r->current);
  CHECK(r->cores == 6);  // the lost event 3 (its node) came with the snapshot
  CHECK_FALSE(f.on(feed_jobs(5, 5, {7}), 700));
  CHECK_FALSE(f.on(feed_beat(5, 5), 800));
  CHECK(r->current);
}

TEST_CASE("report feed: a heartbeat shows a lost last event", "[report_feed]") {
  ReportFeed f = feed_joined(2);
  CHECK(f.on(feed_beat(5, 3), 10));  // event 3 never came
  CHECK_FALSE(f.find(kPub)->current);
  f.on(feed_snap(5, 3, 4, {9}), 20);
  CHECK(f.find(kPub)->current);
  CHECK(f.find(kPub)->running == std::vector<std::uint64_t>{9});
}

TEST_CASE("report feed: a publisher heard late asks for a snapshot at once", "[report_feed]") {
  ReportFeed f;
  CHECK(f.on(feed_jobs(5, 40, {3}), 0));  // joined late: an event first
  CHECK_FALSE(f.find(kPub)->current);
  CHECK_FALSE(f.on(feed_jobs(5, 41, {}), 5));  // no second ask before an answer could come
  CHECK_FALSE(f.find(kPub)->current);
  f.on(feed_snap(5, 41, 4, {}), 10);
  CHECK(f.find(kPub)->current);
  CHECK(f.find(kPub)->cores == 4);
  CHECK_FALSE(f.on(feed_jobs(5, 41, {5}), 20));  // already in the snapshot: not applied again
  CHECK(f.find(kPub)->running.empty());
}

TEST_CASE("report feed: a restarted publisher (a new incarnation) asks for a snapshot", "[report_feed]") {
  ReportFeed f = feed_joined(30, {7});
  CHECK(f.on(feed_beat(6, 1), 100));  // numbered from 1 again: no gap, but another start
  const FeedReport* r = f.find(kPub);
  CHECK_FALSE(r->current);
  CHECK(r->running.empty());  // nothing of the old incarnation is kept
  CHECK(r->snapshots_asked == 2);
  CHECK_FALSE(f.on(feed_jobs(5, 31, {8}), 110));  // a straggler of the old incarnation: ignored
  CHECK(r->running.empty());
  f.on(feed_snap(6, 1, 4, {}), 120);
  CHECK(r->current);
  f.on(feed_snap(5, 31, 4, {8}), 130);  // nor an old incarnation's snapshot
  CHECK(r->running.empty());
  CHECK(r->incarnation == 6);
}

TEST_CASE("report feed: a snapshot older than the events applied is ignored", "[report_feed]") {
  ReportFeed f = feed_joined(2);
  CHECK(f.on(feed_jobs(5, 4, {1}), 10));  // a gap: asked
  f.on(feed_snap(5, 3, 4, {}), 20);       // an answer from before event 4
  CHECK_FALSE(f.find(kPub)->current);
  CHECK(f.find(kPub)->running == std::vector<std::uint64_t>{1});
  CHECK(f.on(feed_beat(5, 4), 10 + ReportFeed::kAskAgainMs));  // still wanted
}

}  // namespace report_feed_test
