// libraft on the deterministic simulated network: election, replication,
// failover, and the mesh invariants under random crashes, restarts, message
// loss, reordering and partitions over many seeds.
//
// CORRAL_SIM_SEEDS=N runs N seeds in the randomized case (default 1000);
// CORRAL_SIM_FIRST_SEED=S starts there (to replay one failing seed).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "sim_cluster.hpp"
#include "tests/effort.hpp"

using namespace corral;
using namespace corral_test;
namespace mesh = corral::proto::mesh;

namespace {

std::string accept_entry(const std::string& token) {
  mesh::JobAccepted a;
  a.spec.name = token;
  a.user = "u";
  a.token = token;
  return mesh::encode_entry(a);
}

// A disk that only counts: each append() is one write and one sync.
struct SyncCountingWriter : DiskWriter {
  int appends = 0;
  std::uint64_t entries = 0;
  void save_term(std::uint64_t, std::uint64_t) override {}
  void append(std::uint64_t, const std::deque<DiskEntry>& e) override {
    ++appends;
    entries += e.size();
  }
  void truncate(std::uint64_t) override {}
  void put_snapshot(const DiskSnapshot&, unsigned) override {}
};

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

}  // namespace

TEST_CASE("sim: a leader is elected, replicates, and a new one keeps every committed entry",
          "[raft_sim]") {
  SimCluster c(1, 3);
  REQUIRE(c.net.run_until([&] { return c.leader() >= 0; }, 5000));
  int l = c.leader();
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 20; ++i)
    c.slots[l].node->propose(accept_entry("t" + std::to_string(i)), [&](const Proposed& p) {
      REQUIRE(p.status == Status::ok);
      REQUIRE(p.applied.ok);
      ids.push_back(p.applied.value);
    });
  REQUIRE(c.net.run_until([&] { return ids.size() == 20; }, 5000));
  CHECK(ids.front() == 1);
  CHECK(ids.back() == 20);

  std::uint64_t old_term = c.slots[l].node->term();
  std::uint64_t crash_at = c.net.now();
  c.crash(static_cast<unsigned>(l));
  REQUIRE(c.net.run_until([&] { return c.leader() >= 0; }, 5000));
  int nl = c.leader();
  CHECK(nl != l);
  CHECK(c.slots[nl].node->term() > old_term);
  // Election 300 ms randomized to [300, 600), heartbeat 50 ms, pre-vote.
  CHECK(c.net.now() - crash_at < 1500);
  bool barrier = false;
  c.slots[nl].node->barrier([&](Status s) { barrier = s == Status::ok; });
  REQUIRE(c.net.run_until([&] { return barrier; }, 5000));
  CHECK(c.slots[nl].fsm->state().data().jobs.size() == 20);
  CHECK(c.slots[nl].fsm->state().data().next_id == 21);

  // The old leader restarts from its disk and catches up.
  REQUIRE(c.restart(static_cast<unsigned>(l)) == 0);
  REQUIRE(c.net.run_until(
      [&] { return c.slots[l].node->last_applied() == c.slots[nl].node->last_applied(); }, 5000));
  CHECK(c.slots[l].fsm->snapshot() == c.slots[nl].fsm->snapshot());
  CHECK_FALSE(c.slots[l].node->is_leader());
}

TEST_CASE("sim: a burst of proposals is written to the leader's disk in a few syncs", "[raft_sim]") {
  SimCluster c(7, 3);
  REQUIRE(c.net.run_until([&] { return c.leader() >= 0; }, 5000));
  int l = c.leader();
  SyncCountingWriter disk;
  c.slots[l].disk.files = &disk;
  constexpr int kBurst = 200;
  int committed = 0;
  for (int i = 0; i < kBurst; ++i)
    c.slots[l].node->propose(accept_entry("b" + std::to_string(i)), [&](const Proposed& p) {
      CHECK(p.status == Status::ok);
      ++committed;
    });
  REQUIRE(c.net.run_until([&] { return committed == kBurst; }, 10000));
  c.slots[l].disk.files = nullptr;
  CHECK(disk.entries >= static_cast<std::uint64_t>(kBurst));
  // One sync per proposal would be 200; the appends queued behind the first go together.
  CHECK(disk.appends <= 10);
}

