// A fresh directory under /tmp for one test's files, named for what the test exercises.
#pragma once

#include <stdlib.h>

#include <string>

#include <catch2/catch.hpp>

inline std::string temp_dir(const std::string& tag) {
  std::string t = "/tmp/corral-" + tag + "-XXXXXX";
  REQUIRE(::mkdtemp(t.data()));
  return t;
}
