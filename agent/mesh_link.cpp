#include "agent/mesh_link.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <type_traits>

#include <zmq.hpp>

#include "agent/log.hpp"
#include "agent/mesh_feed.hpp"
#include "coordinator/service/coordinator_loop.hpp"
#include "coordinator/service/curve_auth.hpp"
#include "coordinator/service/job_desk.hpp"
#include "coordinator/service/link_env.hpp"
#include "coordinator/service/member_admit.hpp"
#include "coordinator/service/mesh_machine.hpp"
#include "coordinator/service/raft_files.hpp"
#include "coordinator/service/raft_node.hpp"
#include "coordinator/service/zmq_env.hpp"
#include "proto/mesh_jobs.hpp"
#include "proto/mesh_link.hpp"

namespace corral::agent {

using namespace corral::service;

namespace {

constexpr std::uint64_t kHeartbeatMs = 200;  // each member's heartbeat, published (and its hello: tick())
constexpr std::uint64_t kHelloTicks = 5;  // an admitted member's hello: every 5 heartbeats
constexpr std::uint64_t kStatusMs = 50;   // status() is at most this old while the thread runs
constexpr std::uint64_t kNodeUnreachableMs = 3000;  // not heard for this long: `corral nodes` says unreachable
constexpr std::uint64_t kRunWaitMs = 2000;  // run_nodes(): a start this member's replica has not applied
constexpr std::uint64_t kWaitAskMs = 1000;  // a stat's plan not answered by then: listed without it

std::string endpoint(const std::string& host_port) { return "tcp://" + host_port; }
std::string bare(const std::string& ep) { return ep.rfind("tcp://", 0) == 0 ? ep.substr(6) : ep; }

std::string role_text(Role r) {
  switch (r) {
    case Role::voter: return "voter";
    case Role::standby: return "member";  // a member that does not vote
    case Role::spare: return "spare";
  }
  return "voter";
}

template <class T>
constexpr bool is_exec(const T&) {
  return std::is_same_v<T, proto::jobs::ExecStart> || std::is_same_v<T, proto::jobs::ExecOutput> ||
         std::is_same_v<T, proto::jobs::ExecEnd> || std::is_same_v<T, proto::jobs::ExecAlive> ||
         std::is_same_v<T, proto::jobs::ExecCancel> || std::is_same_v<T, proto::jobs::ExecInput>;
}

bool is_voter(const MeshConfig& cfg) {
  return std::find(cfg.voters.begin(), cfg.voters.end(), cfg.listen) != cfg.voters.end();
}

// The id this member's raft state belongs to, kept in `dir`/id from its first start: a member
// promoted to voter keeps its id when the config file later lists its address among voters.
std::uint64_t stored_member_id(const std::string& dir, std::uint64_t fresh) {
  const std::string path = dir + "/id";
  std::ifstream in(path);
  std::string line;
  if (in && std::getline(in, line)) {
    try {
      std::size_t used = 0;
      std::uint64_t id = std::stoull(line, &used);
      if (used == line.size() && id > 0) return id;
    } catch (const std::exception&) {
    }
    throw std::runtime_error("mesh: " + path + " does not hold a member id: '" + line.substr(0, 32) + "'");
  }
  std::ofstream out(path);
  out << fresh << "\n";
  if (!out.flush()) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  return fresh;
}

}  // namespace

std::uint64_t mesh_member_id(const MeshConfig& cfg) {
  auto at = std::find(cfg.voters.begin(), cfg.voters.end(), cfg.listen);
  if (at != cfg.voters.end()) return static_cast<std::uint64_t>(at - cfg.voters.begin()) + 1;
  return proto::link::member_id_of(cfg.node_name);
}

std::string check_mesh_config(const MeshConfig& cfg) {
  if (cfg.name.empty()) return "mesh: the mesh needs a name";
  if (cfg.voters.size() != 3 && cfg.voters.size() != 5)
    return "voters: a mesh needs 3 or 5 voters (host:port, the same list on every node)";
  if (cfg.listen.empty()) return "listen: this node's host:port (a voter's, or a member's own) is not set";
  if (!is_voter(cfg) && cfg.node_name.empty()) return "node_name: a member that does not vote needs a name";
  for (const std::string& a : cfg.voters)
    if (proto::link::publish_address(a).empty())
      return "voters: " + a + " is not host:port with a port below 65535 (a member publishes on the port above)";
  if (proto::link::publish_address(cfg.listen).empty())
    return "listen: " + cfg.listen + " is not host:port with a port below 65535 (a member publishes on the port above)";
  return "";
}

// What the mesh thread owns. Declared so that a member goes before the
// sockets it uses and every socket before the context.
struct MeshLink::Member {
  ZmqLoop loop;
  zmq::socket_t wake_pull{loop.context(), zmq::socket_type::pull};
  zmq::socket_t wake_push{loop.context(), zmq::socket_type::push};  // the daemon thread's
  std::unique_ptr<CurveAuth> curve;
  std::unique_ptr<MeshFeed> feed;  // the published channel: this node's reports, and those followed
  std::unique_ptr<ZmqEnv> zmq;
  std::unique_ptr<LinkEnv> env;
  std::unique_ptr<RaftFiles> files;
  RaftDisk disk;
  MeshMachine fsm;
  std::unique_ptr<RaftNode> node;
  std::unique_ptr<JobDesk> desk;             // answers forwarded submissions while this member leads
  std::unique_ptr<SubmitForwarder> forward;  // this member's own submissions
  std::unique_ptr<CoordinatorLoop> coordinator;  // decides while this member leads
  std::unique_ptr<MemberAdmit> admit;            // adds the members heard while this member leads
  std::uint64_t id = 0;
  // WaitAsks sent, by request number: their callers (on the mesh thread).
  std::map<std::uint64_t, std::function<void(std::vector<proto::jobs::JobWait>)>> wait_asks;
  std::uint64_t next_wait_ask = 0;
  std::uint64_t next_status_ms = 0;
  std::uint64_t ticks = 0;  // heartbeats so far
};

MeshLink::MeshLink(MeshConfig cfg) : cfg_(std::move(cfg)), m_(std::make_unique<Member>()) {
  if (std::string why = check_mesh_config(cfg_); !why.empty()) throw std::runtime_error(why);
  Member& m = *m_;
  m.files = std::make_unique<RaftFiles>(cfg_.dir, cfg_.fsync);
  m.id = stored_member_id(cfg_.dir, mesh_member_id(cfg_));
  // The directory belongs to one mesh: another name is a configuration mistake.
  std::string name_file = cfg_.dir + "/mesh";
  std::ifstream in(name_file);
  std::string recorded;
  if (in && std::getline(in, recorded) && recorded != cfg_.name)
    throw std::runtime_error("mesh: " + cfg_.dir + " holds the state of mesh '" + recorded +
                             "', not '" + cfg_.name + "'");
  m.disk = m.files->load();
  if (!m.files->warning().empty()) log_line("warning: " + m.files->warning());
  if (!in) {
    std::ofstream out(name_file);
    out << cfg_.name << "\n";
    if (!out.flush()) throw std::runtime_error("cannot write " + name_file + ": " + std::strerror(errno));
  }
  try {
    start_curve();
    m.zmq = std::make_unique<ZmqEnv>(m.loop, endpoint(cfg_.listen), m.curve.get());
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("listen " + cfg_.listen + ": " + e.what());
  }
  const std::string publish = proto::link::publish_address(cfg_.listen);
  try {
    m.feed = std::make_unique<MeshFeed>(
        m.loop, m.curve.get(), cfg_.name, m.id, endpoint(publish),
        [this](std::uint64_t id) { ask_snapshot(id); },
        [this](std::uint64_t id, const FeedReport& r) {
          // The coordinator takes a report only while no event of it may be missing.
          if (m_->coordinator && !r.name.empty()) m_->coordinator->heard_of(r.name, id);
          if (r.current && m_->coordinator)
            m_->coordinator->node(NodeReport{id, r.name, r.cores, r.mem_mb, r.jobfs_mb, r.running, r.at_ms,
                                             r.state == proto::link::kStopping});
        });
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("publish " + publish + " (the listen port + 1): " + e.what());
  }
  m.env = std::make_unique<LinkEnv>(*m.zmq, [this](std::string_view b) { on_link(b); },
                                    [this](std::string_view b) { on_jobs_message(b); });
  m.fsm.observe([this](std::uint64_t, std::string_view, const service::Outcome& o) {
    if (!o.ok || !o.job || !cfg_.on_ended || !watching_.load(std::memory_order_relaxed)) return;
    const MeshJob* j = m_->fsm.state().job(o.job);
    if (j && j->state == proto::state::kEnded) reply([fn = cfg_.on_ended, job = o.job] { fn(job); });
    // An array ends with its last task, in the same entry.
    const MeshJob* a = j && j->array_id ? m_->fsm.state().job(j->array_id) : nullptr;
    if (a && a->state == proto::state::kEnded) reply([fn = cfg_.on_ended, job = a->id] { fn(job); });
  });
  m.node = std::make_unique<RaftNode>(m.id, endpoint(cfg_.listen), *m.env, m.disk, m.fsm);
  if (is_voter(cfg_) && m.id <= cfg_.voters.size() && m.disk.term == 0 && m.disk.entries.empty() && !m.disk.snapshot) {
    // A new mesh's voter: every voter writes the same first configuration. A member that
    // does not vote starts with none: the leader adds it. From then on the configuration in
    // the log says who votes (`corral mesh promote`, `remove`), not the voters list.
    std::vector<service::Member> conf;
    for (std::size_t i = 0; i < cfg_.voters.size(); ++i)
      conf.push_back(service::Member{i + 1, endpoint(cfg_.voters[i]), Role::voter});
    if (int rv = m.node->bootstrap(conf); rv != 0)
      throw std::runtime_error("mesh: cannot write the first configuration: " + m.node->error());
  }
  m.desk = std::make_unique<JobDesk>(*m.node);
  m.forward = std::make_unique<SubmitForwarder>(
      *m.env, *m.node, *m.desk, cfg_.name, [this](std::uint64_t to, std::string bytes) { send_to(to, std::move(bytes)); },
      cfg_.listen + "/" + std::to_string(::getpid()) + "/" + std::to_string(m.loop.now_ms()), cfg_.submit_wait_ms);
  m.coordinator = std::make_unique<CoordinatorLoop>(
      *m.env, *m.node, m.fsm.state(), cfg_.name, cfg_.sched, cfg_.queues,
      [this](std::uint64_t to, const proto::jobs::Message& msg) {
        if (to != m_->id) send_to(to, proto::jobs::encode(msg));
        else if (cfg_.on_order) reply([fn = cfg_.on_order, msg] { fn(msg); });
      });
  m.coordinator->set_grants(cfg_.grants);
  m.admit = std::make_unique<MemberAdmit>(*m.node, [this](const std::string& line) {
    reply([line] { log_line(line); });
  });
  m.admit->set_removed([this](const std::string& name) {
    const auto& nodes = m_->fsm.state().data().nodes;
    auto it = nodes.find(name);
    return it != nodes.end() && it->second.state == proto::mesh::admin::kRemoved;
  }, [this](std::uint64_t id, const std::string& address, const std::string& name) {
    m_->env->send(id, address, proto::link::encode(proto::link::Removed{cfg_.name, id, name, cfg_.node_name}));
  });
  m.desk->set_check([this](const proto::mesh::Entry& e) { return m_->coordinator->admit(e); });
  m.forward->set_cancel_desk([this](const proto::jobs::CancelAsk& ask, JobDesk::Done done) {
    m_->coordinator->cancel(ask, done);
  });
  reply_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (reply_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  std::string wake = "inproc://mesh-wake-" + std::to_string(reinterpret_cast<std::uintptr_t>(this));
  m.wake_pull.bind(wake);
  m.wake_push.connect(wake);
  status_.mesh = cfg_.name;
  status_.node = cfg_.node_name;
  status_.id = m.id;
  status_.address = cfg_.listen;
  status_.state = "unavailable";
  status_.voters = cfg_.voters;
  thread_ = std::thread([this] { thread_main(); });
}

void MeshLink::start_curve() {
  if (!cfg_.keys.curve) {
    log_line("warning: mesh " + cfg_.name + " runs without CURVE (mesh_insecure = yes): any host that reaches " +
             cfg_.listen + " can read and send the mesh's messages");
    return;
  }
  std::map<std::string, std::string> server_keys;
  for (const auto& [address, key] : cfg_.keys.peer_keys) server_keys[endpoint(address)] = key;
  for (const auto& [address, key] : cfg_.keys.peer_keys)  // its publish address: the same key
    server_keys.emplace(endpoint(proto::link::publish_address(address)), key);
  m_->curve = std::make_unique<CurveAuth>(m_->loop, cfg_.keys.own, cfg_.keys.allowed, std::move(server_keys),
                                          cfg_.allowed_file, [this](const char* kind, const std::string& line) {
                                            std::string k = std::string("mesh refusal: ") + kind;
                                            reply([k, line] { log_limited(k, line); });
                                          });
}

// A member at the address the raft configuration holds; before this member knows a
// configuration, a first voter at its place in voters.
std::string MeshLink::address_of(std::uint64_t id) const {
  const std::vector<service::Member> members = m_->node->members();
  for (const service::Member& mb : members)
    if (mb.id == id) return mb.address;
  if (members.empty() && id >= 1 && id <= cfg_.voters.size()) return endpoint(cfg_.voters[id - 1]);
  return "";
}

void MeshLink::send_to(std::uint64_t id, std::string bytes) {
  if (id == 0 || id == m_->id) return;
  if (std::string to = address_of(id); !to.empty()) m_->env->send(id, to, std::move(bytes));
}

// A jobs message from another member (on the mesh thread).
void MeshLink::on_jobs_message(std::string_view bytes) {
  proto::jobs::Message msg;
  try {
    msg = proto::jobs::decode(bytes);
  } catch (const proto::ProtoError&) {
    return;  // dropped as a lost message: the sender resends
  }
  Member& m = *m_;
  if (auto* a = std::get_if<proto::jobs::ForwardAck>(&msg)) {
    m.forward->on_ack(*a);
  } else if (auto* f = std::get_if<proto::jobs::Forward>(&msg); f && f->mesh == cfg_.name && f->cancel.asked()) {
    m.coordinator->cancel(f->cancel, [this, from = f->from, request = f->request](const DeskAnswer& a) {
      send_to(from, proto::jobs::encode(proto::jobs::ForwardAck{cfg_.name, m_->id, request, a.status, a.job,
                                                                a.leader, a.message, a.code}));
    });
  } else if (auto* f = std::get_if<proto::jobs::Forward>(&msg); f && f->mesh == cfg_.name) {
    proto::mesh::Entry e;
    try {
      e = proto::mesh::decode_entry(f->entry);
    } catch (const proto::ProtoError& err) {
      send_to(f->from, proto::jobs::encode(proto::jobs::ForwardAck{cfg_.name, m.id, f->request, "refused", 0, 0,
                                                                   err.what(), "invalid"}));
      return;
    }
    m.desk->accept(e, [this, from = f->from, request = f->request](const DeskAnswer& a) {
      send_to(from, proto::jobs::encode(proto::jobs::ForwardAck{cfg_.name, m_->id, request, a.status, a.job,
                                                                a.leader, a.message, a.code}));
    });
  } else if (std::holds_alternative<proto::jobs::StartJob>(msg) || std::holds_alternative<proto::jobs::CancelJob>(msg) ||
             std::holds_alternative<proto::jobs::JobOrder>(msg)) {
    if (cfg_.on_order) reply([fn = cfg_.on_order, msg] { fn(msg); });
  } else if (auto* w = std::get_if<proto::jobs::WaitAsk>(&msg); w && w->mesh == cfg_.name) {
    proto::jobs::WaitAnswer a = m.coordinator->waits(w->jobs);
    a.mesh = cfg_.name;
    a.from = m.id;
    a.request = w->request;
    send_to(w->from, proto::jobs::encode(a));
  } else if (auto* wa = std::get_if<proto::jobs::WaitAnswer>(&msg); wa && wa->mesh == cfg_.name) {
    if (auto it = m.wait_asks.find(wa->request); it != m.wait_asks.end()) {
      it->second(std::move(wa->waits));  // empty unless "ok"
      m.wait_asks.erase(it);
    }
  } else if (auto* k = std::get_if<proto::jobs::StartAck>(&msg); k && k->mesh == cfg_.name) {
    if (m.coordinator) m.coordinator->on_ack(*k);
  } else if (std::visit([](const auto& b) { return is_exec(b); }, msg)) {
    const std::string& mesh = std::visit([](const auto& b) -> const std::string& { return b.mesh; }, msg);
    if (mesh == cfg_.name && cfg_.on_order) reply([fn = cfg_.on_order, msg] { fn(msg); });
  }
}

void MeshLink::send_member(std::uint64_t to, proto::jobs::Message m) {
  post([this, to, m = std::move(m)]() mutable { deliver(to, std::move(m)); });
}

void MeshLink::send_node(const std::string& node, proto::jobs::Message m, std::function<void()> unknown) {
  post([this, node, m = std::move(m), unknown = std::move(unknown)]() mutable {
    std::uint64_t to = member_named(node);
    if (to == 0) reply(std::move(unknown));
    else deliver(to, std::move(m));
  });
}

void MeshLink::deliver(std::uint64_t to, proto::jobs::Message m) {
  std::visit([this](auto& b) {
    b.mesh = cfg_.name;
    b.from = m_->id;
  }, m);
  if (to != m_->id) send_to(to, proto::jobs::encode(m));
  else if (cfg_.on_order) reply([fn = cfg_.on_order, m = std::move(m)] { fn(m); });
}

std::uint64_t MeshLink::member_named(const std::string& node) const {
  if (node.empty()) return 0;
  if (node == cfg_.node_name) return m_->id;
  for (const auto& [id, r] : m_->feed->reports().all())
    if (r.name == node) return id;
  MeshConfig named;  // a member that does not vote: its id comes from its name
  named.node_name = node;
  std::uint64_t id = mesh_member_id(named);
  for (const service::Member& mb : m_->node->members())
    if (mb.id == id) return id;
  return 0;
}

void MeshLink::waits(std::vector<std::uint64_t> jobs, std::function<void(std::vector<proto::jobs::JobWait>)> done) {
  post([this, jobs = std::move(jobs), done = std::move(done)]() mutable {
    Member& m = *m_;
    auto answer = [this, done = std::move(done)](std::vector<proto::jobs::JobWait> w) {
      reply([done, w = std::move(w)]() mutable { done(std::move(w)); });
    };
    if (m.coordinator->deciding()) return answer(m.coordinator->waits(jobs).waits);
    const std::uint64_t leader = m.node->leader_id();
    if (leader == 0 || leader == m.id) return answer({});
    const std::uint64_t request = ++m.next_wait_ask;
    m.wait_asks[request] = std::move(answer);
    send_to(leader, proto::jobs::encode(proto::jobs::WaitAsk{cfg_.name, m.id, request, std::move(jobs)}));
    m.env->post(kWaitAskMs, [this, request] {
      if (auto it = m_->wait_asks.find(request); it != m_->wait_asks.end()) {
        it->second({});
        m_->wait_asks.erase(it);
      }
    });
  });
}

void MeshLink::propose(proto::mesh::Entry e, std::function<void(const SubmitResult&)> done, bool bounded) {
  post([this, e = std::move(e), done = std::move(done), bounded]() mutable {
    m_->forward->submit(std::move(e), [this, done = std::move(done)](const SubmitResult& r) {
      reply([done, r] { done(r); });
    }, bounded);
  });
}

void MeshLink::cancel(proto::jobs::CancelAsk ask, std::function<void(const SubmitResult&)> done) {
  post([this, ask = std::move(ask), done = std::move(done)]() mutable {
    m_->forward->cancel(std::move(ask), [this, done = std::move(done)](const SubmitResult& r) {
      reply([done, r] { done(r); });
    });
  });
}

void MeshLink::set_node(int cores, std::int64_t mem_mb, std::int64_t jobfs_mb, std::vector<std::uint64_t> running) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    node_.cores = cores;
    node_.mem_mb = mem_mb;
    node_.jobfs_mb = jobfs_mb;
    node_.running = std::move(running);
  }
  post([this] {  // published at once, not at the next heartbeat
    OwnNode n;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = node_;
    }
    m_->feed->publish(n.cores, n.mem_mb, n.jobfs_mb, n.running);
  });
}