TEST_CASE("sim: proposals to a follower are refused; refused entries do not stop the log",
          "[raft_sim]") {
  SimCluster c(2, 3);
  REQUIRE(c.net.run_until([&] { return c.leader() >= 0; }, 5000));
  unsigned f = (static_cast<unsigned>(c.leader()) + 1) % 3;
  Status got = Status::ok;
  bool fired = false;
  c.slots[f].node->propose(accept_entry("x"), [&](const Proposed& p) {
    got = p.status;
    fired = true;
  });
  CHECK_FALSE(fired);  // never from inside the call
  REQUIRE(c.net.run_until([&] { return fired; }, 100));
  CHECK(got == Status::not_leader);

  // A refused entry commits as a refusal with its reason; the log goes on.
  std::vector<Proposed> results;
  unsigned l = static_cast<unsigned>(c.leader());
  c.slots[l].node->propose("junk", [&](const Proposed& p) { results.push_back(p); });
  c.slots[l].node->propose(mesh::encode_entry(mesh::JobEnded{42, 1, "completed", 0, 0}),
                           [&](const Proposed& p) { results.push_back(p); });
  c.slots[l].node->propose(accept_entry("after"), [&](const Proposed& p) { results.push_back(p); });
  REQUIRE(c.net.run_until([&] { return results.size() == 3; }, 5000));
  CHECK(results[0].status == Status::ok);
  CHECK_FALSE(results[0].applied.ok);
  CHECK(results[0].applied.reason.find("not a mesh entry") != std::string::npos);
  CHECK(results[1].applied.reason == "no job 42");
  CHECK(results[2].applied.ok);
  CHECK(results[2].applied.value == 1);
  CHECK(results[2].index > results[0].index);
  // The follower learns who leads from the leader's first heartbeat.
  CHECK(c.net.run_until([&] { return c.slots[f].node->leader_id() == c.slots[c.leader()].id; }, 1000));
}

TEST_CASE("sim: a follower far behind is brought up by a snapshot", "[raft_sim]") {
  RaftOptions opt;
  opt.snapshot_threshold = 16;
  opt.snapshot_trailing = 4;
  SimCluster c(3, 3, opt);
  REQUIRE(c.net.run_until([&] { return c.leader() >= 0; }, 5000));
  unsigned l = static_cast<unsigned>(c.leader());
  unsigned lagging = (l + 1) % 3;
  c.crash(lagging);
  int done = 0;
  for (int i = 0; i < 100; ++i)
    c.slots[l].node->propose(accept_entry("s" + std::to_string(i)), [&](const Proposed& p) {
      done += p.status == Status::ok;
    });
  REQUIRE(c.net.run_until([&] { return done == 100; }, 20000));
  // The leader snapshots (after every 16 applied entries) once its disk caught up.
  REQUIRE(c.net.run_until([&] { return c.slots[l].disk.snapshot.has_value(); }, 1000));
  REQUIRE(c.restart(lagging) == 0);
  REQUIRE(c.net.run_until(
      [&] { return c.slots[lagging].node->last_applied() >= c.slots[l].node->commit_index(); },
      10000));
  CHECK(c.slots[lagging].disk.snapshot.has_value());
  CHECK(c.slots[lagging].fsm->state().data().jobs.size() == 100);
  CHECK(c.slots[lagging].fsm->snapshot() == c.slots[l].fsm->snapshot());
}

