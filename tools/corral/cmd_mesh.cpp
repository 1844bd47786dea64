// corral mesh: the mesh as the local corrald sees it (members, voters, the
// coordinator, its term, commit index, last contact with each member).
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "proto/spec_check.hpp"
#include "tools/corral/client.hpp"
#include "tools/corral/commands.hpp"

namespace corral::cli {
namespace {

const char* const kMeshHelp =
    "usage: corral mesh [--json] [--socket PATH]\n"
    "       corral mesh remove NODE [--json]\n"
    "       corral mesh promote NODE [--json]\n"
    "       corral mesh handover [NODE] [--json]\n"
    "The mesh as this node's corrald sees it: members, voters, the coordinator, its\n"
    "term, commit index and the last contact with each member. Standalone, a mesh of one.\n"
    "remove: NODE (a member that does not vote, drained and running nothing) leaves the\n"
    "mesh for good and is not let in again until `corral undrain NODE` (root or an operator).\n"
    "A voter is removed so too, and only while at least 3 voters stay, most of them up.\n"
    "promote: NODE (a member that is up) becomes a voter (root or an operator). A dead voter\n"
    "is replaced by promoting a member, then removing the dead voter.\n"
    "handover: the coordinator hands its role to NODE, a voter that is up (default: the\n"
    "voter most up to date), e.g. before its machine goes down (root or an operator);\n"
    "prints the node that took over.\n";

using Json = nlohmann::ordered_json;

std::string mesh_json(const proto::MeshStatus& s) {
  Json o;
  o["mesh"] = s.mesh;
  o["node"] = s.node;
  o["id"] = s.id;
  o["address"] = s.address;
  o["state"] = s.state;
  o["coordinator"] = s.coordinator;
  o["coordinator_id"] = s.coordinator_id;
  o["term"] = s.term;
  o["commit_index"] = s.commit_index;
  o["last_applied"] = s.last_applied;
  o["voters"] = s.voters;
  o["jobs"] = s.jobs;
  o["members"] = Json::array();
  for (const proto::MeshMember& m : s.members)
    o["members"].push_back(Json{{"id", m.id},
                                {"name", m.name},
                                {"address", m.address},
                                {"role", m.role},
                                {"state", m.state},
                                {"term", m.term},
                                {"commit_index", m.commit_index},
                                {"last_contact_ms", m.last_contact_ms},
                                {"snapshots_asked", m.snapshots_asked}});
  return o.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string contact_text(std::int64_t ms) {
  if (ms < 0) return "never";
  if (ms == 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.2f s ago", static_cast<double>(ms) / 1000);
  return b;
}

void print_mesh(const proto::MeshStatus& s) {
  if (s.state == "standalone") {
    std::printf("mesh         none: %s is standalone (a mesh of one, its own coordinator)\n", s.node.c_str());
    return;
  }
  std::printf("mesh         %s (%zu voters)\n", s.mesh.c_str(), s.voters.size());
  std::printf("node         %s (member %llu, %s), %s\n", proto::printable(s.node).c_str(),
              static_cast<unsigned long long>(s.id), s.address.c_str(), s.state.c_str());
  std::printf("coordinator  %s\n", s.coordinator.empty() ? "none known (an election is under way)"
                                                         : proto::printable(s.coordinator).c_str());
  std::printf("term         %llu\n", static_cast<unsigned long long>(s.term));
  std::printf("commit       index %llu, applied %llu; %llu jobs replicated\n",
              static_cast<unsigned long long>(s.commit_index), static_cast<unsigned long long>(s.last_applied),
              static_cast<unsigned long long>(s.jobs));
  std::printf("\n  %-3s %-16s %-22s %-8s %-11s %6s %8s  %s\n", "ID", "NAME", "ADDRESS", "ROLE", "STATE",
              "TERM", "COMMIT", "LAST CONTACT");
  for (const proto::MeshMember& m : s.members)
    std::printf("  %-3llu %-16.16s %-22.22s %-8s %-11s %6llu %8llu  %s\n", static_cast<unsigned long long>(m.id),
                m.name.empty() ? "?" : proto::printable(m.name).c_str(), m.address.c_str(), m.role.c_str(),
                m.state.empty() ? "?" : m.state.c_str(), static_cast<unsigned long long>(m.term),
                static_cast<unsigned long long>(m.commit_index), contact_text(m.last_contact_ms).c_str());
}

}  // namespace

int cmd_mesh(int argc, char** argv) {
  try {
    Common c = parse_common("mesh", argc, argv, true);
    if (c.help) {
      std::fputs(kMeshHelp, stdout);
      return 0;
    }
    namespace na = proto::node_action;
    const std::string act = c.args.empty() ? "" : c.args[0];
    const bool handover = act == na::kHandover, named = act == na::kRemove || act == na::kPromote;
    if (handover && c.args.size() > 2) throw UsageError("give at most one node name (corral mesh handover [NODE])");
    if (named && (c.args.size() != 2 || c.args[1].empty()))
      throw UsageError("give one node name (corral mesh " + act + " NODE)");
    if (handover || named) {
      proto::Message r = request(c.socket, proto::NodeAdminReq{c.args.size() > 1 ? c.args[1] : "", c.args[0], ""});
      if (auto* e = std::get_if<proto::ErrorRep>(&r)) throw std::runtime_error(e->message);
      auto* rep = std::get_if<proto::NodeAdminRep>(&r);
      if (!rep) throw std::runtime_error("unexpected reply '" + std::string(proto::type_name(r)) + "' from corrald");
      if (c.json) std::printf("%s\n", Json{{"node", rep->node}, {"state", rep->state}}.dump().c_str());
      else std::printf("%s %s\n", proto::printable(rep->node).c_str(), rep->state.c_str());
      return 0;
    }
    if (!c.args.empty()) throw UsageError("unexpected argument '" + c.args[0] + "'");
    proto::Message m = request(c.socket, proto::MeshReq{});
    if (auto* e = std::get_if<proto::ErrorRep>(&m)) throw std::runtime_error(e->message);
    auto* rep = std::get_if<proto::MeshRep>(&m);
    if (!rep) throw std::runtime_error("unexpected reply '" + std::string(proto::type_name(m)) + "' from corrald");
    if (c.json) std::printf("%s\n", mesh_json(rep->mesh).c_str());
    else print_mesh(rep->mesh);
    return 0;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "corral mesh: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corral mesh: %s\n", e.what());
    return 1;
  }
}

}  // namespace corral::cli
