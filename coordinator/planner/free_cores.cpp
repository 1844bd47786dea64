// See free_cores.hpp.
#include "coordinator/planner/free_cores.hpp"

#include <span>

namespace corral::planning {

void FreeCores::reset() {
  const std::size_t nn = L->nn;
  mirror_.clear();
  recs_.clear();
  spare_.clear();
  prov_.clear();
  pass_prov_.clear();
  version_ = 0;
  bad_ = 0;
  used_.assign(nn, 0);
  free_ = L->cap;
  odd_ = 0;
  stale_ = false;
  fast1_ = L->maxc == 1;
  up1_.assign((nn + 63) / 64, 0);
  for (std::size_t n = 0; n < nn; ++n)
    if (L->up[n]) {
      if (L->cap[n] == 1) up1_[n / 64] |= std::uint64_t{1} << (n % 64);
      else fast1_ = false;  // an up node with no core: counted per node
    }
  sum_free_ = L->total;
  used_now_ = 0;
  core_.assign(L->coff[nn], 0);
  sets_.init(nn, L->maxc);
  for (std::size_t n = 0; n < nn; ++n) sets_.insert(static_cast<std::uint32_t>(n), free_[n]);
  ends_.clear();
}

bool FreeCores::update(const Snapshot& s, bool track) {
  track_ = track;
  // Snapshot::running_version: the same nonzero value promises an unchanged
  // running set, so the entry-by-entry diff is skipped (nothing changed).
  if (s.running_version != 0 && s.running_version == version_ && mirror_.size() == s.running.size()) {
    removed_.clear();
    added_.clear();
  } else {
    diff(s);
  }
  settle();  // provisional starts not found in running
  version_ = s.running_version;
  return bad_ == 0;
}

void FreeCores::take(std::vector<Placement>& buf, const Snapshot& s, JobId id, int sl, bool pick, bool ranges,
                     bool compact) {
  const std::size_t first = buf.size();
  int on_up = 0;
  // Single-core nodes, node ranges, no odd count: placed and taken in one
  // walk down the free bits (take1), the same nodes place_into picks.
  const bool one_walk = ranges && fast1_ && odd_ == 0;
  if (one_walk) on_up = take1(buf, sl);
  else if (compact) sets_.place_into(buf, sl, L->nn, ranges);
  else buf = sets_.place(sl, L->nn, ranges);
  const std::span<Placement> pl(buf.data() + first, buf.size() - first);
  if (!one_walk)
    for (Placement& p : pl) {
      if (pick) {
        std::uint16_t* used = core_.data() + L->coff[p.node];
        p.cores = pick_cores(s.nodes[p.node], used, static_cast<int>(p.slots));
      }
      if (p.count == 1) node_add(p.node, static_cast<int>(p.slots));
      else range_add(p.node, p.count, static_cast<int>(p.slots), false);
      on_up += static_cast<int>(p.slots * p.count);  // sets_ holds up nodes only
    }
  // Its provisional record (see prov_).
  pass_prov_.push_back(new_rec());
  RunRec& r = recs_[pass_prov_.back()];
  r.id = id;
  r.start = s.now;
  r.end = 0;  // set from running when adopted
  r.slots = sl;
  r.on_up = on_up;
  r.suspended = r.backfilled = false;
  r.holds = true;
  r.set(pl.data(), pl.data() + pl.size());
}

std::uint32_t FreeCores::new_rec() {
  if (!spare_.empty()) {
    const std::uint32_t i = spare_.back();
    spare_.pop_back();
    return i;
  }
  recs_.emplace_back();
  return static_cast<std::uint32_t>(recs_.size() - 1);
}

void FreeCores::materialize() {
  stale_ = false;
  const std::uint64_t* w = sets_.bits.data() + sets_.nw;
  for (std::size_t n = 0; n < L->nn; ++n) {
    const bool fb = (w[n / 64] >> (n % 64)) & 1;
    const bool ub = (up1_[n / 64] >> (n % 64)) & 1;
    free_[n] = fb ? 1 : 0;
    used_[n] = ub && !fb ? 1 : 0;
  }
}

void FreeCores::node_add(std::uint32_t n, int delta) {
  if (fast1_) {  // the word path (it counts per node when it must)
    range_add(n, 1, delta, false);
    return;
  }
  const int old = free_[n];
  const int u0 = used_[n];
  used_[n] += delta;
  odd_ += is_odd(used_[n]) - is_odd(u0);
  const int nf = std::clamp(L->cap[n] - used_[n], 0, L->cap[n]);
  if (nf == old) return;
  sets_.erase(n, old);
  sets_.insert(n, nf);
  free_[n] = nf;
  sum_free_ += nf - old;
}

// node_add for nodes n0 .. n0 + k - 1 (up ones only when check_up). On
// single-core nodes only the set of free count 1 exists: its bits change
// a word at a time.
void FreeCores::range_add(std::uint32_t n0, std::uint32_t k, int delta, bool check_up) {
  const std::uint64_t end = std::min<std::uint64_t>(L->nn, std::uint64_t{n0} + k);
  if (sets_.maxc != 1) {
    for (std::uint64_t n = n0; n < end; ++n)
      if (!check_up || L->up[n]) node_add(static_cast<std::uint32_t>(n), delta);
    return;
  }
  std::uint64_t* w = sets_.bits.data() + sets_.nw;  // the bitset of free count 1
  int* used = used_.data();
  int* fr1 = free_.data();
  const int* cap = L->cap.data();
  const std::uint8_t* up = L->up.data();
  std::int64_t dsum = 0;
  for (std::uint64_t n = n0; n < end;) {
    // One word of the bitset at a time.
    const std::uint64_t wend = std::min(end, (n / 64 + 1) * 64);
    std::uint64_t& word = w[n / 64];
    // With no odd count anywhere, a start on nodes all free (count 0) or
    // an end on up nodes all taken (count 1) changes every node alike:
    // the word at once (the per-node counts are rebuilt when next read).
    if (fast1_ && odd_ == 0 && (delta == 1 || delta == -1)) {
      const auto len = static_cast<unsigned>(wend - n);
      if (word_flip(n / 64, static_cast<unsigned>(n % 64), len, delta)) {
        dsum -= delta * static_cast<std::int64_t>(len);
        n = wend;
        continue;
      }
    }
    if (stale_) materialize();
    std::uint64_t set = 0, clr = 0;
    std::int64_t dodd = 0;  // local: used[] stores would alias a member
    for (; n < wend; ++n) {
      if (check_up && !up[n]) continue;
      const int old = fr1[n];
      const int u0 = used[n];
      const int u = used[n] += delta;
      dodd += is_odd(u) - is_odd(u0);
      const int nf = cap[n] > 0 && u <= 0 ? 1 : 0;  // clamp(cap - u, 0, cap) with cap <= 1
      if (nf == old) continue;
      fr1[n] = nf;
      dsum += nf - old;
      (nf ? set : clr) |= std::uint64_t{1} << (n % 64);
    }
    word = (word & ~clr) | set;
    odd_ += dodd;
  }
  sum_free_ += dsum;
  sets_.count[1] = static_cast<std::uint32_t>(static_cast<std::int64_t>(sets_.count[1]) + dsum);
}

// The word path of range_add and flip1 (with fast1_, no odd count and
// delta +-1): nodes lo .. lo + len - 1 of word wi, a start on nodes all
// free (count 0) or an end on up nodes all taken (count 1), change alike,
// so their free bits flip at once and the per-node counts are left behind
// (stale_, rebuilt when next read). False (nothing changed) otherwise.
bool FreeCores::word_flip(std::size_t wi, unsigned lo, unsigned len, int delta) {
  const std::uint64_t mask = (len == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << len) - 1)) << lo;
  // want: the free bits a start needs (all set) or an end needs (all
  // clear, and the nodes up): computed without a branch on delta.
  const std::uint64_t want = mask & (std::uint64_t{0} - static_cast<std::uint64_t>(delta == 1));
  std::uint64_t& word = sets_.bits[sets_.nw + wi];
  if ((((word & mask) ^ want) | (~(up1_[wi] | want) & mask)) != 0) return false;
  stale_ = true;
  word ^= mask;  // every bit in the mask flips
  return true;
}