TEST_CASE("sim: a member joins as a non-voter, replicates, then becomes a voter", "[raft_sim]") {
  SimCluster c(4, 3);
  REQUIRE(c.net.run_until([&] { return c.leader() >= 0; }, 5000));
  unsigned l = static_cast<unsigned>(c.leader());
  int done = 0;
  for (int i = 0; i < 10; ++i)
    c.slots[l].node->propose(accept_entry("j" + std::to_string(i)), [&](const Proposed& p) {
      done += p.status == Status::ok;
    });
  REQUIRE(c.net.run_until([&] { return done == 10; }, 5000));

  unsigned j = c.join();
  Status added = Status::error, standby = Status::error, voter = Status::error;
  c.slots[l].node->add(Member{c.slots[j].id, "n4", Role::spare}, [&](Status s) {
    added = s;
    c.slots[l].node->assign(c.slots[j].id, Role::standby, [&](Status s2) { standby = s2; });
  });
  REQUIRE(c.net.run_until([&] { return standby == Status::ok; }, 5000));
  CHECK(added == Status::ok);
  // A standby replicates the log without voting.
  REQUIRE(c.net.run_until([&] { return c.slots[j].fsm->state().data().jobs.size() == 10; }, 5000));
  std::vector<Member> ms = c.slots[l].node->members();
  REQUIRE(ms.size() == 4);
  CHECK(ms[3].role == Role::standby);

  c.slots[l].node->assign(c.slots[j].id, Role::voter, [&](Status s) { voter = s; });
  REQUIRE(c.net.run_until([&] { return voter == Status::ok; }, 5000));
  CHECK(c.slots[l].node->members()[3].role == Role::voter);
  // Membership changes are the leader's alone.
  Status refused = Status::ok;
  c.slots[j].node->remove(1, [&](Status s) { refused = s; });
  REQUIRE(c.net.run_until([&] { return refused != Status::ok; }, 100));
  CHECK(refused == Status::not_leader);
}

TEST_CASE("sim: the leader hands its leadership to a voter; refused for itself and unknown ids",
          "[raft_sim]") {
  SimCluster c(3, 3);
  REQUIRE(c.net.run_until([&] { return c.leader() >= 0; }, 5000));
  const unsigned l = static_cast<unsigned>(c.leader()), to = (l + 2) % 3;
  Status self = Status::ok, unknown = Status::ok, handed = Status::error;
  c.slots[l].node->transfer(c.slots[l].id, [&](Status s) { self = s; });
  c.slots[l].node->transfer(99, [&](Status s) { unknown = s; });
  REQUIRE(c.net.run_until([&] { return self != Status::ok && unknown != Status::ok; }, 100));
  CHECK(self == Status::error);
  CHECK(unknown == Status::error);
  // The target's log must be up to date and idle: it ignores the leader's TimeoutNow while
  // it still writes entries (the transfer then ends after an election timeout, unchanged).
  bool committed = false;
  c.slots[l].node->propose(accept_entry("j1"), [&](const Proposed& p) { committed = p.status == Status::ok; });
  REQUIRE(c.net.run_until([&] {
    return committed && c.slots[to].node->last_applied() == c.slots[l].node->last_applied();
  }, 5000));
  const std::uint64_t term = c.slots[l].node->term();
  c.slots[l].node->transfer(c.slots[to].id, [&](Status s) { handed = s; });
  REQUIRE(c.net.run_until([&] { return handed == Status::ok; }, 5000));
  CHECK(c.leader() == static_cast<int>(to));
  CHECK(c.slots[l].node->leader_id() == c.slots[to].id);
  CHECK(c.slots[to].node->term() > term);
  // No longer the leader: refused; the new one hands over to whichever voter (0).
  Status late = Status::ok, any = Status::error;
  c.slots[l].node->transfer(0, [&](Status s) { late = s; });
  REQUIRE(c.net.run_until([&] { return late != Status::ok; }, 100));
  CHECK(late == Status::not_leader);
  c.slots[to].node->transfer(0, [&](Status s) { any = s; });
  REQUIRE(c.net.run_until([&] { return any == Status::ok; }, 5000));
  CHECK(c.leader() >= 0);
  CHECK(c.leader() != static_cast<int>(to));
}

