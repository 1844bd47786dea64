// The mesh's exactly-once, on the deterministic simulation: 3 or 5 voters and
// one member that does not vote (it joins as a standby through MemberAdmit,
// as corrald's does), each a whole agent's mesh side as corrald wires it
// (agent/mesh_link.cpp):
// raft and the replicated state (on a LinkEnv), the coordinator's pass (CoordinatorLoop,
// the same schedule()), the desk and the forwarder for submissions and ends,
// hellos carrying the node's report, and a node agent (sim_agent.hpp) that
// applies starts by agent/mesh_jobs.cpp's rules. Clients submit on random
// members; members crash and restart (disk and job journal kept); messages
// are lost, delayed, reordered; links are cut, minorities isolated. Then
// the network heals, and every job must end.
//
// Asserted: no run is launched twice and no job has two live runs; every
// launch is a start the mesh committed, on the node it names (so a minority
// starts nothing of its own); every acknowledged submission is in the final
// state and completes, exactly once; every member's state is identical
// after healing. One job in ten runs for ever and root cancels it, on random
// members, through the crashes: once a cancel is answered ok it is never
// asked again, so the mesh must carry it out whatever coordinator follows;
// such a job ends cancelled and never completes. A failing seed prints
// itself: CORRAL_SIM_FIRST_SEED=S CORRAL_SIM_SEEDS=1 replays it.
#include <catch2/catch.hpp>

#include "tests/effort.hpp"

#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/mesh_submit.hpp"
#include "coordinator/service/coordinator_loop.hpp"
#include "coordinator/service/job_desk.hpp"
#include "coordinator/service/link_env.hpp"
#include "coordinator/service/member_admit.hpp"
#include "coordinator/service/mesh_machine.hpp"
#include "coordinator/service/raft_node.hpp"
#include "coordinator/service/sim_env.hpp"
#include "proto/mesh_link.hpp"
#include "tests/coordinator/service/sim_agent.hpp"

namespace {

using namespace corral::service;
using corral_test::AgentWatch;
using corral_test::SimAgent;
namespace jobs = corral::proto::jobs;
namespace mesh = corral::proto::mesh;
namespace link = corral::proto::link;

constexpr char kMesh[] = "sim";
constexpr std::uint64_t kHelloMs = 200;
constexpr int kCores = 4;
// A job that runs for longer than any simulation: only a cancel ends it.
constexpr char kForever[] = "t100000000";

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// One incarnation of a member's process (gone at a crash; its disk and its
// agent's journal are not).
struct Process {
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  std::unique_ptr<LinkEnv> env;
  MeshMachine fsm;
  std::unique_ptr<RaftNode> node;
  std::unique_ptr<JobDesk> desk;
  std::unique_ptr<corral::agent::SubmitForwarder> forward;
  std::unique_ptr<CoordinatorLoop> coordinator;
  std::unique_ptr<MemberAdmit> admit;
  ~Process() { *alive = false; }
};

struct Slot {
  std::uint64_t id = 0;
  RaftDisk disk;
  std::unique_ptr<SimAgent> agent;
  std::unique_ptr<Process> p;
  unsigned incarnation = 0;
};

// A run as an agent launched it.
struct Launch {
  std::string node;
  std::uint64_t decided_term = 0, decision = 0;
  std::uint64_t end_ms = 0;
};

class MeshSim {
 public:
  explicit MeshSim(std::uint64_t seed) : seed_(seed), net_(seed) {
    unsigned n = voters_ = seed % 4 == 0 ? 5 : 3;
    watch_.launched = [this](const std::string& node, const jobs::StartJob& s) { launched(node, s); };
    watch_.exited = [this](const std::string&, std::uint64_t job, std::int32_t) { ++exits_[job]; };
    watch_.killed = [this](const std::string&, std::uint64_t job, std::int32_t run) {
      runs_[job][run].end_ms = net_.now();
      ++killed;
    };
    slots_.resize(n + 1);  // the last one does not vote
    for (unsigned i = 0; i <= n; ++i) {
      slots_[i].id = i + 1;
      slots_[i].agent = std::make_unique<SimAgent>(name(i), kCores, watch_);
    }
    std::vector<Member> conf;
    for (unsigned i = 0; i < n; ++i) conf.push_back(Member{i + 1, name(i), Role::voter});
    for (unsigned i = 0; i < n; ++i) {
      make(i);
      slots_[i].p->node->bootstrap(conf);
      boot(i);
    }
    make(n);  // no configuration of its own: the leader adds it
    boot(n);
  }

