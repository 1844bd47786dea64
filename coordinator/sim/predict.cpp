#include "coordinator/sim/predict.hpp"

#include <algorithm>

namespace corral::sim {

Time RunPredictor::Runs::longest() const {
  const std::uint32_t k = std::min<std::uint32_t>(n, 3);
  Time m = 0;
  for (std::uint32_t i = 0; i < k; ++i) m = std::max(m, r[i]);
  return m;
}

std::uint64_t RunPredictor::similar_key(const SwfJob& s) {
  // user (< 2^24 in every archive trace), size (< 2^20), request (< 2^40 s):
  // mixed rather than packed, so a wider field only risks a shared entry.
  std::uint64_t h = static_cast<std::uint64_t>(s.user) * 0x9E3779B97F4A7C15ULL;
  h ^= static_cast<std::uint64_t>(s.procs) + 0x7F4A7C159E3779B9ULL + (h << 6) + (h >> 2);
  h ^= static_cast<std::uint64_t>(s.estimate) + 0x94D049BB133111EBULL + (h << 6) + (h >> 2);
  return h;
}

std::uint64_t RunPredictor::burst_key(const SwfJob& s) const {
  auto it = burst_of_.find(s.id);
  const std::uint64_t b = it == burst_of_.end() ? 0 : it->second;
  return similar_key(s) ^ ((b + 1) * 0xD6E8FEB86659FD93ULL);
}

bool RunPredictor::arrive(const SwfJob& s) {
  if (burst_gap_ <= 0 || s.user < 0) return false;
  UserBursts& u = bursts_[s.user];
  if (u.n == 0 || s.submit - u.last_submit >= burst_gap_) ++u.n;
  u.last_submit = s.submit;
  burst_of_[s.id] = u.n;
  BurstFirst& f = burst_first_[burst_key(s)];
  ++f.count;
  if (f.first == 0) {
    f.first = s.id;
    return false;
  }
  if (f.scout || f.count < scout_min_) return false;
  f.scout = true;
  scout_[f.first] = true;
  return true;
}

Time RunPredictor::predict(const SwfJob& s) const {
  if (s.user < 0) return 0;
  Time p = 0;
  if (burst_gap_ > 0) {
    const auto it = burst_runs_.find(burst_key(s));
    if (it != burst_runs_.end()) p = it->second.longest();
    else if (scout_.count(s.id)) p = 1;
  }
  if (p == 0 && kind_ == Predictor::Similar) {
    if (auto it = similar_.find(similar_key(s)); it != similar_.end()) p = it->second.longest();
  }
  if (p == 0) {
    auto it = user_.find(s.user);
    if (it == user_.end()) return 0;
    const Runs& u = it->second;
    if (kind_ == Predictor::Mean2)
      p = u.n >= 2 ? (u.last() + u.before_last() + 1) / 2 : u.last();
    else
      p = u.longest();
  }
  return std::clamp<Time>(p, 1, std::max<Time>(1, s.estimate));
}

void RunPredictor::record(const SwfJob& s) {
  if (s.user < 0) return;
  Runs& u = user_[s.user];
  u.r[u.n % 3] = s.run;
  ++u.n;
  if (burst_gap_ > 0) {
    Runs& b = burst_runs_[burst_key(s)];
    b.r[b.n % 3] = s.run;
    ++b.n;
  }
  if (kind_ == Predictor::Similar) {
    Runs& m = similar_[similar_key(s)];
    m.r[m.n % 3] = s.run;
    ++m.n;
  }
}

}  // namespace corral::sim