namespace {

// One seed's history: a client submitting (and retrying) jobs, leaders that
// start, end and requeue them, and chaos; then every member back and healed.
class RandomRun {
 public:
  // With `files_dir`, every member's disk is also kept in files there and
  // each restart loads it from them.
  std::size_t restarts() const { return restarts_; }

  explicit RandomRun(std::uint64_t seed, std::string files_dir = {})
      : seed_(seed),
        c_(seed, seed % 4 == 0 ? 5 : 3, options(),
           [this](unsigned i, SimCluster::Slot& s) { watch(i, s); }, std::move(files_dir)) {}

  // Returns an empty string when every invariant held, else what broke.
  std::string run() {
    SimFaults f;
    f.loss = static_cast<double>(c_.net.uniform(0, 15)) / 100;
    f.max_delay_ms = static_cast<unsigned>(c_.net.uniform(1, 40));
    f.max_disk_ms = static_cast<unsigned>(c_.net.uniform(0, 5));
    c_.net.set_faults(f);
    for (int step = 0; step < 150 && broken_.empty(); ++step) {
      chaos();
      act();
      c_.net.run_for(c_.net.uniform(5, 30));
    }
    if (broken_.empty()) settle();
    if (broken_.empty()) check_end();
    if (broken_.empty() && !c_.files_mismatch.empty()) fail("files differ from the image: " + c_.files_mismatch);
    return broken_;
  }

 private:
  static RaftOptions options() {
    RaftOptions o;
    o.snapshot_threshold = 24;  // snapshots and their installs happen in most seeds
    o.snapshot_trailing = 6;
    return o;
  }

  void fail(const std::string& what) {
    if (broken_.empty()) broken_ = "seed " + std::to_string(seed_) + ": " + what;
  }

  // Every member's applies, checked against the first apply of each index.
  void watch(unsigned i, SimCluster::Slot& s) {
    auto last = std::make_shared<std::uint64_t>(0);
    s.fsm->observe([this, i, last](std::uint64_t index, std::string_view bytes, const Outcome& o) {
      if (index <= *last) fail("member " + std::to_string(i) + " applied index " +
                               std::to_string(index) + " after " + std::to_string(*last));
      *last = index;
      auto [it, fresh] = log_.try_emplace(index, Seen{std::string(bytes), o.ok, o.job, o.reason});
      if (!fresh && (it->second.bytes != bytes || it->second.ok != o.ok || it->second.job != o.job))
        fail("members disagree on index " + std::to_string(index));
    });
    s.node->on_leadership([this, i](bool leader, std::uint64_t term) {
      if (!leader) return;
      // A new coordinator decides nothing before its state is current.
      c_.slots[i].node->barrier([this, i, term](Status st) {
        if (st == Status::ok) ready_[i] = term;
      });
    });
  }

  void chaos() {
    unsigned n = static_cast<unsigned>(c_.slots.size());
    unsigned i = static_cast<unsigned>(c_.net.uniform(0, n - 1));
    std::uint64_t r = c_.net.uniform(0, 99);
    if (r < 3 && c_.slots[i].up()) {
      c_.crash(i);
      ready_.erase(i);
    } else if (r < 9 && !c_.slots[i].up()) {
      ++restarts_;
      if (c_.restart(i) != 0) fail("restart of member " + std::to_string(i) + " failed");
    } else if (r < 12) {
      c_.net.cut(i + 1, c_.net.uniform(1, n));
    } else if (r < 16) {
      c_.net.heal_all();
    }
  }

  void propose(unsigned l, const mesh::Entry& e, std::function<void(const Proposed&)> cb = {}) {
    c_.slots[l].node->propose(mesh::encode_entry(e), std::move(cb));
  }

  // A job of the leader's view in `state`, or 0.
  std::uint64_t pick(const MeshState& st, std::string_view state) {
    std::vector<std::uint64_t> ids;
    for (const auto& [id, j] : st.data().jobs)
      if (j.state == state) ids.push_back(id);
    return ids.empty() ? 0 : ids[c_.net.uniform(0, ids.size() - 1)];
  }

