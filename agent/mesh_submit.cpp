#include "agent/mesh_submit.hpp"

#include <limits>
#include <vector>

namespace corral::agent {

namespace {
constexpr std::uint64_t kResendMs = 500;     // no answer from the coordinator: send again
constexpr std::uint64_t kNoLeaderMs = 50;    // no coordinator known yet: look again
constexpr std::uint64_t kTickMs = 50;
constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();
}  // namespace

SubmitForwarder::SubmitForwarder(service::Env& env, service::Consensus& c, service::JobDesk& desk,
                                 std::string mesh, Send send, std::string token_prefix, std::uint64_t wait_ms)
    : env_(env), c_(c), desk_(desk), mesh_(std::move(mesh)), send_(std::move(send)),
      token_prefix_(std::move(token_prefix)), wait_ms_(wait_ms) {}

SubmitForwarder::~SubmitForwarder() { *alive_ = false; }

void SubmitForwarder::submit(proto::mesh::Entry e, Done done, bool bounded) {
  Pending p;
  if (auto* job = std::get_if<proto::mesh::JobAccepted>(&e))
    job->token = token_prefix_ + "/" + std::to_string(next_key_);
  p.entry = std::move(e);
  p.done = std::move(done);
  p.deadline = bounded ? env_.now_ms() + wait_ms_ : kNever;
  start(std::move(p));
}

void SubmitForwarder::cancel(proto::jobs::CancelAsk ask, Done done) {
  Pending p;
  p.cancel = std::move(ask);
  p.done = std::move(done);
  p.deadline = env_.now_ms() + wait_ms_;
  start(std::move(p));
}

void SubmitForwarder::start(Pending p) {
  std::uint64_t key = next_key_++;
  pending_[key] = std::move(p);
  attempt(key);
  if (!ticking_) {
    ticking_ = true;
    env_.post(kTickMs, [this, alive = alive_] {
      if (*alive) tick();
    });
  }
}

// One try: to this member's own desk when it leads, else to the leader it knows.
void SubmitForwarder::attempt(std::uint64_t key) {
  Pending& p = pending_.at(key);
  std::uint64_t now = env_.now_ms();
  std::uint64_t leader = c_.leader_id();
  if (leader == 0) {
    p.next_try = now + kNoLeaderMs;
    p.last = "no coordinator elected";
    return;
  }
  std::uint64_t request = next_request_++;
  requests_[request] = key;
  if (leader == c_.id()) {
    p.next_try = kNever;  // the desk always answers
    auto back = [this, alive = alive_, request](const service::DeskAnswer& a) {
      if (!*alive) return;
      auto it = requests_.find(request);
      if (it == requests_.end()) return;
      std::uint64_t k = it->second;
      requests_.erase(it);
      answer(k, a);
    };
    if (!p.cancel.asked()) desk_.accept(p.entry, back);
    else if (cancel_desk_) cancel_desk_(p.cancel, back);
    return;
  }
  p.next_try = now + kResendMs;
  proto::jobs::Forward f{mesh_, c_.id(), request, "", p.cancel};
  if (!p.cancel.asked()) f.entry = proto::mesh::encode_entry(p.entry);
  send_(leader, proto::jobs::encode(f));
}

void SubmitForwarder::on_ack(const proto::jobs::ForwardAck& a) {
  if (a.mesh != mesh_) return;
  auto it = requests_.find(a.request);
  if (it == requests_.end()) return;  // an answer to an attempt already settled
  std::uint64_t key = it->second;
  requests_.erase(it);
  answer(key, service::DeskAnswer{a.status, a.job, a.leader, a.message, a.code});
}

void SubmitForwarder::answer(std::uint64_t key, const service::DeskAnswer& a) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  Pending& p = it->second;
  if (a.status == "ok" || a.status == "refused") {
    SubmitResult r{a.status == "ok", a.job, a.status == "ok" ? "" : a.code.empty() ? "invalid" : a.code,
                   a.status == "ok" || p.cancel.asked() ? a.message : "the mesh refused the job: " + a.message};
    Done done = std::move(p.done);
    pending_.erase(it);
    done(r);
    return;
  }
  // Not (or no longer) the coordinator, or it failed: soon again, with the same token.
  p.last = a.message.empty() ? a.status : a.status + " (" + a.message + ")";
  p.next_try = env_.now_ms() + kNoLeaderMs;
}

void SubmitForwarder::tick() {
  std::uint64_t now = env_.now_ms();
  std::vector<std::uint64_t> due;  // tried after the walk: the leader's own desk may answer (and erase) at once
  for (auto it = pending_.begin(); it != pending_.end();) {
    std::uint64_t key = it->first;
    Pending& p = it->second;
    if (now >= p.deadline) {
      SubmitResult r{false, 0, "unavailable",
                     "no coordinator of mesh " + mesh_ + (p.cancel.asked() ? " took the request" : " accepted the job") +
                         " within " + std::to_string(wait_ms_ / 1000) + " s (last: " + p.last +
                         "; a majority of the voters must be reachable): " +
                         (p.cancel.asked() ? "nothing was changed" : "job not accepted")};
      Done done = std::move(p.done);
      it = pending_.erase(it);
      for (auto r2 = requests_.begin(); r2 != requests_.end();)
        r2 = r2->second == key ? requests_.erase(r2) : std::next(r2);
      done(r);
      continue;
    }
    if (now >= p.next_try) due.push_back(key);
    ++it;
  }
  for (std::uint64_t key : due)
    if (pending_.count(key)) attempt(key);
  if (pending_.empty()) {
    ticking_ = false;
    return;
  }
  env_.post(kTickMs, [this, alive = alive_] {
    if (*alive) tick();
  });
}

}  // namespace corral::agent