  std::string run() {
    SimFaults f;
    f.loss = static_cast<double>(net_.uniform(0, 10)) / 100;
    f.max_delay_ms = static_cast<unsigned>(net_.uniform(1, 30));
    f.max_disk_ms = static_cast<unsigned>(net_.uniform(0, 4));
    net_.set_faults(f);
    for (int step = 0; step < 120 && broken_.empty(); ++step) {
      chaos();
      if (net_.chance(0.5)) submit();
      if (net_.chance(0.2)) cancel_forever();
      net_.run_for(net_.uniform(10, 40));
    }
    if (broken_.empty()) settle();
    if (broken_.empty()) check_end();
    return broken_;
  }

  std::size_t jobs = 0, launches = 0, crashes = 0, isolations = 0, squeezes = 0, requeues = 0, killed = 0;
  std::size_t member_launches = 0, cancels = 0;

 private:
  static std::string name(unsigned i) { return "n" + std::to_string(i + 1); }

  void fail(const std::string& what) {
    if (broken_.empty()) broken_ = "seed " + std::to_string(seed_) + ": " + what;
  }

  // A new process for member i, wired as MeshLink wires corrald's.
  void make(unsigned i) {
    Slot& s = slots_[i];
    auto p = std::make_unique<Process>();
    Process* raw = p.get();
    p->env = std::make_unique<LinkEnv>(
        net_.env(s.id), [this, raw](std::string_view b) { on_link(*raw, b); },
        [this, i, raw](std::string_view b) { on_jobs(i, *raw, b); });
    p->node = std::make_unique<RaftNode>(s.id, name(i), *p->env, s.disk, p->fsm);
    p->desk = std::make_unique<JobDesk>(*p->node);
    p->forward = std::make_unique<corral::agent::SubmitForwarder>(
        *p->env, *p->node, *p->desk, kMesh, [this, i](std::uint64_t to, std::string b) { send(i, to, std::move(b)); },
        name(i) + "/" + std::to_string(++s.incarnation), 10000);
    corral::SchedConfig sched;
    corral::Queue q;
    q.name = "normal";
    p->coordinator = std::make_unique<CoordinatorLoop>(
        *p->env, *p->node, p->fsm.state(), kMesh, sched, std::vector<corral::Queue>{q},
        [this, i, raw](std::uint64_t to, const jobs::Message& m) {
          if (to != slots_[i].id) send(i, to, jobs::encode(m));
          else post_order(i, raw->alive, m);
        });
    p->forward->set_cancel_desk([raw](const jobs::CancelAsk& a, JobDesk::Done d) { raw->coordinator->cancel(a, d); });
    p->admit = std::make_unique<MemberAdmit>(*p->node, [](const std::string&) {});
    s.p = std::move(p);
  }

  // Starts member i's process: raft, its agent, its hellos.
  void boot(unsigned i) {
    Slot& s = slots_[i];
    Process* p = s.p.get();
    p->node->on_leadership([p](bool leader, std::uint64_t term) { p->coordinator->leadership(leader, term); });
    if (int rv = p->node->start(); rv != 0) return fail("member " + name(i) + " did not start: " + p->node->error());
    SimAgent::Up up;
    up.propose = [p](mesh::Entry e) { p->forward->submit(std::move(e), [](const corral::agent::SubmitResult&) {}, false); };
    up.ack = [this, i, p](std::uint64_t to, jobs::StartAck a) {
      a.mesh = kMesh;
      a.from = slots_[i].id;
      if (to == slots_[i].id) p->coordinator->on_ack(a);
      else send(i, to, jobs::encode(a));
    };
    up.after = [p](std::uint64_t ms, std::function<void()> fn) {
      p->env->post(ms, [alive = p->alive, fn = std::move(fn)] {
        if (*alive) fn();
      });
    };
    up.now_ms = [p] { return p->env->now_ms(); };
    up.wall_s = [p] { return p->env->wall_s(); };
    s.agent->up(std::move(up));
    hello(i, p);
  }

