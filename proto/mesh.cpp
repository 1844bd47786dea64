#include "proto/mesh.hpp"

#include "proto/envelope.hpp"

namespace corral::proto::mesh {
namespace {

constexpr KindNames<Entry> kKinds = {
    "job_accepted", "job_started", "job_ended",  "job_requeued",  "job_suspended",
    "node_admin",   "grant_set",   "charge",     "allocation_set", "job_held",
    "job_moved",    "job_ordered", "cancel_asked", "tasks_handed",
};

}  // namespace

std::string_view kind_name(const Entry& e) { return kKinds[e.index()]; }

std::string encode_entry(const Entry& e) { return encode_envelope(e, kMagic, kVersion, kKinds); }

Entry decode_entry(std::string_view bytes) {
  return decode_envelope<Entry>(bytes, kMagic, kVersion, kKinds, "mesh entry");
}

}  // namespace corral::proto::mesh
