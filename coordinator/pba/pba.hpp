// Priority-based allocation (owned by the pba part).
#pragma once
#include "coordinator/model.hpp"
namespace corral {
struct PbaConfig {
  bool enabled = false;
};
}  // namespace corral
