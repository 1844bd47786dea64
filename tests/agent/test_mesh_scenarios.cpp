// The mesh under failure, end to end: three real corrald voters, each in its own network
// namespace (tests/mesh_net.hpp; 127.0.0.1 ports where namespaces are unavailable, and the test
// says which), running real jobs in their cgroups. Each case asserts one of the mesh's proofs:
// SIGKILL to the coordinator in a burst of 2,000 submissions loses and doubles nothing; a voter
// cut off for 10 s has its jobs reconciled; a killed agent's jobs are adopted; the minority side
// of a partition starts nothing. Partitions need namespaces: on loopback those cases skip.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness.hpp"
#include "harness_proto.hpp"
#include "mesh_cluster.hpp"
#include "tests/effort.hpp"
#include "tests/quiet_job.hpp"

using namespace harness;
using namespace mesh_cluster;
namespace proto = corral::proto;

namespace scenarios {

void pause_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Polls `done` every 50 ms until it holds or `ms` pass; whether it held.
bool wait_until(int ms, const std::function<bool()>& done) {
  for (double end = now_ms() + ms; now_ms() < end; pause_ms(50))
    if (done()) return true;
  return done();
}

// Jobs that wait for the test: each writes its shell's pid to DIR/pid.ID and its id to DIR/ran,
// then runs until DIR/go.ID exists.
struct Gate {
  std::string dir;
  explicit Gate(const Agent& a) : dir(a.dir + "/gate") {
    std::filesystem::create_directories(dir);
    ::chmod(dir.c_str(), 0777);
  }
  std::string script() const {
    return "echo $$ > " + dir + "/pid.$CORRAL_JOBID; echo $CORRAL_JOBID >> " + dir + "/ran; while [ ! -e " + dir +
           "/go.$CORRAL_JOBID ]; do sleep 0.05; done";
  }
  void open(std::uint64_t id) const { Mesh::write_file(dir + "/go." + std::to_string(id), ""); }
  pid_t pid(std::uint64_t id) const { return static_cast<pid_t>(std::atol(slurp(dir + "/pid." + std::to_string(id)).c_str())); }
  // How many times each job started (lines of DIR/ran).
  std::map<std::uint64_t, int> ran() const { return count(dir + "/ran"); }
  // The ids a file lists one a line, each with how often.
  static std::map<std::uint64_t, int> count(const std::string& file) {
    std::map<std::uint64_t, int> n;
    std::istringstream in(slurp(file));
    for (std::string l; std::getline(in, l);)
      if (!l.empty()) ++n[std::stoull(l)];
    return n;
  }
};

// Member i's replicated view of every job, by id (empty when it does not answer).
std::map<std::uint64_t, proto::JobInfo> jobs_of(const Mesh& m, unsigned i) {
  std::map<std::uint64_t, proto::JobInfo> out;
  try {
    proto::Message rep = raw_request(m.agents[i]->socket, proto::StatReq{});
    if (auto* s = std::get_if<proto::StatRep>(&rep))
      for (auto& j : s->jobs) out[j.id] = j;
  } catch (const std::exception&) {
  }
  return out;
}

// The node a job's last run is on ("" before its first).
std::string node_of(const proto::JobInfo& j) {
  if (j.runs.empty() || j.runs.back().comment.rfind("on ", 0) != 0) return "";
  return j.runs.back().comment.substr(3);
}

// Submits `n` gated jobs spread over the members; their ids.
std::vector<std::uint64_t> submit_gated(const Mesh& m, const Gate& g, unsigned n) {
  std::vector<std::uint64_t> ids;
  for (unsigned k = 0; k < n; ++k) {
    Result r = m.agents[k % m.agents.size()]->submit({"-l", "walltime=120", "--wrap", g.script()});
    INFO(r.out << r.err);
    REQUIRE(r.rc == 0);
    ids.push_back(std::stoull(r.out));
  }
  return ids;
}

// Waits until member i sees `want` of `ids` running, each with its process started (its pid
// written); those running, by node.
std::map<std::string, std::vector<std::uint64_t>> running_by_node(const Mesh& m, unsigned i, const Gate& g,
                                                                  const std::vector<std::uint64_t>& ids,
                                                                  std::size_t want) {
  std::map<std::string, std::vector<std::uint64_t>> on;
  wait_until(20000, [&] {
    on.clear();
    std::size_t n = 0;
    auto all = jobs_of(m, i);
    for (auto id : ids)
      if (all.count(id) && all[id].state == "running" && g.pid(id) > 0) {
        on[node_of(all[id])].push_back(id);
        ++n;
      }
    return n >= want;
  });
  return on;
}

// Every job of `ids` ended on every member in `who` within `ms`.
bool ended_everywhere(const Mesh& m, const std::vector<unsigned>& who, const std::vector<std::uint64_t>& ids, int ms) {
  return wait_until(ms, [&] {
    for (unsigned i : who) {
      auto all = jobs_of(m, i);
      for (auto id : ids)
        if (!all.count(id) || all[id].state != "ended") return false;
    }
    return true;
  });
}

// What is wrong with the jobs `ids` as member i sees them, and as they ran (at most `show`
// lines). Each must have ended completed, on the node `where` names (when it names one), and
// been launched exactly once: once in `ran` (the job's own line), and in the nodes' logs on that
// node only (at most once: a SIGKILL may fall between a launch and its log line).
// Runs before the completed one may only be starts its node gave back unlaunched (no free
// cores as the node saw them: "preempted" in the log), which the launch counts prove.
std::vector<std::string> not_once(const Mesh& m, unsigned i, const std::map<std::uint64_t, int>& ran,
                                  const std::vector<std::uint64_t>& ids,
                                  const std::map<std::uint64_t, std::string>& where = {}, std::size_t show = 20) {
  auto all = jobs_of(m, i);
  std::vector<std::map<std::uint64_t, int>> starts;
  for (unsigned k = 0; k < m.agents.size(); ++k) starts.push_back(starts_in_log(m, k));
  std::vector<std::string> bad;
  for (auto id : ids) {
    std::ostringstream why;
    auto j = all.find(id);
    if (j == all.end()) {
      why << "not in the replicated state; ";
    } else {
      const proto::JobInfo& job = j->second;
      std::string on = node_of(job);
      if (job.state != "ended" || job.end_reason != "completed") why << "state " << job.state << " " << job.end_reason << "; ";
      for (std::size_t r = 0; r + 1 < job.runs.size(); ++r)
        if (job.runs[r].end_reason != "preempted") why << "run " << r + 1 << " " << job.runs[r].comment << " ended " << job.runs[r].end_reason << "; ";
      if (auto w = where.find(id); w != where.end() && on != w->second) why << "ran on '" << on << "', not " << w->second << "; ";
      for (unsigned k = 0; k < m.agents.size(); ++k) {
        auto s = starts[k].find(id);
        int n = s == starts[k].end() ? 0 : s->second;
        if (n > (m.names[k] == on ? 1 : 0)) why << "launched " << n << " times on " << m.names[k] << "; ";
      }
    }
    auto r = ran.find(id);
    if (r == ran.end() || r->second != 1) why << "ran " << (r == ran.end() ? 0 : r->second) << " times";
    if (!why.str().empty() && bad.size() < show) bad.push_back("job " + std::to_string(id) + " seen by " + m.names[i] + ": " + why.str());
    else if (!why.str().empty() && bad.size() == show) bad.push_back("...");
  }
  return bad;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::vector<unsigned> all_but(const Mesh& m, unsigned x) {
  std::vector<unsigned> v;
  for (unsigned i = 0; i < m.agents.size(); ++i)
    if (i != x) v.push_back(i);
  return v;
}

std::vector<unsigned> everyone(const Mesh& m) { return all_but(m, static_cast<unsigned>(m.agents.size())); }

}  // namespace scenarios

using namespace scenarios;

namespace scenarios {

// What the clients of a burst got back.
struct Burst {
  std::set<std::uint64_t> acked;  // ids a client received
  std::size_t refused = 0;        // answered with an error
  std::size_t cut_off = 0;        // no answer: their member closed the connection (it died)
  std::size_t unanswered = 0;     // no answer in time on a connection still open
  std::set<unsigned> closed_by;   // the members that closed connections with requests unanswered
  std::vector<std::string> errors;
};

// One client connection of a burst: every request written at once (corrald answers them in
// order), the answers read as they come.
struct Lane {
  int fd = -1;
  unsigned member = 0;
  std::string out;
  std::size_t written = 0;
  std::size_t asked = 0, answered = 0;
  proto::FrameReader rd;
};

proto::JobSpec quick_job(const std::string& cwd, const std::string& ran) {
  return corral::testing::quiet_job("burst", "#!/bin/sh\necho $CORRAL_JOBID >> " + ran + "\n", cwd);
}

void close_lane(Lane& l, Burst& b, bool by_peer) {
  ::close(l.fd);
  l.fd = -1;
  (by_peer ? b.cut_off : b.unanswered) += l.asked - l.answered;
  if (by_peer && l.asked > l.answered) b.closed_by.insert(l.member);
}

void read_lane(Lane& l, Burst& b) {
  char buf[65536];
  ssize_t n = ::recv(l.fd, buf, sizeof buf, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return close_lane(l, b, true);
  if (n < 0) return;
  l.rd.feed(buf, static_cast<std::size_t>(n));
  for (std::string frame; l.rd.next(frame);) {
    ++l.answered;
    proto::Message rep = proto::decode(frame);
    if (auto* ok = std::get_if<proto::SubmitRep>(&rep)) {
      b.acked.insert(ok->id);
    } else {
      ++b.refused;
      if (auto* e = std::get_if<proto::ErrorRep>(&rep); e && b.errors.size() < 5) b.errors.push_back(e->message);
    }
  }
  if (l.answered == l.asked) close_lane(l, b, false);
}

// `total` submissions of quick jobs over `lanes` connections spread across the members;
// `progress` sees the tally after every read. Gives up on answers after `ms`.
Burst burst(const Mesh& m, const std::string& ran, unsigned total, unsigned lanes,
            const std::function<void(const Burst&)>& progress, int ms) {
  Burst b;
  std::vector<Lane> ls(lanes);
  for (unsigned k = 0; k < lanes; ++k) {
    ls[k].member = static_cast<unsigned>(k % m.agents.size());
    const Agent& a = *m.agents[ls[k].member];
    ls[k].fd = connect_unix(a.socket);
    REQUIRE(ls[k].fd >= 0);
    ls[k].asked = total / lanes + (k < total % lanes ? 1 : 0);
    for (std::size_t q = 0; q < ls[k].asked; ++q)
      ls[k].out += proto::frame(proto::encode(proto::SubmitReq{quick_job(a.dir + "/work", ran)}));
  }
  for (double end = now_ms() + ms; now_ms() < end;) {
    std::vector<pollfd> fds;
    std::vector<Lane*> of;
    for (Lane& l : ls)
      if (l.fd >= 0) {
        fds.push_back({l.fd, static_cast<short>(POLLIN | (l.written < l.out.size() ? POLLOUT : 0)), 0});
        of.push_back(&l);
      }
    if (fds.empty()) break;
    ::poll(fds.data(), fds.size(), 100);
    for (std::size_t k = 0; k < fds.size(); ++k) {
      Lane& l = *of[k];
      if (fds[k].revents & POLLOUT) {
        ssize_t n = ::send(l.fd, l.out.data() + l.written, l.out.size() - l.written, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) l.written += static_cast<std::size_t>(n);
      }
      if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) read_lane(l, b);
    }
    progress(b);
  }
  for (Lane& l : ls)
    if (l.fd >= 0) close_lane(l, b, false);
  return b;
}

}  // namespace scenarios

TEST_CASE("mesh scenario: SIGKILL to the coordinator in a burst of 2,000 submissions loses and doubles nothing",
          "[mesh][scenario][burst]") {
  SKIP_UNLESS_ROOT();
  const double t0 = now_ms();
  Mesh m(3);
  // No fsync: a SIGKILL loses nothing a process wrote (only a machine crash would), and the
  // burst's commits wait on no disk.
  for (auto& a : m.agents) a->extra.insert(a->extra.end(), {"--set", "declare_cores=64", "--set", "fsync=no"});
  const unsigned lead = static_cast<unsigned>(m.elect());
  const std::uint64_t term = m.status(lead)["term"].get<std::uint64_t>();
  const std::string ran = m.agents[0]->dir + "/ran";
  // 2,000 in the gcc build; the sanitizer build's CPU cost cuts it (tests/effort.hpp).
  const unsigned kJobs = corral_test::scaled(2000u, 500u);
  constexpr unsigned kLanes = 120;  // client connections, spread over the members
  const std::size_t kKillAt = kJobs / 4;  // acknowledged ids before the SIGKILL

  std::size_t acked_at_kill = 0;
  double killed_at = 0;
  Burst b = burst(m, ran, kJobs, kLanes, [&](const Burst& sofar) {
    if (killed_at == 0 && sofar.acked.size() >= kKillAt) {
      acked_at_kill = sofar.acked.size();
      m.agents[lead]->stop(SIGKILL);
      killed_at = now_ms() - t0;
    }
  }, 120000);
  const double burst_ms = now_ms() - t0;
  INFO("acknowledged " << b.acked.size() << ", refused " << b.refused << ", cut off " << b.cut_off
                       << ", unanswered " << b.unanswered << "; errors: " << (b.errors.empty() ? "" : b.errors[0]));
  REQUIRE(killed_at > 0);
  // Every submission got its answer: an id, an error, or its connection closed by the killed
  // member (which `corral submit` reports as an error).
  CHECK(b.unanswered == 0);
  CHECK(b.acked.size() + b.refused + b.cut_off == kJobs);
  CHECK((b.closed_by.empty() || b.closed_by == std::set<unsigned>{lead}));  // only the killed member's
  CHECK(b.acked.size() > acked_at_kill);  // the survivors went on accepting
  const double elected = now_ms();
  const int nl = m.agreed(all_but(m, lead), term, 30000);
  INFO("survivors: " << m.status((lead + 1) % 3).dump() << "\n" << m.status((lead + 2) % 3).dump());
  CHECK(nl >= 0);
  WARN("survivors agreed on a coordinator " << static_cast<int>(now_ms() - elected) << " ms after the burst");

  // The killed node comes back: it adopts what it ran (or reports its end) and takes new work.
  m.agents[lead]->start();
  const unsigned judge = (lead + 1) % 3;
  std::map<std::uint64_t, proto::JobInfo> fin;
  const bool settled = wait_until(120000, [&] {
    fin = jobs_of(m, judge);
    for (auto id : b.acked)
      if (!fin.count(id)) return false;
    for (const auto& [id, j] : fin)
      if (j.state != "ended") return false;
    return true;
  });
  std::map<std::uint64_t, int> runs = Gate::count(ran);
  WARN("burst of " << kJobs << " submissions over " << kLanes << " connections, SIGKILL to the coordinator after " << acked_at_kill
                   << " ids (" << static_cast<int>(killed_at) << " ms): " << b.acked.size() << " acknowledged, " << b.refused << " refused, " << b.cut_off
                   << " cut off; " << fin.size() << " jobs in the replicated state; submissions done after "
                   << static_cast<int>(burst_ms) << " ms, all ended after " << static_cast<int>(now_ms() - t0) << " ms");
  REQUIRE(settled);

  // Every acknowledged id, and every job the mesh holds (a submit cut off after its commit is
  // one), ran exactly once; nothing ran that the mesh does not hold.
  std::vector<std::uint64_t> held;
  for (const auto& [id, j] : fin) held.push_back(id);
  for (auto id : b.acked) CHECK(fin.count(id) == 1);
  std::vector<std::string> bad = not_once(m, judge, runs, held);
  INFO(joined(bad));
  CHECK(bad.empty());
  for (const auto& [id, n] : runs) {
    INFO("job " << id << " ran, unknown to the mesh");
    CHECK(fin.count(id) == 1);
  }
  CHECK(fin.size() <= kJobs);
  // Every member, the restarted one too, holds the same jobs, all ended.
  for (unsigned i : everyone(m)) {
    INFO(m.names[i]);
    CHECK(wait_until(20000, [&] {
      auto mine = jobs_of(m, i);
      if (mine.size() != fin.size()) return false;
      for (const auto& [id, j] : mine)
        if (!fin.count(id) || j.state != "ended") return false;
      return true;
    }));
  }
}

namespace scenarios {

// Which node each of `on`'s jobs runs on.
std::map<std::uint64_t, std::string> placed(const std::map<std::string, std::vector<std::uint64_t>>& on) {
  std::map<std::uint64_t, std::string> where;
  for (const auto& [node, ids] : on)
    for (auto id : ids) where[id] = node;
  return where;
}

std::size_t total(const std::map<std::uint64_t, int>& starts) {
  std::size_t n = 0;
  for (const auto& [id, k] : starts) n += static_cast<std::size_t>(k);
  return n;
}

// Asserts that every member sees each of `ids` ended completed after one run, on the node
// `where` names, started once in the logs and in the gate.
void check_ran_once(const Mesh& m, const Gate& g, const std::vector<std::uint64_t>& ids,
                    const std::map<std::uint64_t, std::string>& where) {
  REQUIRE(ended_everywhere(m, everyone(m), ids, 30000));
  for (unsigned i : everyone(m)) {
    std::vector<std::string> bad = not_once(m, i, g.ran(), ids, where);
    INFO(joined(bad));
    CHECK(bad.empty());
  }
}

// How many snapshots member i asked of the member named `name` (its `corral mesh --json`; -1
// when it does not list it).
inline std::int64_t snapshots_asked(const Mesh& m, unsigned i, const std::string& name) {
  Json s = m.status(i);
  if (!s.is_object()) return -1;
  for (const Json& mb : s["members"])
    if (mb["name"] == name) return mb["snapshots_asked"].get<std::int64_t>();
  return -1;
}

}  // namespace scenarios

TEST_CASE("mesh scenario: a voter cut off for 10 s and back: its jobs are reconciled, none runs twice",
          "[mesh][scenario]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  if (!m.own_net) {
    CORRAL_SKIP("cutting a voter's link needs network namespaces (" + m.no_netns + "); loopback has none to cut");
    return;
  }
  const unsigned lead = static_cast<unsigned>(m.elect()), v = (lead + 1) % 3;
  Gate g(*m.agents[0]);
  std::vector<std::uint64_t> ids = submit_gated(m, g, 7);  // 3 nodes of 2 cores: 6 run, 1 waits
  auto on = running_by_node(m, lead, g, ids, 6);
  for (const std::string& n : m.names) REQUIRE(on[n].size() == 2);
  std::map<std::uint64_t, std::string> where = placed(on);
  std::uint64_t waiting = 0;
  for (auto id : ids)
    if (!where.count(id)) waiting = id;
  const std::uint64_t a = on[m.names[v]][0], b = on[m.names[v]][1], x = on[m.names[lead]][0];
  const std::size_t v_starts = total(starts_in_log(m, v));
  // The coordinator heard the voter first after it started: it asked it for a snapshot.
  const std::int64_t asked = snapshots_asked(m, lead, m.names[v]);
  CHECK(asked >= 1);