// range_add's word path without its call and loop, for a start or end of
// one slot a node within one 64-node word (most of a single-core machine's
// ends and released provisional starts): false when it does not apply
// (then range_add decides, per node if it must).
bool FreeCores::flip1(std::uint32_t n0, std::uint32_t k, int delta) {
  if (!fast1_ || odd_ != 0 || (delta != 1 && delta != -1)) return false;
  const std::uint64_t end = std::min<std::uint64_t>(L->nn, std::uint64_t{n0} + k);
  const std::size_t wi = n0 / 64;
  if (end <= n0 || (end - 1) / 64 != wi) return false;
  const auto len = static_cast<unsigned>(end - n0);
  if (!word_flip(wi, n0 % 64, len, delta)) return false;
  const std::int64_t d = -delta * static_cast<std::int64_t>(len);
  sum_free_ += d;
  sets_.count[1] = static_cast<std::uint32_t>(static_cast<std::int64_t>(sets_.count[1]) + d);
  return true;
}

void FreeCores::apply(const RunRec& r, int sign) {
  if (!r.holds) return;
  apply_nodes(r, sign);
  apply_end(r, sign);
}

// The node part of apply: slots per node and the cores it lists.
void FreeCores::apply_nodes(const RunRec& r, int sign) {
  const std::int32_t* q = r.sig();
  const std::int32_t* qe = q + r.n;
  while (q < qe) {
    const auto node = static_cast<std::uint32_t>(q[0]);
    const int slots = q[1];
    if (q[2] < 0) {  // a range of -1 - q[2] nodes
      const auto k = static_cast<std::uint32_t>(-1 - q[2]);
      q += 3;
      if (node < L->nn && !flip1(node, k, sign * slots)) range_add(node, k, sign * slots, true);
      continue;
    }
    const int nc = q[2];
    q += 3;
    const std::int32_t* cores = q;
    q += nc;
    if (node >= L->nn || !L->up[node]) continue;
    if (nc != 0 || !flip1(node, 1, sign * slots)) node_add(node, sign * slots);
    for (int k = 0; k < nc; ++k) {
      const int c = cores[k];
      if (c >= 0 && c < L->cores[node]) core_[L->coff[node] + static_cast<std::uint32_t>(c)] += static_cast<std::uint16_t>(sign);
    }
  }
}

