#include "coordinator/service/curve_auth.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <zmq.h>

namespace corral::service {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";  // fixed by ZAP (RFC 27)
constexpr const char* kDomain = "corral-mesh";

std::string text(const zmq::message_t& m) { return std::string(static_cast<const char*>(m.data()), m.size()); }

std::string z85(const zmq::message_t& raw) {
  if (raw.size() != 32) return "(" + std::to_string(raw.size()) + " bytes)";
  char out[41];
  zmq_z85_encode(out, static_cast<const std::uint8_t*>(raw.data()), 32);
  return out;
}

std::string peer_address(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "";
  char host[INET6_ADDRSTRLEN] = {};
  int port = 0;
  if (sa.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&sa);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (sa.ss_family == AF_INET6) {
    auto* in = reinterpret_cast<sockaddr_in6*>(&sa);
    ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof host);
    port = ntohs(in->sin6_port);
  } else {
    return "";
  }
  return std::string(host) + ":" + std::to_string(port);
}

std::string failure_text(std::uint16_t event, std::uint32_t value) {
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
    return "it does not speak CURVE (handshake refused)";
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
    return "its CURVE handshake failed (it does not hold the key it claims, or expects another key of ours)";
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
    return "its handshake broke the protocol (error 0x" + [&] {
      char b[16];
      std::snprintf(b, sizeof b, "%x", value);
      return std::string(b);
    }() + ")";
  return "it broke off the handshake (it speaks no CURVE, or not with our key)";
}

}  // namespace

CurveAuth::CurveAuth(ZmqLoop& loop, KeyPair own, std::map<std::string, std::string> allowed,
                     std::map<std::string, std::string> server_keys, std::string allowed_source,
                     std::function<void(const char*, const std::string&)> log)
    : loop_(loop), own_(std::move(own)), allowed_(std::move(allowed)), server_keys_(std::move(server_keys)),
      source_(std::move(allowed_source)), log_(std::move(log)), zap_(loop.context(), zmq::socket_type::rep),
      relay_(loop.context(), zmq::socket_type::pair), stop_(loop.context(), zmq::socket_type::pair) {
  zap_.set(zmq::sockopt::linger, 0);
  zap_.bind(kZapEndpoint);  // one handler per context: a second CurveAuth on this loop throws here
  loop_.watch(zap_, [this] { on_zap(); });
}

CurveAuth::~CurveAuth() {
  loop_.unwatch(zap_);
  if (watcher_.joinable()) {
    (void)stop_.send(zmq::str_buffer("stop"), zmq::send_flags::none);
    watcher_.join();
    loop_.unwatch(relay_);
  }
}

void CurveAuth::serve(zmq::socket_t& router) {
  router.set(zmq::sockopt::curve_server, 1);
  router.set(zmq::sockopt::curve_secretkey, own_.secret_key);
  router.set(zmq::sockopt::zap_domain, kDomain);
  const std::string tag = std::to_string(reinterpret_cast<std::uintptr_t>(this));
  const std::string monitor_ep = "inproc://corral-curve-monitor-" + tag;
  const std::string relay_ep = "inproc://corral-curve-relay-" + tag;
  const std::string stop_ep = "inproc://corral-curve-stop-" + tag;
  const int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
  if (zmq_socket_monitor(router.handle(), monitor_ep.c_str(), events) != 0) throw zmq::error_t();
  for (zmq::socket_t* s : {&relay_, &stop_}) s->set(zmq::sockopt::linger, 0);
  relay_.bind(relay_ep);
  stop_.bind(stop_ep);
  watcher_ = std::thread([this, monitor_ep, relay_ep, stop_ep] { watch_events(monitor_ep, relay_ep, stop_ep); });
  loop_.watch(relay_, [this] { on_monitor(); });
}

void CurveAuth::serve_publisher(zmq::socket_t& pub) {
  pub.set(zmq::sockopt::curve_server, 1);
  pub.set(zmq::sockopt::curve_secretkey, own_.secret_key);
  pub.set(zmq::sockopt::zap_domain, kDomain);
}

// The watcher's thread: each monitor event goes to the loop as it came, with
// a third frame, the peer's address, taken at once for an accepted connection.
void CurveAuth::watch_events(const std::string& monitor_ep, const std::string& relay_ep,
                             const std::string& stop_ep) {
  try {
    relay_events(monitor_ep, relay_ep, stop_ep);
  } catch (const zmq::error_t&) {
    // the context is ending: nothing left to watch
  }
}

