#include "coordinator/service/raft_node.hpp"

#include <algorithm>
#include <cstring>

#include "coordinator/service/raft_codec.hpp"

namespace corral::service {

struct RaftNode::ApplyReq {
  struct raft_apply req{};
  RaftNode* node = nullptr;
  ProposeCb cb;
  Applied applied;
};
struct RaftNode::BarrierReq {
  struct raft_barrier req{};
  RaftNode* node = nullptr;
  DoneCb cb;
};
struct RaftNode::ChangeReq {
  raft_change req{};
  RaftNode* node = nullptr;
  DoneCb cb;
};
struct RaftNode::TransferReq {
  struct raft_transfer req{};
  RaftNode* node = nullptr;
  DoneCb cb;
};

namespace {

// Snapshot bytes per log entry between snapshots (RaftOptions::snapshot_threshold).
constexpr std::size_t kSnapshotBytesPerEntry = 256;

Status status_of(int rv) {
  switch (rv) {
    case 0: return Status::ok;
    case RAFT_NOTLEADER: return Status::not_leader;
    case RAFT_LEADERSHIPLOST: return Status::leadership_lost;
    case RAFT_SHUTDOWN:
    case RAFT_CANCELED: return Status::shutdown;
    default: return Status::error;
  }
}

}  // namespace

std::string_view status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::not_leader: return "not the leader";
    case Status::leadership_lost: return "leadership lost";
    case Status::shutdown: return "shut down";
    case Status::error: return "error";
  }
  return "error";
}

RaftNode::RaftNode(std::uint64_t id, std::string address, Env& env, RaftDisk& disk,
                   StateMachine& sm, const RaftOptions& opt)
    : id_(id), min_threshold_(opt.snapshot_threshold), address_(std::move(address)), env_(env), sm_(sm), io_(env, disk),
      raft_(std::make_unique<raft>()) {
  fsm_.version = 2;
  fsm_.data = this;
  fsm_.apply = fsm_apply;
  fsm_.snapshot = fsm_snapshot;
  fsm_.restore = fsm_restore;
  fsm_.snapshot_finalize = nullptr;  // raft frees the snapshot buffers
  std::memset(raft_.get(), 0, sizeof(raft));
  init_rv_ = raft_init(raft_.get(), io_.io(), &fsm_, id_, address_.c_str());
  raft_->data = this;
  raft_set_election_timeout(raft_.get(), opt.election_ms);
  raft_set_heartbeat_timeout(raft_.get(), opt.heartbeat_ms);
  raft_set_pre_vote(raft_.get(), opt.pre_vote);
  raft_set_snapshot_threshold(raft_.get(), opt.snapshot_threshold);
  raft_set_snapshot_trailing(raft_.get(), opt.snapshot_trailing);
  io_.after_event([this] { check_leadership(); });
}

RaftNode::~RaftNode() {
  // The io closes at once: raft's waiting requests fail, their callbacks are
  // posted to the Env (they run if it still runs), and nothing this node
  // posted earlier runs after this.
  if (init_rv_ != 0) return;  // raft_init failed: nothing to close
  bool closed = false;
  raft_->data = &closed;
  raft_close(raft_.get(), [](raft* r) { *static_cast<bool*>(r->data) = true; });
}

int RaftNode::bootstrap(const std::vector<Member>& members) {
  if (init_rv_ != 0) return init_rv_;
  raft_configuration conf;
  int rv = configuration_of(members, conf);
  if (rv != 0) return rv;
  rv = raft_bootstrap(raft_.get(), &conf);
  raft_configuration_close(&conf);
  return rv;
}

int RaftNode::start() {
  int rv = init_rv_ != 0 ? init_rv_ : raft_start(raft_.get());
  started_ = rv == 0;
  if (started_) check_leadership();
  return rv;
}

std::string RaftNode::error() const { return raft_errmsg(raft_.get()); }