void MeshLink::start_ack(std::uint64_t to, proto::jobs::StartAck a) {
  post([this, to, a = std::move(a)]() mutable {
    a.mesh = cfg_.name;
    a.from = m_->id;
    if (to == m_->id) m_->coordinator->on_ack(a);
    else send_to(to, proto::jobs::encode(a));
  });
}

void MeshLink::jobs(std::uint64_t id, std::function<void(std::vector<service::MeshJob>)> done) {
  post([this, id, done = std::move(done)]() mutable {
    std::vector<MeshJob> out;
    const MeshState& st = m_->fsm.state();
    if (id != 0) {
      if (const MeshJob* j = st.job(id)) out.push_back(*j);
      for (std::uint64_t t : st.tasks(id)) out.push_back(*st.job(t));  // an array's tasks after it
    } else {
      out.reserve(st.data().jobs.size());
      for (const auto& [jid, j] : st.data().jobs) out.push_back(j);
    }
    reply([done = std::move(done), out = std::move(out)]() mutable { done(std::move(out)); });
  });
}

void MeshLink::run_nodes(std::uint64_t job, std::int32_t run, std::function<void(std::vector<std::string>)> done) {
  post([this, job, run, done = std::move(done)]() mutable { await_run(job, run, std::move(done), kRunWaitMs); });
}

