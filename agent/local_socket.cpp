// corrald's local socket: every user may connect; who they are comes from
// SO_PEERCRED, never from the client. Requests and replies are length-framed
// MessagePack (proto/); the commands themselves are in commands.cpp.
#include "agent/local_socket.hpp"

#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace corral::agent {

namespace {
constexpr std::size_t kMaxRequestElems = 1u << 16;  // env entries etc. in one request
constexpr std::size_t kMaxPerUser = 128;            // connections of one unprivileged user
constexpr std::size_t kSpareFds = 64;               // kept for the journal, jobs, logs
// Request bytes held for unprivileged users: one user may have one whole frame in flight (and a
// little more), all of them together a few. Reading stops at the limit (the kernel's socket
// buffers then push back on the senders) until frames complete or connections go.
constexpr std::size_t kUserBuffered = proto::kMaxFrame + (1u << 20);
constexpr std::size_t kTotalBuffered = 4 * std::size_t{proto::kMaxFrame};
constexpr std::size_t kMaxOut = 1u << 20;           // replies held before reading more requests
constexpr double kAcceptPause = 1;                  // s without accepting after EMFILE
constexpr double kOperatorCacheTtl = 60;            // s

std::string uid_text(const Peer& p) {
  return "uid " + std::to_string(p.uid) + " (pid " + std::to_string(p.pid) + ")";
}

// An answer to a connection refused at once; it is never read again.
void refuse(int fd, const std::string& why) {
  std::string f = proto::frame(proto::encode(proto::ErrorRep{"busy", why}));
  (void)!::send(fd, f.data(), f.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::close(fd);
}
}  // namespace

void Daemon::setup_socket() {
  const std::string& path = cfg_.socket;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    throw std::runtime_error("socket path '" + path + "' is empty or too long (max " +
                             std::to_string(sizeof addr.sun_path - 1) + " bytes)");
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty() && ::mkdir(dir.c_str(), 0755) == 0) ::chmod(dir.c_str(), 0755);

  // A live corrald on the same socket is an error; a stale file is replaced.
  int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe >= 0) {
    bool live = ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(probe);
    if (live) throw std::runtime_error("another corrald is already serving " + path);
  }
  ::unlink(path.c_str());
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw std::runtime_error("socket: " + errno_text());
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error("cannot bind " + path + ": " + errno_text());
  // Every user may connect; identity comes from SO_PEERCRED, not the client.
  ::chmod(path.c_str(), 0666);
  if (::listen(listen_fd_, 512) != 0) throw std::runtime_error("listen: " + errno_text());
  setup_limits();
  log_line("serving " + path + " (at most " + std::to_string(max_clients_) + " connections, " +
           std::to_string(reserve_) + " kept for root" + (have_operators_ ? " and group " + cfg_.operators : "") +
           "; " + std::to_string(kMaxPerUser) + " per user)");
}

// Connections stay below the open-file limit (raised to its hard limit), so that accepting one
// to refuse it always finds a descriptor; a reserve of them is only for root and operators.
void Daemon::setup_limits() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rlimit up = rl;
      up.rlim_cur = std::min<rlim_t>(rl.rlim_max, 1u << 16);
      if (up.rlim_cur > rl.rlim_cur && ::setrlimit(RLIMIT_NOFILE, &up) == 0) rl = up;
    }
    std::size_t fds = rl.rlim_cur == RLIM_INFINITY ? kMaxClients + kSpareFds : static_cast<std::size_t>(rl.rlim_cur);
    max_clients_ = std::clamp<std::size_t>(fds > kSpareFds ? fds - kSpareFds : 0, 8, kMaxClients);
  }
  reserve_ = std::clamp<std::size_t>(max_clients_ / 8, 2, 64);
  if (!cfg_.operators.empty()) {
    group gr{}, *res = nullptr;
    std::vector<char> buf(16384);
    if (getgrnam_r(cfg_.operators.c_str(), &gr, buf.data(), buf.size(), &res) != 0 || !res)
      throw std::runtime_error("operators: unknown group '" + cfg_.operators + "'");
    operators_gid_ = gr.gr_gid;
    have_operators_ = true;
  }
}

void Daemon::close_socket() {
  for (auto& [fd, c] : clients_) ::close(fd);
  clients_.clear();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(cfg_.socket.c_str());
    listen_fd_ = -1;
  }
}