// The release part of apply: cores held now and their expected end.
void FreeCores::apply_end(const RunRec& r, int sign) {
  used_now_ += sign * r.on_up;
  const FEnd e{r.end, r.on_up};
  if (sign > 0) {
    ends_.insert(std::upper_bound(ends_.begin(), ends_.end(), e), e);
  } else {
    auto it = std::lower_bound(ends_.begin(), ends_.end(), e);
    if (it != ends_.end() && *it == e) ends_.erase(it);
  }
}

bool FreeCores::same(const RunRec& r, const RunningJob& rj, std::uint64_t version) const {
  return rj.job.id == r.id && rj.expected_end == r.end && rj.slots == r.slots && rj.start == r.start &&
         rj.suspended == r.suspended && rj.backfilled == r.backfilled &&
         (version != 0 || r.same(rj.placement));  // model.hpp: placement fixed per (id, start)
}

// Adopts a provisional record as mirror_[k]'s.
bool FreeCores::adopt(std::uint32_t k, const RunningJob& rj) {
  if (rj.suspended) return false;
  for (std::size_t m = 0; m < prov_.size(); ++m) {
    const RunRec& p = recs_[prov_[m]];
    if (p.id != rj.job.id || p.start != rj.start || p.slots != rj.slots || !p.same(rj.placement)) continue;
    mirror_[k] = prov_[m];
    prov_[m] = prov_.back();
    prov_.pop_back();
    RunRec& r = recs_[mirror_[k]];
    r.end = rj.expected_end;
    r.backfilled = rj.backfilled;
    apply_end(r, +1);  // its nodes are taken already
    if (track_) added_.push_back({r.id, r.end, r.on_up, r.holds});
    return true;
  }
  return false;
}

void FreeCores::settle() {
  for (std::uint32_t i : prov_) {
    apply_nodes(recs_[i], -1);
    spare_.push_back(i);
  }
  prov_.clear();
}