void MeshLink::await_run(std::uint64_t job, std::int32_t run, std::function<void(std::vector<std::string>)> done,
                         std::uint64_t left_ms) {
  const MeshJob* j = m_->fsm.state().job(job);
  const auto runs = static_cast<std::int32_t>(j ? j->runs.size() : 0);
  if (runs < run && left_ms > 0) {
    const std::uint64_t step = std::min<std::uint64_t>(20, left_ms);
    m_->env->post(step, [this, job, run, done = std::move(done), left = left_ms - step]() mutable {
      await_run(job, run, std::move(done), left);
    });
    return;
  }
  std::vector<std::string> nodes;
  if (runs == run) nodes = j->runs.back().nodes;
  reply([done = std::move(done), nodes = std::move(nodes)]() mutable { done(std::move(nodes)); });
}

void MeshLink::data(std::function<void(MeshData)> done) {
  post([this, done = std::move(done)]() mutable {
    MeshData d = m_->fsm.state().data();
    reply([done = std::move(done), d = std::move(d)]() mutable { done(std::move(d)); });
  });
}

void MeshLink::nodes(std::function<void(std::vector<proto::NodeLine>)> done) {
  post([this, done = std::move(done)]() mutable {
    Member& m = *m_;
    const MeshData& st = m.fsm.state().data();
    std::uint64_t now = m.loop.now_ms();
    std::map<std::string, proto::NodeLine> lines;
    namespace ns = proto::node_state;
    auto line = [&](const std::string& name, int cores, std::int64_t mem_mb, std::int64_t ago, bool stopping) {
      proto::NodeLine& n = lines[name];
      n.name = name;
      n.cores = cores;
      n.mem_mb = mem_mb;
      n.last_contact_ms = ago;
      n.state = stopping ? ns::kStopped : ago > static_cast<std::int64_t>(kNodeUnreachableMs) ? ns::kUnreachable : ns::kUp;
    };
    {
      std::lock_guard<std::mutex> lock(mu_);
      line(cfg_.node_name, node_.cores, node_.mem_mb, 0, false);
    }
    for (const auto& [id, r] : m.feed->reports().all())
      if (!r.name.empty())
        line(r.name, r.cores, r.mem_mb, static_cast<std::int64_t>(now - r.at_ms), r.state == proto::link::kStopping);
    for (const auto& [name, admin] : st.nodes) {
      if (admin.state == proto::mesh::admin::kRemoved) {  // gone for good: not listed
        lines.erase(name);
        continue;
      }
      proto::NodeLine& n = lines[name];
      n.name = name;
      if (n.state.empty()) n.state = ns::kUnreachable;  // named by an admin state, never heard
      if (admin.state == proto::mesh::admin::kDrain) {
        n.state = ns::kDrained;
        n.reason = admin.reason;
      }
    }
    for (const auto& [id, j] : st.jobs) {
      if (j.state != proto::state::kRunning && j.state != proto::state::kSuspended) continue;
      if (j.runs.empty()) continue;
      const service::MeshRun& run = j.runs.back();
      for (std::size_t i = 0; i < run.nodes.size(); ++i) {  // a job across nodes: each its share
        auto it = lines.find(run.nodes[i]);
        if (it == lines.end()) continue;
        it->second.jobs += 1;
        it->second.mem_used_mb += service::share_mem_mb(j, i);
        if (j.state == proto::state::kRunning) it->second.cores_used += service::share_slots(j, i);
      }
    }
    std::vector<proto::NodeLine> out;
    for (auto& [name, n] : lines) out.push_back(std::move(n));
    reply([done = std::move(done), out = std::move(out)]() mutable { done(std::move(out)); });
  });
}