  m.own_net->cut(v);
  const double cut_at = now_ms();
  g.open(a);  // ends on the cut-off voter: nobody hears of it yet
  g.open(x);  // ends on the coordinator's side: the waiting job takes that core
  CHECK(wait_until(15000, [&] { return jobs_of(m, lead)[waiting].state == "running"; }));
  auto view = jobs_of(m, lead);
  CHECK(node_of(view[waiting]) == m.names[lead]);
  CHECK(wait_until(10000, [&] { return !alive(g.pid(a)); }));
  // While the voter is away its jobs stay its own: one run each, still running as the mesh
  // knows, started nowhere else; b still runs there.
  view = jobs_of(m, lead);
  for (auto id : {a, b}) {
    INFO("job " << id);
    CHECK(view[id].state == "running");
    CHECK(view[id].runs.size() == 1);
    CHECK(node_of(view[id]) == m.names[v]);
  }
  CHECK(alive(g.pid(b)));
  pause_ms(static_cast<int>(std::max(0.0, cut_at + 10000 - now_ms())));
  CHECK(total(starts_in_log(m, v)) == v_starts);
  m.own_net->restore(v);

  // Back: a's end reaches the mesh; the voter follows the coordinator with everyone.
  CHECK(wait_until(20000, [&] {
    auto j = jobs_of(m, lead)[a];
    return j.state == "ended" && j.end_reason == "completed";
  }));
  CHECK(m.agreed(everyone(m), 0, 15000) >= 0);
  // The jobs event of a's end was published while the link was down, and lost with the
  // connection: the voter's next heartbeat shows the gap, and the coordinator asks it for a
  // snapshot (the same publisher: no restart, no first hearing).
  CHECK(wait_until(5000, [&] { return snapshots_asked(m, lead, m.names[v]) > asked; }));
  CHECK(jobs_of(m, v)[b].state == "running");
  for (auto id : ids) g.open(id);
  where[waiting] = m.names[lead];
  check_ran_once(m, g, ids, where);
}

