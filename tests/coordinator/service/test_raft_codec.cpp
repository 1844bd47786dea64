// Raft's RPCs as bytes: every field survives, garbage is refused.
#include <catch2/catch.hpp>

#include <cstring>

#include <msgpack.hpp>

#include "coordinator/service/raft_codec.hpp"

using namespace corral::service;

TEST_CASE("raft messages round-trip through bytes", "[raft_codec]") {
  char a[] = "first", b[] = "second entry";
  raft_entry entries[2] = {};
  entries[0] = raft_entry{3, RAFT_COMMAND, raft_buffer{a, 5}, nullptr};
  entries[1] = raft_entry{4, RAFT_BARRIER, raft_buffer{b, 12}, nullptr};
  raft_message m{};
  m.type = RAFT_IO_APPEND_ENTRIES;
  m.server_id = 2;
  m.append_entries = raft_append_entries{4, 10, 3, 9, entries, 2};
  std::string bytes = encode_raft_message(7, "tcp://127.0.0.1:5555", m);

  raft_message out{};
  std::string address;
  REQUIRE(decode_raft_message(bytes, out, address));
  CHECK(out.type == RAFT_IO_APPEND_ENTRIES);
  CHECK(out.server_id == 7);  // the sender
  CHECK(std::string(out.server_address) == "tcp://127.0.0.1:5555");
  const raft_append_entries& ae = out.append_entries;
  CHECK(ae.term == 4);
  CHECK(ae.prev_log_index == 10);
  CHECK(ae.prev_log_term == 3);
  CHECK(ae.leader_commit == 9);
  REQUIRE(ae.n_entries == 2);
  CHECK(ae.entries[1].term == 4);
  CHECK(ae.entries[1].type == RAFT_BARRIER);
  CHECK(std::string(static_cast<char*>(ae.entries[1].buf.base), ae.entries[1].buf.len) == "second entry");
  CHECK(ae.entries[0].batch == ae.entries[1].batch);  // one batch, as raft frees it
  raft_free(ae.entries[0].batch);
  raft_free(ae.entries);

  raft_message s{};
  s.type = RAFT_IO_INSTALL_SNAPSHOT;
  REQUIRE(configuration_of({{1, "n1", Role::voter}, {2, "n2", Role::standby}}, s.install_snapshot.conf) == 0);
  char data[] = "state";
  s.install_snapshot.term = 5;
  s.install_snapshot.last_index = 40;
  s.install_snapshot.last_term = 5;
  s.install_snapshot.conf_index = 1;
  s.install_snapshot.data = raft_buffer{data, 5};
  bytes = encode_raft_message(1, "n1", s);
  raft_configuration_close(&s.install_snapshot.conf);
  REQUIRE(decode_raft_message(bytes, out, address));
  CHECK(out.install_snapshot.last_index == 40);
  std::vector<Member> ms = members_of(out.install_snapshot.conf);
  REQUIRE(ms.size() == 2);
  CHECK(ms[1].address == "n2");
  CHECK(ms[1].role == Role::standby);
  CHECK(std::memcmp(out.install_snapshot.data.base, "state", 5) == 0);
  raft_configuration_close(&out.install_snapshot.conf);
  raft_free(out.install_snapshot.data.base);
}

TEST_CASE("bytes that are not a raft message are refused", "[raft_codec]") {
  raft_message out{};
  std::string address;
  CHECK_FALSE(decode_raft_message("", out, address));
  CHECK_FALSE(decode_raft_message("not msgpack at all", out, address));
  raft_message m{};
  m.type = RAFT_IO_REQUEST_VOTE;
  m.request_vote = raft_request_vote{2, 1, 5, 1, false, true};
  std::string bytes = encode_raft_message(1, "n1", m);
  REQUIRE(decode_raft_message(bytes, out, address));
  CHECK(out.request_vote.pre_vote);
  CHECK(out.request_vote.last_log_index == 5);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut)
    CHECK_FALSE(decode_raft_message(std::string_view(bytes).substr(0, cut), out, address));
  // A well-formed envelope of an unknown message type, and another version.
  for (auto [version, type] : {std::pair<int, int>{1, 99}, std::pair<int, int>{2, RAFT_IO_REQUEST_VOTE}}) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_array(6);
    pk.pack(std::string_view("corral-raft"));
    pk.pack(version);
    pk.pack(1);
    pk.pack(std::string_view("n1"));
    pk.pack(type);
    pk.pack_array(6);
    for (int i = 0; i < 6; ++i) pk.pack(1);
    CHECK_FALSE(decode_raft_message(std::string_view(buf.data(), buf.size()), out, address));
  }
}