bool Daemon::listening(double mono) const {
  return clients_.size() < max_clients_ && mono >= accept_paused_until_;
}

void Daemon::accept_clients() {
  // A bounded batch: a flood of connections cannot keep the loop from the rest.
  for (int batch = 0; batch < 64 && clients_.size() < max_clients_; ++batch) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The listener stays readable: polling it now would spin. Paused until a connection
        // closes (a descriptor is free again) or a second has passed; said once until every
        // waiting connection has been taken.
        accept_paused_until_ = mono_now() + kAcceptPause;
        if (!accept_starved_)
          log_line("accept: " + errno_text() + ": not accepting connections until one closes (retried every " +
                   std::to_string(static_cast<int>(kAcceptPause)) + " s)");
        accept_starved_ = true;
      } else if ((errno == EAGAIN || errno == EWOULDBLOCK) && accept_starved_) {
        log_line("accept: every waiting connection taken; accepting as usual again");
        accept_starved_ = false;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        log_limited("accept", "accept: " + errno_text());
      }
      return;
    }
    ucred cr{};
    socklen_t len = sizeof cr;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
      ::close(fd);
      continue;
    }
    Peer peer{cr.uid, cr.gid, cr.pid};
    bool priv = privileged(peer);
    peer.admin = priv;
    std::string why;
    if (!admit(peer, priv, why)) {
      log_limited("refused", "connection from " + uid_text(peer) + " refused: " + why);
      refuse(fd, why);
      continue;
    }
    auto c = std::make_unique<Client>();
    c->fd = fd;
    c->peer = peer;
    c->privileged = priv;
    c->last_active = mono_now();
    if (!priv) {
      ++unprivileged_;
      ++per_user_[peer.uid];
    }
    clients_[fd] = std::move(c);
  }
}

// Root and operators may use every connection; other users all but the reserve, each a few.
bool Daemon::admit(const Peer& p, bool priv, std::string& why) const {
  if (priv) return true;
  auto it = per_user_.find(p.uid);
  std::size_t mine = it == per_user_.end() ? 0 : it->second;
  if (mine >= kMaxPerUser) {
    why = "uid " + std::to_string(p.uid) + " already has " + std::to_string(mine) +
          " connections to corrald (at most " + std::to_string(kMaxPerUser) + "); close some and try again";
    return false;
  }
  if (unprivileged_ + reserve_ >= max_clients_) {
    why = "corrald is serving its most connections (" + std::to_string(clients_.size()) + "); try again shortly";
    return false;
  }
  return true;
}

// Root, or a member of the `operators` group (primary or supplementary; looked up at most once a
// minute per user).
bool Daemon::privileged(const Peer& p) {
  if (p.uid == 0) return true;
  if (!have_operators_) return false;
  if (p.gid == operators_gid_) return true;
  double mono = mono_now();
  auto it = operator_cache_.find(p.uid);
  if (it != operator_cache_.end() && mono < it->second.second) return it->second.first;
  bool member = false;
  passwd pw{}, *res = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(p.uid, &pw, buf.data(), buf.size(), &res) == 0 && res) {
    int n = 256;
    std::vector<gid_t> groups(static_cast<std::size_t>(n));
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) >= 0)
      member = std::find(groups.begin(), groups.begin() + n, operators_gid_) != groups.begin() + n;
  }
  if (operator_cache_.size() > 4096) operator_cache_.clear();
  operator_cache_[p.uid] = {member, mono + kOperatorCacheTtl};
  return member;
}

std::string Daemon::admins() const {
  return have_operators_ ? "root or a member of group " + cfg_.operators : "root";
}

// Bytes this connection may still buffer: up to one whole frame; for other users than root and
// operators also within their own and the shared budget.
std::size_t Daemon::read_room(const Client& c) const {
  std::size_t have = c.reader.buffered(), cap = proto::kMaxFrame + 4;
  std::size_t room = have < cap ? cap - have : 0;
  if (c.privileged) return room;
  auto it = buffered_.find(c.peer.uid);
  std::size_t user = it == buffered_.end() ? 0 : it->second;
  room = std::min(room, user < kUserBuffered ? kUserBuffered - user : 0);
  return std::min(room, buffered_total_ < kTotalBuffered ? kTotalBuffered - buffered_total_ : 0);
}

