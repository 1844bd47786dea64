// Job array ranges and task names as users write them: -J (PBS), -t and -tc (Grid Engine) on the
// command line and in directives, and ID[INDEX].
#include <catch2/catch.hpp>

#include "tests/agent/submit_of.hpp"
#include "tools/submit/array_values.hpp"
#include "tools/submit/directives.hpp"

using namespace corral::cli;
using corral::proto::ArraySpec;

TEST_CASE("arrays: -J and -t ranges, steps and limits", "[agent][arrays]") {
  CHECK(submit_of({"submit", "-J", "1-100:2%5", "--wrap", "true"}).spec.array == ArraySpec{1, 100, 2, 5});
  CHECK(submit_of({"submit", "-t", "0-9", "-tc", "3", "--wrap", "true"}).spec.array == ArraySpec{0, 9, 1, 3});
  CHECK(submit_of({"submit", "-tc", "3", "-t", "4", "--wrap", "true"}).spec.array == ArraySpec{4, 4, 1, 3});
  CHECK(submit_of({"submit", "-J1-4", "--wrap", "true"}).spec.array.tasks() == 4);
  CHECK_FALSE(submit_of({"submit", "--wrap", "true"}).spec.array.on());
  for (const char* bad : {"", "5-1", "1-", "a-b", "1-10:0", "1-10%0", "1-2000000", "-3", "1-10:x"})
    CHECK_THROWS_AS(submit_of({"submit", "-J", bad, "--wrap", "true"}), UsageError);
  SubmitArgs now = submit_of({"submit", "-J", "1-10", "-now", "y", "--wrap", "true"});
  CHECK_THROWS_WITH(finish_submit(now.spec, "/tmp", nullptr), Catch::Contains("-now y"));
  CHECK_THROWS_AS(submit_of({"submit", "-t", "1-3", "-tc", "0", "--wrap", "true"}), UsageError);
}

TEST_CASE("arrays: directives take the same grammar", "[agent][arrays]") {
  DirectiveResult pbs = parse_directives("#!/bin/sh\n#PBS -J 2-8:3%2\n", "a.sh");
  REQUIRE(pbs.ok());
  CHECK(pbs.directives.spec.array == ArraySpec{2, 8, 3, 2});
  DirectiveResult sge = parse_directives("#!/bin/sh\n#$ -tc 4\n#$ -t 1-50\n", "b.sh");
  REQUIRE(sge.ok());
  CHECK(sge.directives.spec.array == ArraySpec{1, 50, 1, 4});
  DirectiveResult bad = parse_directives("#!/bin/sh\n#PBS -J 9-1\n", "c.sh");
  CHECK(bad.error.find("c.sh:2:") == 0);
}

TEST_CASE("arrays: a task is ID[INDEX]", "[agent][arrays]") {
  CHECK(parse_job_ref("42").id == 42);
  CHECK(parse_job_ref("42").index == -1);
  CHECK(parse_job_ref("42[]").index == -1);
  CHECK(parse_job_ref("42[7]").index == 7);
  CHECK(parse_job_ref("42[7].host").id == 42);
  CHECK(job_ref_text(42, 7) == "42[7]");
  for (const char* bad : {"42[", "42[x]", "42[7]x", "[7]", "42[-1]"})
    CHECK_THROWS_AS(parse_job_ref(bad), UsageError);
}
