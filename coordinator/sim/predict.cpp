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

Time RunPredictor::predict(const SwfJob& s) const {
  if (s.user < 0) return 0;
  Time p = 0;
  if (kind_ == Predictor::Similar) {
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
  if (kind_ == Predictor::Similar) {
    Runs& m = similar_[similar_key(s)];
    m.r[m.n % 3] = s.run;
    ++m.n;
  }
}

}  // namespace corral::sim
