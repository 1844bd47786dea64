// corrald's local socket: every user may connect; who they are comes from
// SO_PEERCRED, never from the client. Requests and replies are length-framed
// MessagePack (proto/); the commands themselves are in commands.cpp.
#include "agent/local_socket.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace corral::agent {

namespace {
constexpr std::size_t kMaxRequestElems = 1u << 16;  // env entries etc. in one request
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
  log_line("serving " + path);
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

void Daemon::accept_clients() {
  while (clients_.size() < kMaxClients) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        log_line("accept: " + errno_text());
      return;
    }
    ucred cr{};
    socklen_t len = sizeof cr;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Client>();
    c->fd = fd;
    c->peer = Peer{cr.uid, cr.gid, cr.pid};
    clients_[fd] = std::move(c);
  }
}

void Daemon::read_client(Client& c) {
  char buf[65536];
  bool closed = false;
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      c.reader.feed(buf, static_cast<std::size_t>(n));
      if (c.reader.buffered() > 2 * proto::kMaxFrame) break;  // let it drain first
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
  std::string frame;
  try {
    // A client blocked in `wait` sends nothing more until it is answered.
    while (!c.dead && !c.waiting && !c.close_after_write && c.reader.next(frame)) handle(c, frame);
  } catch (const proto::ProtoError& e) {
    send(c, proto::ErrorRep{"proto", e.what()});
    c.close_after_write = true;
  }
  if (closed) {
    if (c.waiting) c.dead = true;  // nobody left to tell
    else c.close_after_write = true;
  }
}

void Daemon::send(Client& c, const proto::Message& m) { c.out += proto::frame(proto::encode(m)); }

void Daemon::write_client(Client& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;
    return;
  }
}

void Daemon::handle(Client& c, const std::string& frame) {
  proto::Message m;
  try {
    m = proto::decode(frame, kMaxRequestElems);
  } catch (const proto::ProtoError& e) {
    log_line("bad request from pid " + std::to_string(c.peer.pid) + " uid " +
             std::to_string(c.peer.uid) + ": " + e.what());
    send(c, proto::ErrorRep{"proto", e.what()});
    c.close_after_write = true;
    return;
  }
  try {
    if (auto* r = std::get_if<proto::SubmitReq>(&m)) {
      send(c, on_submit(c.peer, *r));
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
    std::string frame;  // requests queued behind the wait
    try {
      while (!c->waiting && c->reader.next(frame)) handle(*c, frame);
    } catch (const proto::ProtoError& e) {
      send(*c, proto::ErrorRep{"proto", e.what()});
      c->close_after_write = true;
    }
  }
}

}  // namespace corral::agent