TEST_CASE("mesh scenario: SIGKILL to an agent with running jobs and a restart: its jobs are adopted",
          "[mesh][scenario]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  const unsigned lead = static_cast<unsigned>(m.elect()), f = (lead + 1) % 3;
  Gate g(*m.agents[0]);
  std::vector<std::uint64_t> ids = submit_gated(m, g, 6);
  auto on = running_by_node(m, lead, g, ids, 6);
  REQUIRE(on[m.names[f]].size() == 2);
  const std::uint64_t a = on[m.names[f]][0], b = on[m.names[f]][1];
  const pid_t pa = g.pid(a), pb = g.pid(b);

  m.agents[f]->stop(SIGKILL);
  CHECK(alive(pa));  // jobs outlive their agent
  CHECK(alive(pb));
  g.open(b);  // b ends while no agent watches it
  CHECK(wait_until(10000, [&] { return !alive(pb); }));
  m.agents[f]->start();

  // a is adopted, the same process running on; b's end, which nobody saw, is reported.
  const std::string adopted = "job " + std::to_string(a) + " adopted after restart";
  CHECK(wait_until(10000, [&] { return m.agents[f]->log().find(adopted) != std::string::npos; }));
  CHECK(alive(pa));
  CHECK(g.pid(a) == pa);
  CHECK(wait_until(15000, [&] {
    auto j = jobs_of(m, lead)[b];
    return j.state == "ended" && j.end_reason == "completed" && j.exit_code == 0;
  }));
  auto view = jobs_of(m, lead);
  CHECK(view[a].state == "running");
  CHECK(view[a].runs.size() == 1);
  for (auto id : ids) g.open(id);
  check_ran_once(m, g, ids, placed(on));
}

