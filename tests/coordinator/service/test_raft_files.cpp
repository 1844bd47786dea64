// A member's raft state in files: a member restarted as new objects from the
// files has its log, snapshot, term and vote; a torn tail is cut off; damage
// anywhere else is refused with the file and the byte offset.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "coordinator/service/mesh_machine.hpp"
#include "coordinator/service/raft_files.hpp"
#include "coordinator/service/raft_node.hpp"
#include "coordinator/service/sim_env.hpp"

using namespace corral::service;
namespace mesh = corral::proto::mesh;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/corral_raft_files_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
}

std::string accept_entry(int n) {
  mesh::JobAccepted a;
  a.spec.name = "job" + std::to_string(n);
  a.user = "u";
  a.token = "t" + std::to_string(n);
  return mesh::encode_entry(a);
}

// One member that is a mesh of its own, on its files: what a process holds.
struct Member1 {
  SimNet& net;
  RaftFiles files;
  RaftDisk disk;
  MeshMachine fsm;
  std::unique_ptr<RaftNode> node;

  Member1(SimNet& n, const fs::path& dir, const RaftOptions& opt = {})
      : net(n), files(dir.string()), disk(files.load()) {
    node = std::make_unique<RaftNode>(1, "n1", net.env(1), disk, fsm, opt);
  }
  void start(bool fresh) {
    if (fresh) REQUIRE(node->bootstrap({Member{1, "n1", Role::voter}}) == 0);
    REQUIRE(node->start() == 0);
    REQUIRE(net.run_until([&] { return node->is_leader(); }, 5000));
    bool ready = false;
    node->barrier([&](Status s) { ready = s == Status::ok; });
    REQUIRE(net.run_until([&] { return ready; }, 5000));
  }
  std::vector<std::uint64_t> submit(int from, int to) {
    std::vector<std::uint64_t> ids;
    for (int i = from; i < to; ++i)
      node->propose(accept_entry(i), [&](const Proposed& p) {
        REQUIRE(p.status == Status::ok);
        ids.push_back(p.applied.value);
      });
    REQUIRE(net.run_until([&] { return ids.size() == static_cast<std::size_t>(to - from); }, 10000));
    return ids;
  }
};

}  // namespace

TEST_CASE("raft files: a member restarted from its files has its log, snapshot and term",
          "[raft_files]") {
  TempDir tmp;
  RaftOptions opt;
  opt.snapshot_threshold = 16;  // a snapshot and a rewritten log within 40 entries
  opt.snapshot_trailing = 4;
  SimNet net(7);
  std::uint64_t term = 0, last = 0;
  {
    Member1 m(net, tmp.path, opt);
    m.start(true);
    auto ids = m.submit(0, 40);
    CHECK(ids.back() == 40);
    REQUIRE(net.run_until([&] { return m.disk.snapshot.has_value(); }, 1000));
    term = m.node->term();
    last = m.node->last_applied();
  }  // the member's objects are gone; only the files remain
  RaftFiles files(tmp.path.string());
  RaftDisk d = files.load();
  CHECK(files.warning().empty());
  CHECK(d.term == term);
  REQUIRE(d.snapshot.has_value());
  CHECK(d.snapshot->index >= 16);
  CHECK(d.snapshot->conf.size() == 1);
  CHECK(d.first_index <= d.snapshot->index);  // the trailing entries stay behind the snapshot
  CHECK(d.first_index + d.entries.size() - 1 == last);

  Member1 again(net, tmp.path, opt);
  again.start(false);
  CHECK(again.node->term() >= term);
  CHECK(again.fsm.state().data().jobs.size() == 40);
  CHECK(again.submit(40, 41).front() == 41);  // the id counter came back too
}