// Brings the mirror up to snap.running; records the net changes. An entry
// that only moved (a swap-remove by the caller) is found among the removed
// ones and moved with its record: its cores are not released and re-taken.
void FreeCores::diff(const Snapshot& s) {
  removed_.clear();
  added_.clear();
  changed_.clear();
  const std::size_t nr = s.running.size(), no = mirror_.size();
  const std::size_t lo = std::min(nr, no), hi = std::max(nr, no);
  if (s.running_version != 0 && s.running_since != 0 && s.running_since == version_) {
    // model.hpp running_touched: only the listed entries and the tail can differ.
    // Kept sorted and unique as it grows (a pass touches a few entries: an
    // insertion costs less than std::sort and std::unique's calls).
    for (std::uint32_t k : s.running_touched) {
      if (k >= lo || same(recs_[mirror_[k]], s.running[k], s.running_version)) continue;
      std::size_t at = changed_.size();
      while (at > 0 && changed_[at - 1] > k) --at;
      if (at > 0 && changed_[at - 1] == k) continue;
      changed_.insert(changed_.begin() + static_cast<std::ptrdiff_t>(at), k);
    }
    for (std::size_t k = lo; k < hi; ++k) changed_.push_back(static_cast<std::uint32_t>(k));
  } else {
    for (std::size_t k = 0; k < hi; ++k)
      if (k >= lo || !same(recs_[mirror_[k]], s.running[k], s.running_version)) changed_.push_back(static_cast<std::uint32_t>(k));
  }
  if (changed_.empty()) return;
  pool_.clear();
  for (std::uint32_t k : changed_) {
    if (k >= no) break;
    pool_.push_back(mirror_[k]);
  }
  if (mirror_.size() < nr) mirror_.resize(nr);
  for (std::uint32_t k : changed_) {
    if (k >= nr) break;
    const RunningJob& rj = s.running[k];
    bool moved = false;
    for (std::size_t m = 0; m < pool_.size(); ++m)
      if (same(recs_[pool_[m]], rj, s.running_version)) {
        mirror_[k] = pool_[m];
        pool_[m] = pool_.back();
        pool_.pop_back();
        moved = true;
        break;
      }
    if (moved) continue;
    if (adopt(k, rj)) continue;
    mirror_[k] = new_rec();
    RunRec& r = recs_[mirror_[k]];
    r.id = rj.job.id;
    r.start = rj.start;
    r.end = rj.expected_end;
    r.slots = rj.slots;
    r.suspended = rj.suspended;
    r.backfilled = rj.backfilled;
    r.holds = !rj.suspended;
    r.set(rj.placement);
    r.on_up = 0;
    for (const Placement& p : rj.placement) {
      const std::uint64_t end = std::min<std::uint64_t>(L->nn, std::uint64_t{p.node} + p.count);
      for (std::uint64_t n = p.node; n < end; ++n)
        if (L->up[n]) r.on_up += static_cast<int>(p.slots);
    }
    if (r.holds && r.empty_pl()) ++bad_;
    apply(r, +1);
    if (track_) added_.push_back({r.id, r.end, r.on_up, r.holds});
  }
  for (std::uint32_t i : pool_) {
    const RunRec& r = recs_[i];
    apply(r, -1);
    if (r.holds && r.empty_pl()) --bad_;
    if (track_) removed_.push_back({r.id, r.end, r.on_up, r.holds});
    spare_.push_back(i);
  }
  pool_.clear();
  mirror_.resize(nr);
  // An entry whose flags changed but not its release shows up as removed
  // and added unchanged: the pair cancels.
  for (std::size_t a = 0; a < added_.size(); ++a)
    for (std::size_t b = 0; b < removed_.size(); ++b) {
      const Change& x = added_[a];
      const Change& y = removed_[b];
      if (x.id == y.id && x.end == y.end && x.on_up == y.on_up && x.holds == y.holds) {
        added_[a] = added_.back();
        added_.pop_back();
        removed_[b] = removed_.back();
        removed_.pop_back();
        --a;
        break;
      }
    }
}

// NodeSets::place_into with ranges on single-core nodes, and the
// range_add of each range it gives, in one walk: the highest free nodes
// first, a run at a time, each word's bits cleared once (the word path of
// range_add: with fast1_ and no odd count the per-node counts follow
// from the bits, stale_). A run that ends at a word's bit 0 and goes on
// at bit 63 of the word below joins the same entry, as place_into's runs
// cross words. Returns the nodes taken.
int FreeCores::take1(std::vector<Placement>& out, int sl) {
  const std::size_t first = out.size();
  std::uint64_t* w = sets_.bits.data() + sets_.nw;  // the bitset of free count 1
  int left = sl;
  for (std::size_t wi = sets_.nw; wi-- > 0 && left > 0;) {
    std::uint64_t m = w[wi];
    if (m == 0) continue;
    std::uint64_t taken = 0;
    while (m != 0 && left > 0) {
      const int h = 63 - __builtin_clzll(m);
      const std::uint64_t inv = ~(m << (63 - h));  // the run down from h leads
      int ones = inv ? __builtin_clzll(inv) : 64;
      if (ones > left) ones = left;
      const int low = h - ones + 1;
      const std::uint64_t run = (ones == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << ones) - 1)) << low;
      m &= ~run;
      taken |= run;
      left -= ones;
      const auto lo = static_cast<std::uint32_t>(wi * 64 + static_cast<std::size_t>(low));
      if (out.size() > first && out.back().node == lo + static_cast<std::uint32_t>(ones)) {
        out.back().node = lo;
        out.back().count += static_cast<std::uint32_t>(ones);
      } else {
        Placement& p = out.emplace_back();  // in place: no temporary moved in
        p.node = lo;
        p.slots = 1;
        p.count = static_cast<std::uint32_t>(ones);
      }
    }
    w[wi] &= ~taken;
  }
  const int got = sl - left;
  if (got > 0) stale_ = true;
  sum_free_ -= got;
  sets_.count[1] -= static_cast<std::uint32_t>(got);
  return got;
}

}  // namespace corral::planning