  void hello(unsigned i, Process* p) {
    // The published channel's whole report (a snapshot), best effort as every message here;
    // the sequence numbering itself is tested by report_feed.
    link::Snapshot h;
    h.mesh = kMesh;
    h.id = slots_[i].id;
    h.name = name(i);
    h.address = name(i);
    h.cores = kCores;
    h.mem_mb = 1024;
    h.running = slots_[i].agent->running();
    std::uint64_t now = p->env->now_ms();
    p->coordinator->node(NodeReport{h.id, h.name, h.cores, h.mem_mb, 0, h.running, now});
    std::string bytes = link::encode(h);
    for (unsigned k = 0; k < slots_.size(); ++k)
      if (k != i) p->env->send(k + 1, name(k), bytes);
    p->env->post(kHelloMs, [this, i, p, alive = p->alive] {
      if (*alive) hello(i, p);
    });
  }

  // The member's process dies; sometimes its jobs with it (an emulated node's are timers).
  void crash(unsigned i) {
    slots_[i].agent->down(net_.chance(0.3));
    slots_[i].p.reset();
    ++crashes;
  }

  void send(unsigned from, std::uint64_t to, std::string bytes) {
    if (to == 0 || to > slots_.size() || to == slots_[from].id) return;
    if (slots_[from].p) slots_[from].p->env->send(to, name(static_cast<unsigned>(to - 1)), std::move(bytes));
  }

  // A start or cancel for this node reaches its agent on a later turn (the daemon's thread).
  void post_order(unsigned i, const std::shared_ptr<bool>& alive, const jobs::Message& m) {
    slots_[i].p->env->post(0, [this, i, alive, m] {
      if (!*alive) return;
      if (auto* s = std::get_if<jobs::StartJob>(&m)) slots_[i].agent->start(*s);
      else if (auto* c = std::get_if<jobs::CancelJob>(&m)) slots_[i].agent->stop(*c);
    });
  }

  void on_link(Process& p, std::string_view b) {
    link::Message msg = link::decode(b);
    if (auto* h = std::get_if<link::Snapshot>(&msg); h && h->mesh == kMesh) {
      p.coordinator->node(NodeReport{h->id, h->name, h->cores, h->mem_mb, h->jobfs_mb, h->running, p.env->now_ms()});
      if (h->id > voters_) p.admit->heard(h->id, h->address, h->name);
    }
  }

  // mesh_link.cpp's on_jobs_message, on the simulated sockets.
  void on_jobs(unsigned i, Process& p, std::string_view b) {
    jobs::Message msg = jobs::decode(b);
    if (auto* a = std::get_if<jobs::ForwardAck>(&msg)) {
      p.forward->on_ack(*a);
    } else if (auto* f = std::get_if<jobs::Forward>(&msg)) {
      auto answer = [this, i, from = f->from, request = f->request](const DeskAnswer& a) {
        send(i, from, jobs::encode(jobs::ForwardAck{kMesh, slots_[i].id, request, a.status, a.job, a.leader,
                                                    a.message, a.code}));
      };
      if (f->cancel.asked()) p.coordinator->cancel(f->cancel, answer);
      else p.desk->accept(mesh::decode_entry(f->entry), answer);
    } else if (std::holds_alternative<jobs::StartJob>(msg) || std::holds_alternative<jobs::CancelJob>(msg)) {
      post_order(i, p.alive, msg);
    } else if (auto* k = std::get_if<jobs::StartAck>(&msg)) {
      p.coordinator->on_ack(*k);
    }
  }