short Daemon::client_events(const Client& c) const {
  short ev = c.out.empty() ? 0 : POLLOUT;
  if ((!c.blocked() || c.reads_input()) && c.out.size() < kMaxOut && read_room(c) > 0) ev |= POLLIN;
  return ev;
}

// Keeps the budgets equal to what each connection's reader holds.
void Daemon::account(Client& c) {
  std::size_t now = c.reader.buffered();
  if (!c.privileged && now != c.counted) {
    std::size_t& user = buffered_[c.peer.uid];
    user = user + now - c.counted;
    buffered_total_ = buffered_total_ + now - c.counted;
    if (user == 0) buffered_.erase(c.peer.uid);
  }
  c.counted = now;
}

// Connections silent for client_timeout (a `wait` is not silence) are closed.
void Daemon::close_idle(double mono) {
  if (mono < next_idle_check_) return;
  next_idle_check_ = mono + std::min(1.0, cfg_.client_timeout / 4);
  for (auto& [fd, c] : clients_) {
    if (c->blocked() || c->dead || mono - c->last_active < cfg_.client_timeout) continue;
    log_limited("idle", "closing the connection of " + uid_text(c->peer) + ": silent for " +
                            std::to_string(static_cast<int>(cfg_.client_timeout)) + " s");
    c->dead = true;
  }
}

void Daemon::reap_clients() {
  for (auto it = clients_.begin(); it != clients_.end();) {
    Client& c = *it->second;
    if (!(c.dead || (c.close_after_write && c.out.empty()))) {
      ++it;
      continue;
    }
    if (c.mesh_ticket) exec_caller_gone(c.mesh_ticket);  // a `corral exec` killed: its process too
    c.reader = proto::FrameReader{};
    account(c);
    if (!c.privileged) {
      --unprivileged_;
      if (--per_user_[c.peer.uid] == 0) per_user_.erase(c.peer.uid);
    }
    ::close(it->first);
    it = clients_.erase(it);
    if (accept_starved_) accept_paused_until_ = 0;  // a descriptor is free: try again now
  }
}

void Daemon::read_client(Client& c, bool hup) {
  char buf[65536];
  bool closed = false;
  for (;;) {
    std::size_t room = std::min(read_room(c), sizeof buf);
    if (room == 0) {
      if (hup && !c.reader.buffered()) closed = true;
      else if (hup) c.dead = true;  // gone, with a request it may not finish
      break;
    }
    ssize_t n = ::recv(c.fd, buf, room, 0);
    if (n > 0) {
      c.reader.feed(buf, static_cast<std::size_t>(n));
      c.last_active = mono_now();
      account(c);
      continue;
    }
    if (n == 0) {
      closed = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
    break;
  }
  serve_buffered(c);
  if (closed) {
    if (c.blocked()) c.dead = true;  // nobody left to tell
    else c.close_after_write = true;
  }
}

// The whole requests buffered, in order, while the client is not blocked in `wait` and reads
// its replies.
void Daemon::serve_buffered(Client& c) {
  std::string frame;
  try {
    while (!c.dead && (!c.blocked() || c.reads_input()) && !c.close_after_write && c.out.size() < kMaxOut &&
           c.reader.next(frame))
      handle(c, frame);
  } catch (const proto::ProtoError& e) {
    send(c, proto::ErrorRep{"proto", e.what()});
    c.close_after_write = true;
  }
  account(c);
}

void Daemon::send(Client& c, const proto::Message& m) { c.out += proto::frame(proto::encode(m)); }

void Daemon::write_client(Client& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<std::size_t>(n));
      c.last_active = mono_now();
      if (c.out.empty() && c.out.capacity() > kMaxOut) std::string().swap(c.out);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;
    return;
  }
  if ((!c.blocked() || c.reads_input()) && c.reader.buffered()) serve_buffered(c);  // held back while replies piled up
}