int RaftNode::fsm_apply(raft_fsm* fsm, const raft_buffer* buf, void** result) {
  auto* n = static_cast<RaftNode*>(fsm->data);
  *result = nullptr;
  std::uint64_t index = raft_last_applied(n->raft_.get()) + 1;
  Applied a;
  try {
    a = n->sm_.apply(index, std::string_view(static_cast<const char*>(buf->base), buf->len));
  } catch (const std::exception& e) {
    a = Applied{false, std::string("apply failed: ") + e.what(), 0};
  }
  auto it = n->inflight_.find(index);
  if (it != n->inflight_.end()) it->second->applied = std::move(a);
  return 0;  // never an error: libraft would stop this replica for good
}

int RaftNode::fsm_snapshot(raft_fsm* fsm, raft_buffer* bufs[], unsigned* n_bufs) {
  auto* n = static_cast<RaftNode*>(fsm->data);
  std::string s = n->sm_.snapshot();
  auto* b = static_cast<raft_buffer*>(raft_malloc(sizeof(raft_buffer)));
  void* data = raft_malloc(s.empty() ? 1 : s.size());
  if (b == nullptr || data == nullptr) {
    raft_free(b);
    raft_free(data);
    return RAFT_NOMEM;
  }
  std::memcpy(data, s.data(), s.size());
  // A fixed threshold snapshots a state of N jobs every so many entries: the
  // cost per entry grows with N (at 100,000 jobs, tens of MB serialized per
  // thousand entries). The log kept between snapshots grows with it instead.
  raft_set_snapshot_threshold(n->raft_.get(),
                              std::max<unsigned>(n->min_threshold_, static_cast<unsigned>(std::min<std::size_t>(
                                                                        s.size() / kSnapshotBytesPerEntry, 1u << 20))));
  b[0].base = data;
  b[0].len = s.size();
  *bufs = b;
  *n_bufs = 1;
  return 0;
}

int RaftNode::fsm_restore(raft_fsm* fsm, raft_buffer* buf) {
  auto* n = static_cast<RaftNode*>(fsm->data);
  if (!n->sm_.restore(std::string_view(static_cast<const char*>(buf->base), buf->len)))
    return RAFT_MALFORMED;
  raft_free(buf->base);  // ours on success
  return 0;
}

void RaftNode::check_leadership() {
  bool leader = is_leader();
  std::uint64_t t = term();
  if (leader == was_leader_ && (!leader || t == leader_term_)) return;
  was_leader_ = leader;
  leader_term_ = t;
  if (leadership_cb_) leadership_cb_(leader, t);
}

void RaftNode::deliver(std::function<void()> fn) { env_.post(0, std::move(fn)); }

void RaftNode::fail_later(DoneCb cb, Status s) {
  env_.post(0, [cb = std::move(cb), s] {
    if (cb) cb(s);
  });
}

void RaftNode::propose(std::string entry, ProposeCb cb) {
  if (!started_ || !is_leader()) {
    env_.post(0, [cb = std::move(cb)] {
      if (cb) cb(Proposed{Status::not_leader, 0, {}, "not the leader"});
    });
    return;
  }
  auto* req = new ApplyReq;
  req->node = this;
  req->cb = std::move(cb);
  req->req.data = req;
  raft_buffer buf{raft_malloc(entry.empty() ? 1 : entry.size()), entry.size()};
  if (buf.base != nullptr) std::memcpy(buf.base, entry.data(), entry.size());
  int rv = buf.base == nullptr ? RAFT_NOMEM
                               : raft_apply(raft_.get(), &req->req, &buf, 1,
                                            [](struct raft_apply* r, int status, void*) {
                                              auto* q = static_cast<ApplyReq*>(r->data);
                                              RaftNode* n = q->node;
                                              Proposed p{status_of(status), r->index, {}, {}};
                                              n->inflight_.erase(r->index);
                                              if (status == 0) p.applied = std::move(q->applied);
                                              if (status != 0) p.message = raft_strerror(status);
                                              n->deliver([cb = std::move(q->cb), p] {
                                                if (cb) cb(p);
                                              });
                                              delete q;
                                            });
  if (rv != 0) {
    raft_free(buf.base);
    std::string msg = raft_strerror(rv);
    env_.post(0, [cb = std::move(req->cb), rv, msg] {
      if (cb) cb(Proposed{status_of(rv), 0, {}, msg});
    });
    delete req;
    return;
  }
  inflight_[req->req.index] = req;
}

