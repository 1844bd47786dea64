// A set of job ids kept as one sorted vector (corrald's pending queue).
// Every scheduling pass walks all of it, which is cheaper over contiguous
// ids than over a node-based set. New submits have the largest id (an
// append); a start erases near the front (a move of 8-byte ids).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace corral::agent {

class IdSet {
 public:
  using const_iterator = std::vector<std::uint64_t>::const_iterator;
  bool insert(std::uint64_t id) {
    if (v_.empty() || v_.back() < id) {
      v_.push_back(id);
      return true;
    }
    auto it = std::lower_bound(v_.begin(), v_.end(), id);
    if (it != v_.end() && *it == id) return false;
    v_.insert(it, id);
    return true;
  }
  std::size_t erase(std::uint64_t id) {
    auto it = std::lower_bound(v_.begin(), v_.end(), id);
    if (it == v_.end() || *it != id) return 0;
    v_.erase(it);
    return 1;
  }
  std::size_t count(std::uint64_t id) const { return std::binary_search(v_.begin(), v_.end(), id) ? 1 : 0; }
  bool empty() const { return v_.empty(); }
  std::size_t size() const { return v_.size(); }
  const_iterator begin() const { return v_.begin(); }
  const_iterator end() const { return v_.end(); }

 private:
  std::vector<std::uint64_t> v_;
};

}  // namespace corral::agent