void Daemon::handle(Client& c, const std::string& frame) {
  proto::Message m;
  try {
    m = proto::decode(frame, kMaxRequestElems);
  } catch (const proto::ProtoError& e) {
    log_limited("bad request", "bad request from " + uid_text(c.peer) + ": " + e.what());
    send(c, proto::ErrorRep{"proto", e.what()});
    c.close_after_write = true;
    return;
  }
  if (auto* in = std::get_if<proto::ExecIn>(&m)) return exec_input(c, *in);  // after its call ended: dropped
  if (c.blocked()) {  // only a `corral exec` sending its stdin is read while it waits
    send(c, proto::ErrorRep{"proto", "a corral exec call is running: only its stdin (exec_in) may follow it"});
    c.close_after_write = true;
    return;
  }
  c.exec_input = false;
  try {
    if (!name_task(c, m)) return;  // ID[INDEX] named a task it could not find
    if (auto* r = std::get_if<proto::SubmitReq>(&m); r && mesh_) {
      mesh_submit(c, *r);
    } else if (auto* s = std::get_if<proto::StatReq>(&m); s && mesh_) {
      mesh_stat(c, *s);
    } else if (auto* x = std::get_if<proto::CancelReq>(&m); x && mesh_) {
      mesh_cancel(c, *x);
    } else if (auto* w = std::get_if<proto::WaitReq>(&m); w && mesh_) {
      mesh_wait(c, *w);
    } else if (auto* ct = std::get_if<proto::ControlReq>(&m); ct && mesh_) {
      mesh_job_admin(c, *ct);
    } else if (auto* ex = std::get_if<proto::ExecReq>(&m)) {
      mesh_exec(c, *ex);
    } else if (auto* na = std::get_if<proto::NodeAdminReq>(&m)) {
      if (mesh_) mesh_node_admin(c, *na);
      else send(c, on_node_admin(c.peer, *na));
    } else if (auto* ns = std::get_if<proto::NodesReq>(&m)) {
      if (mesh_) mesh_nodes(c, *ns);
      else send(c, on_nodes(c.peer, *ns));
    } else if (auto* ac = std::get_if<proto::AcctReq>(&m)) {
      if (mesh_) mesh_acct(c, *ac);
      else send(c, on_acct(c.peer, *ac));
    } else if (auto* al = std::get_if<proto::AllocReq>(&m)) {
      if (mesh_) mesh_alloc(c, *al);
      else send(c, on_alloc(c.peer, *al));
    } else if (auto* r = std::get_if<proto::SubmitReq>(&m)) {
      proto::Message rep = on_submit(c.peer, *r);
      std::size_t at = c.out.size();
      send(c, rep);
      if (auto* ok = std::get_if<proto::SubmitRep>(&rep))  // refused if it cannot be made durable
        unsynced_submits_.push_back({c.fd, ok->id, at, c.out.size() - at});
    } else if (auto* s = std::get_if<proto::StatReq>(&m)) {
      send(c, on_stat(c.peer, *s));
    } else if (auto* x = std::get_if<proto::CancelReq>(&m)) {
      send(c, on_cancel(c.peer, *x));
    } else if (auto* w = std::get_if<proto::WaitReq>(&m)) {
      const JobRecord* rec = store_->find(w->id);
      if (!rec) {
        send(c, proto::ErrorRep{"not_found", "unknown job id " + std::to_string(w->id)});
      } else if (rec->ended()) {
        send(c, proto::WaitRep{info(*rec)});
      } else {
        c.waiting = w->id;  // answered by notify_waiters()
      }
    } else if (auto* nd = std::get_if<proto::NodeReq>(&m)) {
      send(c, on_node(c.peer, *nd));
    } else if (auto* ct = std::get_if<proto::ControlReq>(&m)) {
      send(c, on_control(c.peer, *ct));
    } else if (auto* rp = std::get_if<proto::ReportReq>(&m)) {
      if (mesh_) mesh_report(c, *rp);
      else send(c, on_report(c.peer, *rp));
    } else if (auto* ms = std::get_if<proto::MeshReq>(&m)) {
      send(c, on_mesh(c.peer, *ms));
    } else {
      send(c, proto::ErrorRep{"invalid", std::string("'") + std::string(proto::type_name(m)) +
                                             "' is not a request"});
    }
  } catch (const std::exception& e) {
    log_line(std::string("error handling request: ") + e.what());
    send(c, proto::ErrorRep{"internal", e.what()});
  }
}

void Daemon::notify_waiters(const JobRecord& rec) {
  for (auto& [fd, c] : clients_) {
    if (c->waiting != rec.id) continue;
    send(*c, proto::WaitRep{info(rec)});
    c->waiting = 0;
    serve_buffered(*c);  // requests queued behind the wait
  }
}

}  // namespace corral::agent
