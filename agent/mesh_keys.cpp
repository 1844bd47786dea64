#include "agent/mesh_keys.hpp"

#include <stdexcept>

namespace corral::agent {

MeshKeys load_mesh_keys(const MeshKeyFiles& f, const std::vector<std::string>& voters, const std::string& listen) {
  MeshKeys k;
  if (f.insecure) {
    if (!f.key.empty() || !f.allowed.empty())
      throw std::runtime_error("mesh_insecure = yes turns CURVE off, but mesh_key or mesh_allowed_keys is set: "
                               "give one or the other");
    return k;
  }
  if (f.key.empty() && f.allowed.empty())
    throw std::runtime_error("the mesh has no keys: set mesh_key and mesh_allowed_keys (corral keygen; "
                             "docs/mesh.md, \"Keys\"), or mesh_insecure = yes to let any host that reaches "
                             "the voters join");
  if (f.key.empty()) throw std::runtime_error("mesh_allowed_keys is set but mesh_key (this node's secret key) is not");
  if (f.allowed.empty()) throw std::runtime_error("mesh_key is set but mesh_allowed_keys (the keys let in) is not");
  k.curve = true;
  k.own = service::read_secret_key(f.key);
  service::AllowedKeys a = service::read_allowed_keys(f.allowed);
  k.allowed = a.keys;
  for (const std::string& v : voters)
    if (!a.by_address.count(v))
      throw std::runtime_error(f.allowed + ": no key for voter " + v + " (a line 'KEY " + v + "')");
  k.peer_keys = a.by_address;
  auto it = a.by_address.find(listen);
  if (it == a.by_address.end())
    throw std::runtime_error(f.allowed + ": no key for this node's listen address " + listen +
                             " (a line 'KEY " + listen + "'): the coordinator reaches a member there");
  if (it->second != k.own.public_key)
    throw std::runtime_error(f.key + ": its public key " + k.own.public_key + " is not the one " + f.allowed +
                             " gives for this node (" + listen + "): " + it->second);
  return k;
}

}  // namespace corral::agent