  void act() {
    int li = c_.leader();
    if (li < 0) return;
    unsigned l = static_cast<unsigned>(li);
    std::uint64_t term = c_.slots[l].node->term();
    auto rd = ready_.find(l);
    if (rd == ready_.end() || rd->second != term) return;
    const MeshState& st = c_.slots[l].fsm->state();
    std::uint64_t r = c_.net.uniform(0, 99);
    if (r < 40) return submit(l);
    if (r < 65) {
      std::uint64_t job = pick(st, "pending");
      if (job == 0) return;
      auto run = static_cast<std::int32_t>(st.job(job)->runs.size() + 1);
      std::string node = "n" + std::to_string(c_.net.uniform(1, 4));
      return propose(l, mesh::JobStarted{job, run, {node}, ++decision_, term, 0});
    }
    std::uint64_t job = pick(st, "running");
    if (job == 0) return;
    auto run = static_cast<std::int32_t>(st.job(job)->runs.size());
    if (r < 72) {
      // A second start of a job running in the leader's view: refused unless
      // an end committed before it (check_end() walks what was applied).
      propose(l, mesh::JobStarted{job, run + 1, {"n9"}, ++decision_, term, 0});
    } else if (r < 90) {
      propose(l, mesh::JobEnded{job, run, "completed", 0, 0});
    } else {
      propose(l, mesh::JobRequeued{job, run, "requeue", 0});
    }
  }

  // A new submission, or a retry of one never acknowledged.
  void submit(unsigned l) {
    std::string token;
    if (!unacked_.empty() && c_.net.chance(0.5)) {
      token = *unacked_.begin();
    } else {
      token = "c/" + std::to_string(++submissions_);
      unacked_.insert(token);
    }
    c_.slots[l].node->propose(accept_entry(token), [this, token](const Proposed& p) {
      if (p.status != Status::ok) return;  // not acknowledged: the client retries
      if (!p.applied.ok) return fail("submission " + token + " refused: " + p.applied.reason);
      auto [it, fresh] = acked_.try_emplace(token, p.applied.value);
      if (!fresh && it->second != p.applied.value) fail("submission " + token + " got two ids");
      unacked_.erase(token);
    });
  }

  // Heals the network, restarts every member, and waits for one leader whose
  // barrier committed and every member applied up to its commit index.
  void settle() {
    c_.net.heal_all();
    c_.net.set_faults(SimFaults{});
    for (unsigned i = 0; i < c_.slots.size(); ++i)
      if (!c_.slots[i].up() && c_.restart(i) != 0) return fail("final restart failed");
    bool ok = c_.net.run_until(
        [&] {
          int l = c_.leader();
          if (l < 0 || ready_.count(l) == 0 || ready_[l] != c_.slots[l].node->term()) return false;
          for (const auto& s : c_.slots)
            if (s.node->last_applied() < c_.slots[l].node->commit_index()) return false;
          return true;
        },
        60000);
    if (!ok) fail("no convergence within 60 s of healing: " + describe());
  }

  // Each member's view, for a failure message.
  std::string describe() {
    std::ostringstream out;
    for (unsigned i = 0; i < c_.slots.size(); ++i) {
      const RaftNode& n = *c_.slots[i].node;
      out << "[member " << i << ": term " << n.term() << (n.is_leader() ? " leader" : "")
          << ", commit " << n.commit_index() << ", applied " << n.last_applied() << "] ";
    }
    return out.str();
  }

