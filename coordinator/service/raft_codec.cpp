#include "coordinator/service/raft_codec.hpp"

#include <cstring>
#include <stdexcept>

#include <msgpack.hpp>

namespace corral::service {
namespace {

constexpr std::string_view kWireMagic = "corral-raft";
constexpr std::uint32_t kWireVersion = 1;

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_bin(Packer& pk, const void* p, std::size_t n) {
  pk.pack_bin(static_cast<std::uint32_t>(n));
  pk.pack_bin_body(static_cast<const char*>(p), static_cast<std::uint32_t>(n));
}

void pack_conf(Packer& pk, const raft_configuration& c) {
  pk.pack_array(c.n);
  for (unsigned i = 0; i < c.n; ++i) {
    pk.pack_array(3);
    pk.pack(c.servers[i].id);
    pk.pack(std::string_view(c.servers[i].address));
    pk.pack(c.servers[i].role);
  }
}

void pack_body(Packer& pk, const raft_message& m) {
  switch (m.type) {
    case RAFT_IO_APPEND_ENTRIES: {
      const auto& a = m.append_entries;
      pk.pack_array(5);
      pk.pack(a.term);
      pk.pack(a.prev_log_index);
      pk.pack(a.prev_log_term);
      pk.pack(a.leader_commit);
      pk.pack_array(a.n_entries);
      for (unsigned i = 0; i < a.n_entries; ++i) {
        pk.pack_array(3);
        pk.pack(a.entries[i].term);
        pk.pack(a.entries[i].type);
        pack_bin(pk, a.entries[i].buf.base, a.entries[i].buf.len);
      }
      return;
    }
    case RAFT_IO_APPEND_ENTRIES_RESULT: {
      const auto& r = m.append_entries_result;
      pk.pack_array(3);
      pk.pack(r.term);
      pk.pack(r.rejected);
      pk.pack(r.last_log_index);
      return;
    }
    case RAFT_IO_REQUEST_VOTE: {
      const auto& v = m.request_vote;
      pk.pack_array(6);
      pk.pack(v.term);
      pk.pack(v.candidate_id);
      pk.pack(v.last_log_index);
      pk.pack(v.last_log_term);
      pk.pack(v.disrupt_leader);
      pk.pack(v.pre_vote);
      return;
    }
    case RAFT_IO_REQUEST_VOTE_RESULT: {
      const auto& v = m.request_vote_result;
      pk.pack_array(3);
      pk.pack(v.term);
      pk.pack(v.vote_granted);
      pk.pack(static_cast<int>(v.pre_vote));
      return;
    }
    case RAFT_IO_INSTALL_SNAPSHOT: {
      const auto& s = m.install_snapshot;
      pk.pack_array(6);
      pk.pack(s.term);
      pk.pack(s.last_index);
      pk.pack(s.last_term);
      pack_conf(pk, s.conf);
      pk.pack(s.conf_index);
      pack_bin(pk, s.data.base, s.data.len);
      return;
    }
    case RAFT_IO_TIMEOUT_NOW: {
      const auto& t = m.timeout_now;
      pk.pack_array(3);
      pk.pack(t.term);
      pk.pack(t.last_log_index);
      pk.pack(t.last_log_term);
      return;
    }
  }
  throw std::invalid_argument("unknown raft message type");
}

// Array `o` of exactly `n` elements, or throws.
const msgpack::object* fields(const msgpack::object& o, std::uint32_t n) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size != n)
    throw std::runtime_error("bad raft message shape");
  return o.via.array.ptr;
}

std::string_view bin_of(const msgpack::object& o) {
  if (o.type != msgpack::type::BIN) throw std::runtime_error("expected binary");
  return {o.via.bin.ptr, o.via.bin.size};
}

// Copies `data` into memory raft will own (never a null base).
void* raft_copy(std::string_view data) {
  void* p = raft_malloc(data.empty() ? 1 : data.size());
  if (p == nullptr) throw std::bad_alloc();
  if (!data.empty()) std::memcpy(p, data.data(), data.size());
  return p;
}

void unpack_entries(const msgpack::object& o, raft_append_entries& a) {
  if (o.type != msgpack::type::ARRAY) throw std::runtime_error("entries: expected an array");
  unsigned n = o.via.array.size;
  a.n_entries = n;
  a.entries = nullptr;
  if (n == 0) return;
  // Every field checked before anything is allocated: a bad entry frees nothing.
  std::size_t total = 0;
  for (unsigned i = 0; i < n; ++i) {
    const msgpack::object* f = fields(o.via.array.ptr[i], 3);
    (void)f[0].as<raft_term>();
    (void)f[1].as<unsigned short>();
    total += bin_of(f[2]).size();
  }
  // One batch holds every entry's data, as raft expects of received entries.
  auto* batch = static_cast<char*>(raft_malloc(total == 0 ? 1 : total));
  auto* entries = static_cast<raft_entry*>(raft_calloc(n, sizeof(raft_entry)));
  if (batch == nullptr || entries == nullptr) {
    raft_free(batch);
    raft_free(entries);
    throw std::bad_alloc();
  }
  std::size_t off = 0;
  for (unsigned i = 0; i < n; ++i) {
    const msgpack::object* f = fields(o.via.array.ptr[i], 3);
    std::string_view data = bin_of(f[2]);
    entries[i].term = f[0].as<raft_term>();
    entries[i].type = f[1].as<unsigned short>();
    entries[i].buf.base = batch + off;
    entries[i].buf.len = data.size();
    entries[i].batch = batch;
    if (!data.empty()) std::memcpy(batch + off, data.data(), data.size());
    off += data.size();
  }
  a.entries = entries;
}

