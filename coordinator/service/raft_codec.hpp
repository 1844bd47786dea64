// Raft's RPC messages as bytes, so they can travel over any transport of ours
// (the simulated network, ZeroMQ). MessagePack: ["corral-raft", version,
// sender id, sender address, type, fields...].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/service/consensus.hpp"
#include "coordinator/service/raft_c.hpp"

namespace corral::service {

std::string encode_raft_message(std::uint64_t from, std::string_view from_address,
                                const raft_message& m);

// Fills `m` (server_id / server_address: the sender; address points into
// `address`). Entry and snapshot memory is allocated with raft_malloc and
// belongs to raft once the message is handed to it. Returns false, with
// nothing allocated, on bytes that are not such a message.
bool decode_raft_message(std::string_view bytes, raft_message& m, std::string& address);

// raft_configuration <-> members.
std::vector<Member> members_of(const raft_configuration& c);
// Returns 0 or a RAFT_ error code.
int configuration_of(const std::vector<Member>& members, raft_configuration& c);

int raft_role(Role r);
Role role_of(int raft_role);

}  // namespace corral::service
