// corral hold / release / qmove / drain / undrain / nodes: the operator commands (qhold, qrls,
// qmove, pbsnodes -o/-r, pbsnodes -a), each with --json. corrald decides who may: a job's owner,
// root or an operator for the job commands, root or an operator for drain and undrain.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "coordinator/json_text.hpp"
#include "proto/spec_check.hpp"
#include "tools/corral/client.hpp"
#include "tools/corral/commands.hpp"
#include "tools/corral/reply.hpp"

namespace corral::cli {
namespace {

using Json = nlohmann::ordered_json;

const char* const kHoldHelp =
    "usage: corral hold JOBID... [--json]     corral release JOBID... [--json]\n"
    "  hold     a pending job is not started until released (your own jobs; root or an\n"
    "           operator: any job, and only they release such an operator hold)\n"
    "  release  the held job may start again\n";
const char* const kQmoveHelp =
    "usage: corral qmove QUEUE JOBID... [--json]\n"
    "Moves pending jobs to another configured queue (their charging follows the queue).\n"
    "A running job is refused. Your own jobs; root or an operator: any job.\n";
const char* const kDrainHelp =
    "usage: corral drain NODE --reason TEXT [--json]     corral undrain NODE [--json]\n"
    "  drain    no new job starts on NODE; running jobs finish (root or an operator)\n"
    "  undrain  NODE takes new jobs again\n";
const char* const kNodesHelp =
    "usage: corral nodes [--json]\n"
    "Every node of the mesh (standalone: this one): state (up, drained, unreachable,\n"
    "stopped), cores and memory used and free, jobs running.\n";

// One ControlReq per job: a line each (or a JSON array), exit 1 when any was refused.
int job_requests(const char* cmd, const Common& c, const std::string& action, const std::string& queue,
                 const std::vector<std::string>& ids) {
  if (ids.empty()) throw UsageError("missing job id");
  std::vector<JobRef> parsed;
  for (const auto& a : ids) parsed.push_back(parse_job_ref(a));
  int rc = 0;
  Json out = Json::array();
  for (const JobRef& ref : parsed) {
    const std::string id = job_ref_text(ref.id, ref.index);
    proto::Message m = request(c.socket, proto::ControlReq{ref.id, action, queue, ref.index});
    if (auto* e = std::get_if<proto::ErrorRep>(&m)) {
      std::fprintf(stderr, "corral %s: %s\n", cmd, e->message.c_str());
      out.push_back(Json{{"id", ref.index < 0 ? Json(ref.id) : Json(id)}, {"ok", false}, {"error", e->message}});
      rc = 1;
      continue;
    }
    proto::ControlRep rep = expect<proto::ControlRep>(m);
    out.push_back(Json{{"id", ref.index < 0 ? Json(ref.id) : Json(id)}, {"ok", true}, {"state", rep.state}, {"message", rep.message}});
    if (!c.json) std::printf("%s %s\n", id.c_str(), rep.message.c_str());
  }
  if (c.json) std::printf("%s\n", json_text(out).c_str());
  return rc;
}

Json node_json(const proto::NodeLine& n) {
  return Json{{"name", n.name},           {"state", n.state},
              {"reason", n.reason},       {"cores", n.cores},
              {"cores_used", n.cores_used}, {"cores_free", n.cores - n.cores_used},
              {"mem_mb", n.mem_mb},       {"mem_used_mb", n.mem_used_mb},
              {"mem_free_mb", n.mem_mb - n.mem_used_mb}, {"jobs", n.jobs},
              {"last_contact_ms", n.last_contact_ms}};
}

void print_nodes(const std::vector<proto::NodeLine>& nodes) {
  std::printf("%-16s %-11s %5s %5s %10s %10s %5s  %s\n", "NODE", "STATE", "CORES", "FREE", "MEM_MB", "FREE_MB",
              "JOBS", "REASON");
  for (const proto::NodeLine& n : nodes)
    std::printf("%-16.16s %-11s %5d %5d %10lld %10lld %5d  %s\n", proto::printable(n.name).c_str(), n.state.c_str(),
                n.cores, n.cores - n.cores_used, static_cast<long long>(n.mem_mb),
                static_cast<long long>(n.mem_mb - n.mem_used_mb), n.jobs, proto::printable(n.reason).c_str());
}

}  // namespace

// corral hold | release JOBID...
int cmd_hold(int argc, char** argv) {
  const char* cmd = argc > 0 ? argv[0] : "hold";
  return guarded(cmd, [&] {
    Common c = parse_common(cmd, argc, argv, true);
    if (c.help) return std::fputs(kHoldHelp, stdout), 0;
    return job_requests(cmd, c, cmd, "", c.args);
  });
}

// corral qmove QUEUE JOBID...
int cmd_qmove(int argc, char** argv) {
  return guarded("qmove", [&] {
    Common c = parse_common("qmove", argc, argv, true);
    if (c.help) return std::fputs(kQmoveHelp, stdout), 0;
    if (c.args.empty() || c.args[0].empty()) throw UsageError("missing queue (corral qmove QUEUE JOBID...)");
    std::vector<std::string> ids(c.args.begin() + 1, c.args.end());
    return job_requests("qmove", c, "qmove", c.args[0], ids);
  });
}

// corral drain NODE --reason TEXT | corral undrain NODE
int cmd_drain(int argc, char** argv) {
  const std::string cmd = argc > 0 ? argv[0] : "drain";
  const bool drain = cmd == "drain";
  return guarded(cmd.c_str(), [&] {
    Common c = parse_common(cmd.c_str(), argc, argv, true, drain);
    if (c.help) return std::fputs(kDrainHelp, stdout), 0;
    if (c.args.size() != 1 || c.args[0].empty()) throw UsageError("give one node name (corral " + cmd + " NODE)");
    if (drain && c.reason.empty()) throw UsageError("drain needs a reason: --reason TEXT");
    proto::NodeAdminRep rep = expect<proto::NodeAdminRep>(request(c.socket, proto::NodeAdminReq{c.args[0], cmd, c.reason}));
    if (c.json) std::printf("%s\n", json_text(Json{{"node", rep.node}, {"state", rep.state}, {"reason", rep.reason}}).c_str());
    else std::printf("%s %s%s\n", proto::printable(rep.node).c_str(), rep.state.c_str(),
                     rep.reason.empty() ? "" : (": " + proto::printable(rep.reason)).c_str());
    return 0;
  });
}

int cmd_nodes(int argc, char** argv) {
  return guarded("nodes", [&] {
    Common c = parse_common("nodes", argc, argv, true);
    if (c.help) return std::fputs(kNodesHelp, stdout), 0;
    if (!c.args.empty()) throw UsageError("unexpected argument '" + c.args[0] + "'");
    proto::NodesRep rep = expect<proto::NodesRep>(request(c.socket, proto::NodesReq{}));
    if (c.json) {
      Json out = Json::array();
      for (const auto& n : rep.nodes) out.push_back(node_json(n));
      std::printf("%s\n", json_text(out).c_str());
    } else {
      print_nodes(rep.nodes);
    }
    return 0;
  });
}

}  // namespace corral::cli