MeshLink::~MeshLink() {
  stop_ = true;
  if (thread_.joinable()) {
    (void)m_->wake_push.send(zmq::str_buffer("x"), zmq::send_flags::dontwait);
    thread_.join();
  }
  m_.reset();  // raft closes before its sockets and files
  if (reply_fd_ >= 0) ::close(reply_fd_);
}

proto::MeshStatus MeshLink::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void MeshLink::post(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);  // also over the send: a ZeroMQ socket is one thread's at a time
  inbox_.push_back(std::move(fn));
  (void)m_->wake_push.send(zmq::str_buffer("x"), zmq::send_flags::dontwait);
}

void MeshLink::reply(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    replies_.push_back(std::move(fn));
  }
  std::uint64_t one = 1;
  (void)!::write(reply_fd_, &one, sizeof one);
}

void MeshLink::run_replies() {
  std::uint64_t n = 0;
  (void)!::read(reply_fd_, &n, sizeof n);
  std::deque<std::function<void()>> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    todo.swap(replies_);
  }
  for (auto& fn : todo) fn();
}

void MeshLink::thread_main() {
  Member& m = *m_;
  m.loop.watch(m.wake_pull, [this, &m] {
    zmq::message_t msg;
    while (m.wake_pull.recv(msg, zmq::recv_flags::dontwait)) {
    }
    std::deque<std::function<void()>> todo;
    {
      std::lock_guard<std::mutex> lock(mu_);
      todo.swap(inbox_);
    }
    for (auto& fn : todo) fn();
  });
  m.node->on_leadership([this](bool leader, std::uint64_t term) {
    std::string what = leader ? "coordinator of mesh " + cfg_.name + " in term " + std::to_string(term)
                              : "no longer the coordinator (term " + std::to_string(term) + ")";
    reply([what] { log_line(what); });
    m_->coordinator->leadership(leader, term);  // a barrier first, then decisions
  });
  if (int rv = m.node->start(); rv != 0) {
    std::string why = "mesh: raft did not start: " + m.node->error();
    reply([why] { log_line(why); });
    return;
  }
  std::function<void()> beat = [this, &m, &beat] {
    tick();
    m.env->post(kHeartbeatMs, beat);
  };
  beat();
  while (!stop_) {
    m.loop.run_once(kStatusMs);
    if (m.loop.now_ms() >= m.next_status_ms) {
      publish_status();
      m.next_status_ms = m.loop.now_ms() + kStatusMs;
    }
  }
  m.feed->goodbye(MeshFeed::View{cfg_.node_name, cfg_.listen, std::string(m.node->state_name()), m.node->term(),
                                 m.node->commit_index()});
}