  // A client's submission on a random member that is up; an acknowledged id is the client's.
  void submit() {
    unsigned i = static_cast<unsigned>(net_.uniform(0, slots_.size() - 1));
    if (!slots_[i].p) return;
    mesh::JobAccepted job;
    const bool forever = net_.chance(0.1);
    job.spec.name = forever ? std::string(kForever) : "t" + std::to_string(net_.uniform(50, 1500));
    job.spec.queue = "normal";
    job.spec.ncpus = static_cast<std::int32_t>(net_.uniform(1, 3));
    job.spec.walltime = 3600;
    job.user = "u";
    job.uid = 1000;
    job.submit_time = slots_[i].p->env->wall_s();
    std::uint64_t n = ++submissions_;
    slots_[i].p->forward->submit(std::move(job), [this, n, forever](const corral::agent::SubmitResult& r) {
      if (!r.ok) return;  // timed out: the client was told it is not accepted
      if (!acked_.emplace(r.job, n).second) fail("id " + std::to_string(r.job) + " answered to two submissions");
      if (forever) forever_.push_back(r.job);
    });
  }

  // root cancels a job that runs for ever (or waits), on a random member that is up. Once the
  // answer is ok, the cancel is never asked again: the mesh must carry it out through any
  // crash of its coordinator.
  void cancel_forever(unsigned i, std::uint64_t job) {
    jobs::CancelAsk ask;
    ask.job = job;
    ask.admin = true;
    ask.who = "root";
    slots_[i].p->forward->cancel(ask, [this, job](const corral::agent::SubmitResult& r) {
      if (r.ok) cancelled_.insert(job);
    });
  }
  void cancel_forever() {
    unsigned i = static_cast<unsigned>(net_.uniform(0, slots_.size() - 1));
    if (forever_.empty() || !slots_[i].p) return;
    std::uint64_t job = forever_[net_.uniform(0, forever_.size() - 1)];
    if (!cancelled_.count(job)) cancel_forever(i, job);
  }

  void launched(const std::string& node, const jobs::StartJob& s) {
    ++launches;
    member_launches += node == name(voters_);
    std::uint64_t now = net_.now();
    auto& runs = runs_[s.job];
    for (const auto& [run, l] : runs) {
      if (run == s.run) return fail("job " + std::to_string(s.job) + " run " + std::to_string(s.run) +
                                    " launched twice (" + l.node + ", " + node + ")");
      if (l.end_ms > now)
        return fail("job " + std::to_string(s.job) + " run " + std::to_string(s.run) + " launched on " + node +
                    " while run " + std::to_string(run) + " still runs on " + l.node);
    }
    runs[s.run] = Launch{node, s.decided_term, s.decision, now + SimAgent::runtime_ms(s.spec.spec)};
  }

  void chaos() {
    unsigned n = static_cast<unsigned>(slots_.size());
    unsigned i = static_cast<unsigned>(net_.uniform(0, n - 1));
    std::uint64_t r = net_.uniform(0, 99);
    if (r < 4 && slots_[i].p) {
      crash(i);
    } else if (r < 10 && !slots_[i].p) {
      make(i);
      boot(i);
    } else if (r < 13) {
      net_.cut(i + 1, net_.uniform(1, n));
    } else if (r < 15) {
      isolate_minority();
    } else if (r < 17) {
      slots_[i].agent->take(static_cast<int>(net_.uniform(1, kCores)));
      ++squeezes;
    } else if (r < 22) {
      net_.heal_all();
      for (auto& s : slots_) s.agent->take(0);
    }
  }

  // Cuts a minority of the voters (the leader among it when there is one) from the
  // other voters; the member keeps its links.
  void isolate_minority() {
    unsigned n = voters_;
    std::set<unsigned> side;
    int l = leader();
    if (l >= 0) side.insert(static_cast<unsigned>(l));
    while (side.size() < (n - 1) / 2) side.insert(static_cast<unsigned>(net_.uniform(0, n - 1)));
    for (unsigned a : side)
      for (unsigned b = 0; b < n; ++b)
        if (!side.count(b)) net_.cut(a + 1, b + 1);
    ++isolations;
  }