void CurveAuth::relay_events(const std::string& monitor_ep, const std::string& relay_ep,
                             const std::string& stop_ep) {
  zmq::socket_t monitor(loop_.context(), zmq::socket_type::pair), out(loop_.context(), zmq::socket_type::pair),
      stop(loop_.context(), zmq::socket_type::pair);
  for (zmq::socket_t* s : {&monitor, &out, &stop}) s->set(zmq::sockopt::linger, 0);
  monitor.connect(monitor_ep);
  out.connect(relay_ep);
  stop.connect(stop_ep);
  while (true) {
    zmq::pollitem_t items[] = {{monitor.handle(), 0, ZMQ_POLLIN, 0}, {stop.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2);
    if (items[1].revents & ZMQ_POLLIN) return;
    zmq::message_t ev, addr;
    if (!monitor.recv(ev, zmq::recv_flags::dontwait)) continue;
    if (!ev.more() || !monitor.recv(addr, zmq::recv_flags::none) || ev.size() < 6) continue;
    std::uint16_t event;
    std::uint32_t value;
    std::memcpy(&event, ev.data(), 2);
    std::memcpy(&value, static_cast<const char*>(ev.data()) + 2, 4);
    std::string peer = event == ZMQ_EVENT_ACCEPTED ? peer_address(static_cast<int>(value)) : "";
    (void)out.send(ev, zmq::send_flags::sndmore);
    (void)out.send(addr, zmq::send_flags::sndmore);
    (void)out.send(zmq::buffer(peer), zmq::send_flags::none);
  }
}

bool CurveAuth::client(zmq::socket_t& dealer, const std::string& endpoint) {
  auto it = server_keys_.find(endpoint);
  if (it == server_keys_.end()) {
    log_("config", "mesh: no public key known for " + endpoint + " (" + source_ + "): not connecting to it");
    return false;
  }
  dealer.set(zmq::sockopt::curve_serverkey, it->second);
  dealer.set(zmq::sockopt::curve_publickey, own_.public_key);
  dealer.set(zmq::sockopt::curve_secretkey, own_.secret_key);
  return true;
}

// One ZAP request (RFC 27): version, request id, domain, address, identity,
// mechanism, then the client's public key for CURVE.
void CurveAuth::on_zap() {
  while (true) {
    std::vector<zmq::message_t> parts;
    zmq::message_t part;
    if (!zap_.recv(part, zmq::recv_flags::dontwait)) return;
    parts.push_back(std::move(part));
    while (parts.back().more()) {
      zmq::message_t more;
      if (!zap_.recv(more, zmq::recv_flags::none)) break;
      parts.push_back(std::move(more));
    }
    std::string status = "400", why = "not allowed";
    std::string request_id = parts.size() > 1 ? text(parts[1]) : "";
    if (parts.size() >= 7 && text(parts[0]) == "1.0" && text(parts[5]) == "CURVE") {
      std::string key = z85(parts[6]);
      if (allowed_.count(key)) {
        status = "200", why = "OK";
      } else {
        ++refusals_;
        log_("key", "mesh: refused " + text(parts[3]) + ": its key " + key + " is not in " + source_);
      }
    } else {
      ++refusals_;
      log_("key", "mesh: refused " + (parts.size() > 3 ? text(parts[3]) : std::string("a peer")) + ": malformed ZAP request");
    }
    std::vector<std::string> reply = {"1.0", request_id, status, why, "", ""};
    for (std::size_t i = 0; i < reply.size(); ++i)
      (void)zap_.send(zmq::buffer(reply[i]), i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

// Handshake failures the ZAP handler never sees (a peer without CURVE, or
// with a key that does not match ours). The failure names no peer; the
// connection's fd, accepted before and closed after it, does.
void CurveAuth::on_monitor() {
  while (true) {
    zmq::message_t ev, addr, peer;
    if (!relay_.recv(ev, zmq::recv_flags::dontwait)) return;
    if (!relay_.recv(addr, zmq::recv_flags::none) || !relay_.recv(peer, zmq::recv_flags::none)) continue;
    std::uint16_t event;
    std::uint32_t value;
    std::memcpy(&event, ev.data(), 2);
    std::memcpy(&value, static_cast<const char*>(ev.data()) + 2, 4);
    const int fd = static_cast<int>(value);
    if (event == ZMQ_EVENT_ACCEPTED) {
      accepted_[fd] = text(peer);
    } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      failed_.clear();  // the ZAP handler logged it, with the key
    } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL || event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
      failed_ = failure_text(event, value);
    } else if (event == ZMQ_EVENT_DISCONNECTED) {
      auto it = accepted_.find(fd);
      const bool known = it != accepted_.end() && !it->second.empty();
      std::string who = known ? it->second : "a peer (address gone)";
      if (it != accepted_.end()) accepted_.erase(it);
      if (!failed_.empty()) {
        ++refusals_;
        // Its own budget of log lines: refusals whose address was lost (the connection closed
        // before the watcher read its accept) never crowd out those that name the peer.
        log_(known ? "handshake" : "handshake, address gone",
             "mesh: refused " + who + " on " + text(addr) + ": " + failed_);
        failed_.clear();
      }
    }
  }
}

}  // namespace corral::service