void MeshLink::publish_status() {
  Member& m = *m_;
  const RaftNode& n = *m.node;
  proto::MeshStatus s;
  s.mesh = cfg_.name;
  s.node = cfg_.node_name;
  s.id = m.id;
  s.address = cfg_.listen;
  s.state = std::string(n.state_name());
  s.term = n.term();
  s.commit_index = n.commit_index();
  s.last_applied = n.last_applied();
  s.jobs = m.fsm.state().data().jobs.size();
  s.coordinator_id = n.leader_id();
  std::uint64_t now = m.loop.now_ms();
  for (const service::Member& mb : n.members()) {
    if (mb.role == Role::voter) s.voters.push_back(bare(mb.address));
    proto::MeshMember pm;
    pm.id = mb.id;
    pm.address = bare(mb.address);
    pm.role = role_text(mb.role);
    if (mb.id == m.id) {
      pm.name = cfg_.node_name;
      pm.state = s.state;
      pm.term = s.term;
      pm.commit_index = s.commit_index;
      pm.last_contact_ms = 0;
    } else if (const FeedReport* r = m.feed->reports().find(mb.id)) {
      pm.name = r->name;
      pm.state = r->state;
      pm.term = r->term;
      pm.commit_index = r->commit_index;
      pm.last_contact_ms = static_cast<std::int64_t>(now - r->at_ms);
      pm.snapshots_asked = r->snapshots_asked;
    }
    if (mb.id == s.coordinator_id) s.coordinator = pm.name.empty() ? pm.address : pm.name;
    s.members.push_back(std::move(pm));
  }
  if (s.voters.empty()) s.voters = cfg_.voters;  // no configuration known yet
  std::lock_guard<std::mutex> lock(mu_);
  status_ = std::move(s);
}

