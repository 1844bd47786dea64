#include "topology.hpp"
// implementation follows