TEST_CASE("mesh scenario: the minority side of a partition starts no job", "[mesh][scenario]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  if (!m.own_net) {
    CORRAL_SKIP("a partition needs network namespaces (" + m.no_netns + "); loopback has none to cut");
    return;
  }
  const unsigned lead = static_cast<unsigned>(m.elect());
  const std::uint64_t term = m.status(lead)["term"].get<std::uint64_t>();
  Gate g(*m.agents[0]);
  std::vector<std::uint64_t> ids = submit_gated(m, g, 8);  // 6 run, 2 wait
  auto on = running_by_node(m, lead, g, ids, 6);
  for (const std::string& n : m.names) REQUIRE(on[n].size() == 2);
  std::map<std::uint64_t, std::string> where = placed(on);
  std::vector<std::uint64_t> waiting;
  for (auto id : ids)
    if (!where.count(id)) waiting.push_back(id);
  REQUIRE(waiting.size() == 2);
  const std::size_t minority_starts = total(starts_in_log(m, lead));

  // The coordinator alone on its side, with two cores freed there and two jobs waiting.
  m.own_net->cut(lead);
  for (auto id : on[m.names[lead]]) g.open(id);
  const int nl = m.agreed(all_but(m, lead), term, 15000);
  REQUIRE(nl >= 0);
  // The majority goes on: a core freed there takes a waiting job.
  g.open(on[m.names[static_cast<unsigned>(nl)]][0]);
  std::uint64_t moved = 0;
  CHECK(wait_until(15000, [&] {
    auto view = jobs_of(m, static_cast<unsigned>(nl));
    for (auto id : waiting)
      if (view[id].state == "running") moved = id;
    return moved != 0;
  }));
  CHECK(node_of(jobs_of(m, static_cast<unsigned>(nl))[moved]) != m.names[lead]);
  // The minority: a submit there fails after its bounded wait; nothing started there meanwhile.
  Result r = m.agents[lead]->submit({"-N", "minority", "-l", "walltime=60", "--wrap", "true"});
  INFO(r.out << r.err);
  CHECK(r.rc != 0);
  CHECK(r.err.find("job not accepted") != std::string::npos);
  CHECK(total(starts_in_log(m, lead)) == minority_starts);
  for (auto id : waiting) CHECK(jobs_of(m, lead)[id].state == "pending");  // as the minority saw them
  m.own_net->restore(lead);

  CHECK(m.agreed(everyone(m), term, 15000) >= 0);
  for (auto id : ids) g.open(id);
  where[moved] = node_of(jobs_of(m, static_cast<unsigned>(nl))[moved]);
  check_ran_once(m, g, ids, where);
  for (unsigned i : everyone(m))
    for (const auto& [id, j] : jobs_of(m, i)) CHECK(j.name != "minority");  // not accepted, never
}