void unpack_conf(const msgpack::object& o, raft_configuration& c) {
  if (o.type != msgpack::type::ARRAY) throw std::runtime_error("conf: expected an array");
  std::vector<Member> ms;
  for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
    const msgpack::object* f = fields(o.via.array.ptr[i], 3);
    ms.push_back(Member{f[0].as<std::uint64_t>(), f[1].as<std::string>(), role_of(f[2].as<int>())});
  }
  if (configuration_of(ms, c) != 0) throw std::runtime_error("bad configuration");
}

// Fills the body of `m` (type already set); allocations are released if it throws.
void unpack_body(const msgpack::object& o, raft_message& m) {
  switch (m.type) {
    case RAFT_IO_APPEND_ENTRIES: {
      const msgpack::object* f = fields(o, 5);
      auto& a = m.append_entries;
      a.term = f[0].as<raft_term>();
      a.prev_log_index = f[1].as<raft_index>();
      a.prev_log_term = f[2].as<raft_term>();
      a.leader_commit = f[3].as<raft_index>();
      unpack_entries(f[4], a);
      return;
    }
    case RAFT_IO_APPEND_ENTRIES_RESULT: {
      const msgpack::object* f = fields(o, 3);
      m.append_entries_result = {f[0].as<raft_term>(), f[1].as<raft_index>(), f[2].as<raft_index>()};
      return;
    }
    case RAFT_IO_REQUEST_VOTE: {
      const msgpack::object* f = fields(o, 6);
      m.request_vote = {f[0].as<raft_term>(), f[1].as<raft_id>(),   f[2].as<raft_index>(),
                        f[3].as<raft_index>(), f[4].as<bool>(), f[5].as<bool>()};
      return;
    }
    case RAFT_IO_REQUEST_VOTE_RESULT: {
      const msgpack::object* f = fields(o, 3);
      int pv = f[2].as<int>();
      if (pv < raft_tribool_unknown || pv > raft_tribool_false)
        throw std::runtime_error("bad pre_vote");
      m.request_vote_result = {f[0].as<raft_term>(), f[1].as<bool>(), static_cast<raft_tribool>(pv)};
      return;
    }
    case RAFT_IO_INSTALL_SNAPSHOT: {
      const msgpack::object* f = fields(o, 6);
      auto& s = m.install_snapshot;
      s.term = f[0].as<raft_term>();
      s.last_index = f[1].as<raft_index>();
      s.last_term = f[2].as<raft_term>();
      s.conf_index = f[4].as<raft_index>();
      std::string_view data = bin_of(f[5]);
      unpack_conf(f[3], s.conf);
      try {
        s.data.base = raft_copy(data);
      } catch (...) {
        raft_configuration_close(&s.conf);
        throw;
      }
      s.data.len = data.size();
      return;
    }
    case RAFT_IO_TIMEOUT_NOW: {
      const msgpack::object* f = fields(o, 3);
      m.timeout_now = {f[0].as<raft_term>(), f[1].as<raft_index>(), f[2].as<raft_index>()};
      return;
    }
  }
  throw std::runtime_error("unknown raft message type");
}

}  // namespace

std::string encode_raft_message(std::uint64_t from, std::string_view from_address,
                                const raft_message& m) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_array(6);
  pk.pack(kWireMagic);
  pk.pack(kWireVersion);
  pk.pack(from);
  pk.pack(from_address);
  pk.pack(m.type);
  pack_body(pk, m);
  return std::string(buf.data(), buf.size());
}

bool decode_raft_message(std::string_view bytes, raft_message& m, std::string& address) {
  try {
    std::size_t cap = bytes.size();
    msgpack::unpack_limit limit(cap, cap, cap, cap, cap, 8);
    auto oh = msgpack::unpack(bytes.data(), bytes.size(), nullptr, nullptr, limit);
    const msgpack::object* f = fields(oh.get(), 6);
    if (f[0].type != msgpack::type::STR || f[0].as<std::string_view>() != kWireMagic) return false;
    if (f[1].as<std::uint32_t>() != kWireVersion) return false;
    m = raft_message{};
    m.server_id = f[2].as<raft_id>();
    address = f[3].as<std::string>();
    m.server_address = address.c_str();
    m.type = f[4].as<unsigned short>();
    unpack_body(f[5], m);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::vector<Member> members_of(const raft_configuration& c) {
  std::vector<Member> out;
  for (unsigned i = 0; i < c.n; ++i)
    out.push_back(Member{c.servers[i].id, c.servers[i].address, role_of(c.servers[i].role)});
  return out;
}

int configuration_of(const std::vector<Member>& members, raft_configuration& c) {
  raft_configuration_init(&c);
  for (const auto& mb : members) {
    int rv = raft_configuration_add(&c, mb.id, mb.address.c_str(), raft_role(mb.role));
    if (rv != 0) {
      raft_configuration_close(&c);
      return rv;
    }
  }
  return 0;
}

int raft_role(Role r) {
  switch (r) {
    case Role::voter: return RAFT_VOTER;
    case Role::standby: return RAFT_STANDBY;
    case Role::spare: return RAFT_SPARE;
  }
  return RAFT_SPARE;
}

Role role_of(int raft_role) {
  if (raft_role == RAFT_VOTER) return Role::voter;
  if (raft_role == RAFT_STANDBY) return Role::standby;
  return Role::spare;
}

}  // namespace corral::service