  int leader() const {
    int best = -1;
    for (unsigned i = 0; i < slots_.size(); ++i) {
      const auto& p = slots_[i].p;
      if (!p || !p->node->is_leader()) continue;
      if (best < 0 || p->node->term() > slots_[best].p->node->term()) best = static_cast<int>(i);
    }
    return best;
  }

  // Everything healed and up; waits until every job ended and every member applied it.
  void settle() {
    net_.heal_all();
    net_.set_faults(SimFaults{});
    for (auto& s : slots_) s.agent->take(0);
    for (unsigned i = 0; i < slots_.size(); ++i)
      if (!slots_[i].p) {
        make(i);
        boot(i);
      }
    // Each second until every job ended: every job that runs for ever whose cancel no one was
    // told is ok yet (or whose submission timed out but was committed) is cancelled.
    auto settled = [&] {
      int l = leader();
      if (l < 0 || !slots_[l].p->coordinator->deciding()) return false;  // its barrier committed
      const RaftNode& ln = *slots_[l].p->node;
      for (const auto& [id, j] : slots_[l].p->fsm.state().data().jobs)
        if (j.state != corral::proto::state::kEnded) return false;
      for (const auto& s : slots_)
        if (s.p->node->last_applied() < ln.commit_index()) return false;
      return true;
    };
    bool ok = false;
    for (int second = 0; second < 120 && !ok; ++second) {
      if (int l = leader(); l >= 0)
        for (const auto& [id, j] : slots_[l].p->fsm.state().data().jobs)
          if (j.spec.name == kForever && j.state != corral::proto::state::kEnded && !cancelled_.count(id))
            cancel_forever(static_cast<unsigned>(l), id);
      ok = net_.run_until(settled, 1000);
    }
    if (!ok) fail("not settled within 120 s of healing: " + describe());
  }

  std::string describe() {
    std::ostringstream out;
    int l = leader();
    out << "leader " << (l < 0 ? std::string("none") : name(static_cast<unsigned>(l)));
    for (unsigned i = 0; i < slots_.size(); ++i)
      if (slots_[i].p)
        out << "; " << name(i) << " term " << slots_[i].p->node->term() << " commit " << slots_[i].p->node->commit_index()
            << " applied " << slots_[i].p->node->last_applied();
    if (l >= 0)
      for (const auto& [id, j] : slots_[l].p->fsm.state().data().jobs)
        if (j.state != corral::proto::state::kEnded) {
          out << "; job " << id << " " << j.state;
          if (j.runs.empty()) continue;
          const std::string& on = j.runs.back().nodes.front();
          out << " run " << j.runs.size() << " on " << on;
          const SimAgent::Record* r = slots_[std::stoul(on.substr(1)) - 1].agent->record(id);
          out << (!r ? " (its agent has no record of it)"
                     : " (its agent holds run " + std::to_string(r->run) + (r->ended ? ", ended)" : ", running)"));
          if (j.spec.name == kForever)
            out << "; runs for ever, cancel " << (j.runs.back().cancel_by.empty() ? "not committed" : "committed")
                << (cancelled_.count(id) ? ", answered ok" : "");
        }
    return out.str();
  }

