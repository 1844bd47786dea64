// NCI policy (owned by the nci part).
#pragma once
#include "coordinator/model.hpp"
namespace corral {
struct NciConfig {
  bool enabled = false;
};
}  // namespace corral