// Every 200 ms: this node's events (a change set_node() posted is published at once) and
// heartbeat, and the publishers it follows. A member that does not vote also says hello to
// every voter (MemberAdmit: the published channel cannot introduce it, voters follow the
// members of the raft configuration only): each time until its configuration holds it,
// then every kHelloTicks (a member taken out, then let in again, is heard).
void MeshLink::tick() {
  Member& m = *m_;
  OwnNode n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = node_;
  }
  m.feed->publish(n.cores, n.mem_mb, n.jobfs_mb, n.running);
  m.feed->heartbeat(MeshFeed::View{cfg_.node_name, cfg_.listen, std::string(m.node->state_name()), m.node->term(),
                                   m.node->commit_index()});
  m.coordinator->node(
      NodeReport{m.id, cfg_.node_name, n.cores, n.mem_mb, n.jobfs_mb, n.running, m.loop.now_ms(), false});
  // A voter follows every member; a member the voters (not one another). Who votes is the
  // raft configuration's say; the voters list only while this member knows none.
  const std::vector<service::Member> members = m.node->members();
  std::set<std::string> follow, voters;
  bool admitted = false, voter = false;
  for (const service::Member& mb : members) {
    if (mb.id == m.id) {
      admitted = true;
      voter = mb.role == Role::voter;
    } else if (mb.role == Role::voter) {
      voters.insert(bare(mb.address));
    }
  }
  if (voters.empty())
    for (const std::string& v : cfg_.voters)
      if (v != cfg_.listen) voters.insert(v);
  for (const std::string& v : voters) follow.insert(endpoint(proto::link::publish_address(v)));
  for (const service::Member& mb : members)
    if (voter && mb.role != Role::voter && mb.id != m.id)
      follow.insert(endpoint(proto::link::publish_address(bare(mb.address))));
  m.feed->follow(follow);
  ++m.ticks;
  if (!voter && (!admitted || m.ticks % kHelloTicks == 0)) {
    // To the configuration's voters and the voters list: where a starting member looks first.
    for (const std::string& v : cfg_.voters)
      if (v != cfg_.listen) voters.insert(v);
    std::string hello = proto::link::encode(proto::link::Hello{cfg_.name, m.id, cfg_.node_name, cfg_.listen});
    for (const std::string& v : voters) m.env->send(0, endpoint(v), hello);
  }
}