TEST_CASE("raft files: a torn tail is cut off and the log goes on", "[raft_files]") {
  TempDir tmp;
  SimNet net(8);
  {
    Member1 m(net, tmp.path);
    m.start(true);
    m.submit(0, 5);
  }
  fs::path log = tmp.path / "log";
  std::string whole = read(log);
  write(log, whole.substr(0, whole.size() - 7));  // the last append, cut short

  std::size_t entries = 0;
  {
    RaftFiles files(tmp.path.string());
    RaftDisk d = files.load();
    CHECK(files.warning().find("torn tail") != std::string::npos);
    CHECK(files.warning().find(log.string()) != std::string::npos);
    entries = d.entries.size();
  }
  CHECK(fs::file_size(log) < whole.size() - 7);  // cut at the last whole record
  Member1 m(net, tmp.path);
  m.start(false);
  // The record cut off was the fifth job's (as if its write never finished):
  // the four before it are there and the log grows on from the cut.
  CHECK(m.fsm.state().data().jobs.size() == 4);
  CHECK(m.submit(5, 6).front() == 5);
  RaftFiles check(tmp.path.string());
  CHECK(check.load().entries.size() > entries);
  CHECK(check.warning().empty());
}

TEST_CASE("raft files: damage before the end is refused with the file and offset",
          "[raft_files]") {
  TempDir tmp;
  SimNet net(9);
  {
    Member1 m(net, tmp.path);
    m.start(true);
    m.submit(0, 10);
  }
  fs::path log = tmp.path / "log";
  std::string bytes = read(log);
  // The third entry's record: after the start record and two entries.
  std::size_t at = 0;
  for (int r = 0; r < 3; ++r) {
    std::size_t len = (std::size_t{static_cast<unsigned char>(bytes[at])} << 24) |
                      (std::size_t{static_cast<unsigned char>(bytes[at + 1])} << 16) |
                      (std::size_t{static_cast<unsigned char>(bytes[at + 2])} << 8) |
                      std::size_t{static_cast<unsigned char>(bytes[at + 3])};
    at += 8 + len;
  }
  std::string damaged = bytes;
  damaged[at + 10] = static_cast<char>(damaged[at + 10] ^ 0x5a);
  write(log, damaged);
  RaftFiles files(tmp.path.string());
  try {
    files.load();
    FAIL("damaged log loaded");
  } catch (const std::runtime_error& e) {
    std::string msg = e.what();
    CHECK(msg.find(log.string()) != std::string::npos);
    CHECK(msg.find("byte offset " + std::to_string(at)) != std::string::npos);
  }
  CHECK(read(log) == damaged);  // left as it was

  // A damaged term file is refused too.
  write(log, bytes);
  std::string term = read(tmp.path / "term");
  term[term.size() - 1] = static_cast<char>(term.back() ^ 1);
  write(tmp.path / "term", term);
  RaftFiles again(tmp.path.string());
  CHECK_THROWS_WITH(again.load(), Catch::Contains((tmp.path / "term").string()) &&
                                      Catch::Contains("byte offset 0"));
}

TEST_CASE("raft files: a log not yet rewritten after an installed snapshot is cut back to it",
          "[raft_files]") {
  TempDir tmp;
  std::string old_log;
  {
    RaftFiles f(tmp.path.string());
    f.load();
    f.save_term(3, 2);
    std::deque<DiskEntry> es;
    for (int i = 0; i < 10; ++i) es.push_back(DiskEntry{1, 1, "e" + std::to_string(i)});
    f.append(1, es);
    old_log = read(tmp.path / "log");
    // The leader's snapshot of entry 12 in term 2: entries 1..10 of term 1 do
    // not lead up to it.
    f.put_snapshot(DiskSnapshot{12, 2, {Member{1, "n1", Role::voter}}, 1, "state"}, 0);
  }
  write(tmp.path / "log", old_log);  // as if the crash came before the log's rewrite
  RaftFiles f(tmp.path.string());
  RaftDisk d = f.load();
  CHECK(d.term == 3);
  CHECK(d.vote == 2);
  REQUIRE(d.snapshot.has_value());
  CHECK(d.snapshot->data == "state");
  CHECK(d.entries.empty());
  CHECK(d.first_index == 13);
  // Appends go on after the snapshot, and a later load agrees.
  f.append(13, {DiskEntry{3, 1, "x"}});
  RaftFiles g(tmp.path.string());
  RaftDisk e = g.load();
  REQUIRE(e.entries.size() == 1);
  CHECK(e.first_index == 13);
  CHECK(e.entries[0].data == "x");
  CHECK_THROWS_WITH(g.append(15, {DiskEntry{3, 1, "y"}}), Catch::Contains("where 14 belongs"));
}
