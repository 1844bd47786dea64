#include "cgroup.hpp"
// implementation follows