// A link message of the request channel (on the mesh thread).
void MeshLink::on_link(std::string_view bytes) {
  proto::link::Message msg;
  try {
    msg = proto::link::decode(bytes);
  } catch (const proto::ProtoError& e) {
    // Dropped as a lost message; logged (on corrald's thread) so that a hostile sender shows.
    std::string why = e.what();
    reply([why] { log_limited("bad mesh message", "mesh: bad link message dropped: " + why); });
    return;
  }
  auto* h = std::get_if<proto::link::Hello>(&msg);
  if (h && h->mesh == cfg_.name && h->id != 0)
    m_->admit->heard(h->id, endpoint(h->address), h->name);
  else if (auto* a = std::get_if<proto::link::SnapshotAsk>(&msg); a && a->mesh == cfg_.name && a->id != 0)
    answer_snapshot(*a);
  else if (std::holds_alternative<proto::link::Snapshot>(msg))
    m_->feed->on(msg);
  else if (auto* r = std::get_if<proto::link::Removed>(&msg); r && r->mesh == cfg_.name && r->id == m_->id && cfg_.on_removed)
    reply([fn = cfg_.on_removed, by = r->by] { fn(by); });
}

void MeshLink::ask_snapshot(std::uint64_t publisher) {
  send_to(publisher, proto::link::encode(proto::link::SnapshotAsk{cfg_.name, m_->id, cfg_.listen}));
}

// To the asker as send_to() finds it, else at the address it gave (a member not yet admitted).
void MeshLink::answer_snapshot(const proto::link::SnapshotAsk& a) {
  Member& m = *m_;
  std::string bytes = proto::link::encode(m.feed->snapshot(MeshFeed::View{
      cfg_.node_name, cfg_.listen, std::string(m.node->state_name()), m.node->term(), m.node->commit_index()}));
  if (!address_of(a.id).empty()) send_to(a.id, std::move(bytes));
  else if (!a.address.empty()) m.env->send(a.id, endpoint(a.address), std::move(bytes));
}

}  // namespace corral::agent
