#include "launcher.hpp"
// implementation follows
