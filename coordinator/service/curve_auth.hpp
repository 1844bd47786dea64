// CURVE on a member's ZeroMQ sockets: its ROUTER is a CURVE server that lets
// in only the allowed public keys (a ZAP handler in the loop's context), and
// each DEALER is a CURVE client that insists on its peer's public key. A peer
// without an allowed key completes no handshake, so it can neither read nor
// send a message. Every refusal is logged with the peer's address.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "coordinator/service/curve_keys.hpp"
#include "coordinator/service/zmq_env.hpp"

namespace corral::service {

class CurveAuth {
 public:
  // `server_keys`: each peer's public key by its endpoint ("tcp://host:port").
  // `log(kind, line)` runs on the loop's thread; kind is "key" (a key refused),
  // "handshake" (a failed handshake) or "config". `allowed_source` names the
  // allowed file in the log.
  CurveAuth(ZmqLoop& loop, KeyPair own, std::map<std::string, std::string> allowed,
            std::map<std::string, std::string> server_keys, std::string allowed_source,
            std::function<void(const char*, const std::string&)> log);
  ~CurveAuth();
  CurveAuth(const CurveAuth&) = delete;
  CurveAuth& operator=(const CurveAuth&) = delete;

  // Before bind: `router` becomes a CURVE server, and its failed handshakes are logged.
  void serve(zmq::socket_t& router);
  // Before bind: a member's PUB socket becomes a CURVE server too (subscribers with an allowed
  // key only; a refused key is logged, a peer without CURVE is not).
  void serve_publisher(zmq::socket_t& pub);
  // Before connect: `dealer` becomes a CURVE client of the peer at `endpoint`.
  // False (and logged) when no key is known for it: it must not connect.
  bool client(zmq::socket_t& dealer, const std::string& endpoint);

  std::size_t refusals() const { return refusals_; }

 private:
  void on_zap();
  void on_monitor();
  void watch_events(const std::string& monitor_ep, const std::string& relay_ep, const std::string& stop_ep);
  void relay_events(const std::string& monitor_ep, const std::string& relay_ep, const std::string& stop_ep);

  ZmqLoop& loop_;
  KeyPair own_;
  std::map<std::string, std::string> allowed_;      // key -> label
  std::map<std::string, std::string> server_keys_;  // endpoint -> key
  std::string source_;
  std::function<void(const char*, const std::string&)> log_;
  zmq::socket_t zap_;
  // The router's monitor is read on a thread of its own, which takes each
  // accepted peer's address at once: read later on a busy loop, the
  // connection may already be closed and the refusal could not name the peer.
  zmq::socket_t relay_;   // the loop's end: events with the peer's address
  zmq::socket_t stop_;    // tells the watcher to end
  std::thread watcher_;
  std::map<int, std::string> accepted_;  // fd -> peer address, until the connection is gone
  std::string failed_;                   // the reason of a failed handshake not yet logged
  std::size_t refusals_ = 0;
};

}  // namespace corral::service
