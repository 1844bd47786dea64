// The requests behind `corral console`: the reads of a refresh and the changes its keys make.
#include "tools/corral/console_state.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "tools/corral/client.hpp"
#include "tools/corral/reply.hpp"

namespace corral::cli {
namespace {

// Running work first (by start), then the pending jobs in the order the last pass planned them
// (a job without a plan last), ties by id as the queue orders them.
bool console_queue_order(const proto::JobInfo& a, const proto::JobInfo& b) {
  const bool ap = a.state == proto::state::kPending, bp = b.state == proto::state::kPending;
  if (ap != bp) return bp;
  if (!ap) return a.start_time != b.start_time ? a.start_time < b.start_time : a.id < b.id;
  const double pa = a.planned_start > 0 ? a.planned_start : 1e300;
  const double pb = b.planned_start > 0 ? b.planned_start : 1e300;
  return pa != pb ? pa < pb : a.id < b.id;
}

// Runs one request of a refresh; its failure becomes the state's error (the first one kept).
template <class Fn>
bool console_part(ConsoleState& s, const char* what, Fn fn) {
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    if (s.error.empty()) s.error = std::string(what) + ": " + e.what();
    return false;
  }
}

// The status line of a change: what corrald said, or its refusal.
template <class Fn>
std::string console_change(const std::string& what, Fn fn) {
  try {
    return what + ": " + fn();
  } catch (const std::exception& e) {
    return what + " refused: " + e.what();
  }
}

}  // namespace

ConsoleState console_fetch(const std::string& socket) {
  ConsoleState s;
  s.now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  console_part(s, "mesh", [&] { s.mesh = expect<proto::MeshRep>(request(socket, proto::MeshReq{false})).mesh; });
  console_part(s, "nodes", [&] { s.nodes = expect<proto::NodesRep>(request(socket, proto::NodesReq{})).nodes; });
  console_part(s, "stat", [&] {
    proto::StatReq q;
    q.states = "pending,running,suspended";
    s.queue = expect<proto::StatRep>(request(socket, q)).jobs;
    std::stable_sort(s.queue.begin(), s.queue.end(), console_queue_order);
  });
  try {
    s.alloc = expect<proto::AllocRep>(request(socket, proto::AllocReq{}));
  } catch (const std::exception& e) {
    s.alloc_note = e.what();  // no calendar (pba off) is not an error of the console
  }
  return s;
}

std::string console_node_admin(const std::string& socket, const std::string& node, const std::string& action,
                               const std::string& reason) {
  return console_change(action + " " + node, [&] {
    auto rep = expect<proto::NodeAdminRep>(request(socket, proto::NodeAdminReq{node, action, reason}));
    return rep.state + (rep.reason.empty() ? "" : " (" + rep.reason + ")");
  });
}

std::string console_job_control(const std::string& socket, std::uint64_t id, const std::string& action) {
  return console_change(action + " " + std::to_string(id), [&] {
    return expect<proto::ControlRep>(request(socket, proto::ControlReq{id, action, ""})).message;
  });
}

std::string console_cancel(const std::string& socket, std::uint64_t id) {
  return console_change("cancel " + std::to_string(id), [&] {
    return expect<proto::CancelRep>(request(socket, proto::CancelReq{id})).state;
  });
}

std::string console_alloc_set(const std::string& socket, const std::string& words) {
  return console_change("alloc set", [&] {
    std::istringstream in(words);
    std::vector<std::string> args{"alloc", "set"};
    for (std::string w; in >> w;) args.push_back(w);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    AllocArgs a = parse_alloc(static_cast<int>(argv.size()), argv.data());
    expect<proto::AllocRep>(request(socket, a.req));
    return words;
  });
}

}  // namespace corral::cli