void RaftNode::barrier(DoneCb cb) {
  if (!started_ || !is_leader()) return fail_later(std::move(cb), Status::not_leader);
  auto* req = new BarrierReq;
  req->node = this;
  req->cb = std::move(cb);
  req->req.data = req;
  int rv = raft_barrier(raft_.get(), &req->req, [](struct raft_barrier* r, int status) {
    auto* q = static_cast<BarrierReq*>(r->data);
    q->node->deliver([cb = std::move(q->cb), status] {
      if (cb) cb(status_of(status));
    });
    delete q;
  });
  if (rv != 0) {
    fail_later(std::move(req->cb), status_of(rv));
    delete req;
  }
}

bool RaftNode::is_leader() const { return started_ && raft_state(raft_.get()) == RAFT_LEADER; }

std::string_view RaftNode::state_name() const {
  if (!started_) return "unavailable";
  switch (raft_state(raft_.get())) {
    case RAFT_LEADER: return "leader";
    case RAFT_FOLLOWER: return "follower";
    case RAFT_CANDIDATE: return "candidate";
    default: return "unavailable";
  }
}

std::uint64_t RaftNode::leader_id() const {
  raft_id id = 0;
  const char* addr = nullptr;
  raft_leader(raft_.get(), &id, &addr);
  return id;
}

std::uint64_t RaftNode::term() const { return raft_->current_term; }
std::uint64_t RaftNode::commit_index() const { return raft_->commit_index; }
std::uint64_t RaftNode::last_applied() const { return raft_last_applied(raft_.get()); }
std::vector<Member> RaftNode::members() const { return members_of(raft_->configuration); }

void RaftNode::change_cb(raft_change* r, int status) {
  auto* q = static_cast<ChangeReq*>(r->data);
  q->node->deliver([cb = std::move(q->cb), status] {
    if (cb) cb(status_of(status));
  });
  delete q;
}

void RaftNode::change(DoneCb cb, const std::function<int(raft_change*)>& submit) {
  if (!is_leader()) return fail_later(std::move(cb), Status::not_leader);
  auto* req = new ChangeReq;
  req->node = this;
  req->cb = std::move(cb);
  req->req.data = req;
  int rv = submit(&req->req);
  if (rv != 0) {
    fail_later(std::move(req->cb), status_of(rv));
    delete req;
  }
}

void RaftNode::add(const Member& m, DoneCb cb) {
  change(std::move(cb), [&](raft_change* req) {
    return raft_add(raft_.get(), req, m.id, m.address.c_str(), change_cb);
  });
}

void RaftNode::assign(std::uint64_t id, Role role, DoneCb cb) {
  change(std::move(cb), [&](raft_change* req) {
    return raft_assign(raft_.get(), req, id, raft_role(role), change_cb);
  });
}

void RaftNode::remove(std::uint64_t id, DoneCb cb) {
  change(std::move(cb), [&](raft_change* req) { return raft_remove(raft_.get(), req, id, change_cb); });
}

void RaftNode::transfer(std::uint64_t id, DoneCb cb) {
  if (!is_leader()) return fail_later(std::move(cb), Status::not_leader);
  auto* req = new TransferReq;
  req->node = this;
  req->cb = std::move(cb);
  req->req.data = req;
  int rv = raft_transfer(raft_.get(), &req->req, id, [](struct raft_transfer* r) {
    auto* q = static_cast<TransferReq*>(r->data);
    q->node->deliver([cb = std::move(q->cb)] {
      if (cb) cb(Status::ok);
    });
    delete q;
  });
  if (rv != 0) {  // RAFT_BADID: not a voter of the configuration, or this member
    fail_later(std::move(req->cb), status_of(rv));
    delete req;
  }
}

}  // namespace corral::service
