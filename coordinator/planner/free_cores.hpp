// The fast path's free-core state: the cores snap.running holds, node by
// node, kept from pass to pass and brought up to date by the difference
// (compared position by position, so a caller that passes an unrelated
// snapshot only costs a full update). A pass's starts stay applied as
// provisional records, adopted by the next pass when they appear in running.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "coordinator/model.hpp"
#include "coordinator/planner/node_layout.hpp"
#include "coordinator/planner/node_sets.hpp"
#include "coordinator/planner/run_record.hpp"

namespace corral::planning {

class FreeCores {
 public:
  // A holder's release: (expected_end, on_up). Trivially copyable, so the
  // sorted vector's insert and erase move the tail with one memmove.
  struct FEnd {
    Time first;
    int second;
    friend bool operator<(const FEnd& a, const FEnd& b) { return a.first != b.first ? a.first < b.first : a.second < b.second; }
    friend bool operator==(const FEnd& a, const FEnd& b) { return a.first == b.first && a.second == b.second; }
  };
  static_assert(std::is_trivially_copyable_v<FEnd>);
  // A net change of the running set found by the last update.
  struct Change {
    JobId id;
    Time end;
    int on_up;
    bool holds;
  };

  explicit FreeCores(const NodeLayout& layout) : L(&layout) {}
  FreeCores(const FreeCores&) = delete;
  FreeCores& operator=(const FreeCores&) = delete;

  // Empty state for the layout (just rebuilt): the next update adds every
  // running job.
  void reset();
  // Brings the state up to s.running; `track`: list the net changes
  // (removed(), added()). False when a job holds cores without a placement
  // (the pass then needs the general path).
  bool update(const Snapshot& s, bool track);
  // Takes sl slots now for job `id`: its placement is appended to `buf`
  // (compact) or made in `buf` (empty), cores picked on s's nodes when
  // `pick`, consecutive nodes as ranges when `ranges`; the start is kept as
  // a provisional record.
  void take(std::vector<Placement>& buf, const Snapshot& s, JobId id, int sl, bool pick, bool ranges, bool compact);
  // End of a pass: its starts become the provisional records.
  void keep_starts() {
    prov_.insert(prov_.end(), pass_prov_.begin(), pass_prov_.end());
    pass_prov_.clear();
  }

  std::int64_t sum_free() const { return sum_free_; }   // free cores, node by node clamped
  std::int64_t used_now() const { return used_now_; }   // cores held now
  const std::vector<FEnd>& ends() const { return ends_; }  // sorted (expected_end, on_up) of holders
  const std::vector<Change>& removed() const { return removed_; }
  const std::vector<Change>& added() const { return added_; }

 private:
  const NodeLayout* L;

  // The records live in one arena (recs_, spare slots in spare_); the
  // mirror, the diff's pool and the provisional lists hold their indices, so
  // a record changes lists by a 4-byte copy instead of a ~110-byte swap.
  std::vector<RunRec> recs_;
  std::vector<std::uint32_t> spare_;
  std::uint32_t new_rec();  // may grow recs_: no RunRec& held across it
  std::vector<std::uint32_t> mirror_;  // arena index per position of running
  std::uint64_t version_ = 0;          // Snapshot::running_version mirror_ mirrors (0: none)
  std::size_t bad_ = 0;                // holding jobs without a placement (general path)
  std::vector<int> used_;              // per node: slots held (may exceed cores)
  std::vector<int> free_;              // per node: clamped free cores
  std::int64_t sum_free_ = 0, used_now_ = 0;
  // Single-core fast path of range_add: up nodes of capacity 1 as a
  // bitset, and how many nodes hold a count other than 0 or 1 (with none,
  // a node's free bit says its count exactly).
  std::vector<std::uint64_t> up1_;
  std::int64_t odd_ = 0;
  // fast1_: single-core nodes, every up node of capacity 1 (the fast path
  // may run). stale_: the fast path left used_ / free_ behind; with no
  // odd count they follow from the bits (free bit: count 0 and 1 free; an up
  // node without it: count 1; a down node: count 0), rebuilt by
  // materialize() before a per-node update reads them.
  bool fast1_ = false, stale_ = false;
  void materialize();
  static int is_odd(int u) { return static_cast<unsigned>(u) > 1u; }  // u < 0 || u > 1
  std::vector<std::uint16_t> core_;    // per core: holders
  NodeSets sets_;
  std::vector<FEnd> ends_;
  std::vector<Change> removed_, added_;  // net changes of the last diff
  // Whether the diff lists them: only conservative's reuse reads them.
  bool track_ = true;
  // Starts of the last pass stay applied to the node state (used_, free_,
  // sets_, core_) as provisional records: the caller usually runs them, and
  // the next diff adopts each one that appears in `running` as started (same
  // id, start, slots and placement) instead of releasing and re-taking its
  // nodes; the others are released by settle(). Both pools keep their spare
  // records past the count (no reallocation of a record's placement per start).
  std::vector<std::uint32_t> prov_, pass_prov_;  // kept across passes / this pass's starts
  std::vector<std::uint32_t> changed_;  // scratch: positions that differ
  std::vector<std::uint32_t> pool_;     // scratch: records of the removed entries

  void node_add(std::uint32_t n, int delta);
  void range_add(std::uint32_t n0, std::uint32_t k, int delta, bool check_up);
  bool word_flip(std::size_t wi, unsigned lo, unsigned len, int delta);
  bool flip1(std::uint32_t n0, std::uint32_t k, int delta);
  void apply(const RunRec& r, int sign);
  void apply_nodes(const RunRec& r, int sign);
  void apply_end(const RunRec& r, int sign);
  bool same(const RunRec& r, const RunningJob& rj, std::uint64_t version) const;
  bool adopt(std::uint32_t k, const RunningJob& rj);
  void settle();
  void diff(const Snapshot& s);
  int take1(std::vector<Placement>& out, int sl);
};

}  // namespace corral::planning