  void check_end() {
    const MeshState& ref = slots_[leader()].p->fsm.state();
    std::string snap = ref.snapshot();
    for (unsigned i = 0; i < slots_.size(); ++i)
      if (slots_[i].p->fsm.snapshot() != snap) {
        const MeshData& d = slots_[i].p->fsm.state().data();
        return fail("member " + name(i) + "'s state differs after healing (applied " + std::to_string(d.applied) +
                    " entries, " + std::to_string(d.jobs.size()) + " jobs; the leader " +
                    std::to_string(ref.data().applied) + ", " + std::to_string(ref.data().jobs.size()) + "): " +
                    describe());
      }
    for (const auto& [id, n] : acked_)
      if (!ref.job(id)) return fail("acknowledged job " + std::to_string(id) + " lost");
    for (const auto& [id, j] : ref.data().jobs) {
      std::string job = "job " + std::to_string(id);
      const bool forever = j.spec.name == kForever;
      if (j.end_reason != (forever ? "cancelled" : "completed")) {
        std::string runs;
        for (const MeshRun& r : j.runs) runs += " [" + r.nodes.front() + " " + r.end_reason + " " + r.cancel_by + "]";
        return fail(job + " (" + j.spec.name + ") ended " + j.end_reason + ":" + runs);
      }
      cancels += forever;
      std::size_t ran = 0;
      for (std::size_t k = 0; k < j.runs.size(); ++k) {
        const MeshRun& r = j.runs[k];
        auto l = runs_[id].find(static_cast<std::int32_t>(k + 1));
        if (l == runs_[id].end()) {
          if (r.end_reason != "preempted") return fail(job + " run " + std::to_string(k + 1) + " never launched");
          ++requeues;
          continue;
        }
        if (l->second.node != r.nodes.front() || l->second.decided_term != r.term || l->second.decision != r.decision)
          return fail(job + " run " + std::to_string(k + 1) + " launched on " + l->second.node +
                      " is not the start the mesh committed");
        ran += r.end_reason == "completed";
      }
      if (ran != (forever ? 0u : 1u)) return fail(job + " completed " + std::to_string(ran) + " times");
      if (runs_[id].size() > j.runs.size()) return fail(job + " launched a run the mesh does not hold");
    }
    jobs += ref.data().jobs.size();
  }

  std::uint64_t seed_;
  unsigned voters_ = 0;
  SimNet net_;
  AgentWatch watch_;
  std::vector<Slot> slots_;
  std::string broken_;
  std::uint64_t submissions_ = 0;
  std::map<std::uint64_t, std::uint64_t> acked_;                       // id -> submission
  std::map<std::uint64_t, std::map<std::int32_t, Launch>> runs_;       // job -> run -> launch
  std::map<std::uint64_t, int> exits_;
  std::vector<std::uint64_t> forever_;                                 // acknowledged jobs that run for ever
  std::set<std::uint64_t> cancelled_;                                  // their cancels answered ok
};

}  // namespace

TEST_CASE("mesh sim: every job runs exactly once through crashes, loss, reordering and partitions",
          "[mesh_sim_random]") {
  std::uint64_t first = env_number("CORRAL_SIM_FIRST_SEED", 1);
  std::uint64_t seeds = env_number("CORRAL_SIM_SEEDS", corral_test::scaled<std::uint64_t>(300, 100));
  std::size_t jobs = 0, launches = 0, crashes = 0, isolations = 0, squeezes = 0, requeues = 0, killed = 0;
  std::size_t member_launches = 0, cancels = 0;
  std::vector<std::string> broken;
  for (std::uint64_t seed = first; seed < first + seeds; ++seed) {
    MeshSim sim(seed);
    std::string why = sim.run();
    if (!why.empty()) broken.push_back(why);
    jobs += sim.jobs;
    launches += sim.launches;
    crashes += sim.crashes;
    isolations += sim.isolations;
    squeezes += sim.squeezes;
    requeues += sim.requeues;
    killed += sim.killed;
    member_launches += sim.member_launches;
    cancels += sim.cancels;
    if (broken.size() >= 5) break;
  }
  for (const auto& b : broken) UNSCOPED_INFO(b << "  (replay: CORRAL_SIM_FIRST_SEED=" << b.substr(5, b.find(':') - 5)
                                               << " CORRAL_SIM_SEEDS=1)");
  CHECK(broken.empty());
  WARN(seeds << " seeds: " << jobs << " jobs, " << launches << " launches, " << crashes << " crashes, " << isolations
             << " minorities isolated, " << squeezes << " nodes squeezed, " << requeues
             << " starts given back, " << killed << " runs lost with their agent, " << member_launches
             << " launches on the member that does not vote, " << cancels << " jobs cancelled");
  if (seeds >= 100) {
    CHECK(member_launches > seeds);
    CHECK(jobs > seeds);
    CHECK(crashes > seeds);
    CHECK(cancels > seeds / 2);
  }
}