  void check_end() {
    const MeshState& ref = c_.slots[c_.leader()].fsm->state();
    std::string snap = ref.snapshot();
    for (unsigned i = 0; i < c_.slots.size(); ++i)
      if (c_.slots[i].fsm->snapshot() != snap) return fail("member " + std::to_string(i) + " diverged");
    std::set<std::uint64_t> ids;
    for (const auto& [token, id] : acked_) {
      auto it = ref.data().tokens.find(token);
      if (it == ref.data().tokens.end() || it->second != id || !ref.job(id))
        return fail("acknowledged submission " + token + " lost");
      if (!ids.insert(id).second) return fail("id " + std::to_string(id) + " given twice");
    }
    if (ref.data().tokens.size() != ref.data().jobs.size()) fail("a job without its submission");
    // Walk the committed history: a job's starts alternate with its ends.
    std::map<std::uint64_t, bool> running;
    for (const auto& [index, a] : log_) {
      if (!a.ok) {
        refused_ += a.reason.find("not pending") != std::string::npos;
        continue;
      }
      mesh::Entry e = mesh::decode_entry(a.bytes);
      if (std::holds_alternative<mesh::JobStarted>(e)) {
        ++starts_;
        if (running[a.job]) return fail("job " + std::to_string(a.job) + " started twice at once");
        running[a.job] = true;
      } else if (std::holds_alternative<mesh::JobEnded>(e) ||
                 std::holds_alternative<mesh::JobRequeued>(e)) {
        running[a.job] = false;
      }
    }
    committed_jobs_ = ref.data().jobs.size();
  }

  struct Seen {
    std::string bytes;
    bool ok;
    std::uint64_t job;
    std::string reason;
  };

 public:
  std::size_t committed_jobs_ = 0;
  std::size_t starts_ = 0;   // starts applied
  std::size_t refused_ = 0;  // starts refused because the job was not pending

 private:
  std::uint64_t seed_;
  SimCluster c_;
  std::string broken_;
  std::map<std::uint64_t, Seen> log_;
  std::map<unsigned, std::uint64_t> ready_;  // member -> term whose barrier committed
  std::set<std::string> unacked_;
  std::map<std::string, std::uint64_t> acked_;
  std::uint64_t submissions_ = 0;
  std::uint64_t decision_ = 0;
  std::size_t restarts_ = 0;
};

}  // namespace

TEST_CASE("sim: mesh invariants hold under random crashes, loss, reordering and partitions",
          "[raft_sim_random]") {
  std::uint64_t first = env_number("CORRAL_SIM_FIRST_SEED", 1);
  std::uint64_t seeds = env_number("CORRAL_SIM_SEEDS", corral_test::scaled<std::uint64_t>(1000, 250));
  std::size_t jobs = 0, starts = 0, refused = 0;
  for (std::uint64_t seed = first; seed < first + seeds; ++seed) {
    RandomRun run(seed);
    std::string broken = run.run();
    if (!broken.empty()) FAIL(broken);
    jobs += run.committed_jobs_;
    starts += run.starts_;
    refused += run.refused_;
  }
  std::ostringstream out;
  out << seeds << " seeds: " << jobs << " jobs, " << starts << " starts, " << refused
      << " second starts refused";
  WARN(out.str());
  // The histories did real work, and the adversarial starts reached the state machine.
  if (seeds >= 100) {
    CHECK(jobs > seeds);
    CHECK(starts > seeds);
    CHECK(refused > 0);
  }
}

TEST_CASE("sim: members restarted from their files have the image they had in memory",
          "[raft_sim_files]") {
  std::uint64_t first = env_number("CORRAL_SIM_FIRST_SEED", 1);
  std::uint64_t seeds = env_number("CORRAL_SIM_SEEDS", 60);
  char tmpl[] = "/tmp/corral_raft_files_XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::filesystem::path root = tmpl;
  std::size_t restarts = 0, jobs = 0;
  for (std::uint64_t seed = first; seed < first + seeds; ++seed) {
    std::filesystem::path dir = root / std::to_string(seed);
    std::filesystem::create_directories(dir);
    RandomRun run(seed, dir.string());
    std::string broken = run.run();
    if (!broken.empty()) {
      std::filesystem::remove_all(root);
      FAIL(broken);
    }
    restarts += run.restarts();
    jobs += run.committed_jobs_;
    std::filesystem::remove_all(dir);
  }
  std::filesystem::remove_all(root);
  WARN(seeds << " seeds on files: " << restarts << " restarts from files, " << jobs << " jobs");
  if (seeds >= 20) CHECK(restarts > seeds);
}
