#include <catch2/catch.hpp>

#include <fstream>

#include "tools/corral/client.hpp"

using namespace corral::cli;

TEST_CASE("walltime: HH:MM:SS, MM:SS, seconds", "[agent]") {
  CHECK(parse_walltime("01:02:03") == 3723);
  CHECK(parse_walltime("10:00") == 600);
  CHECK(parse_walltime("90") == 90);
  CHECK(parse_walltime("100:00:00") == 360000);
  for (const char* bad : {"", "abc", "1:2:3:4", "1:60:00", "-5", "0", "1::2", "1:00:"})
    CHECK_THROWS_AS(parse_walltime(bad), UsageError);
}

TEST_CASE("sizes: units to MiB, rounded up", "[agent]") {
  CHECK(parse_size_mb("4gb") == 4096);
  CHECK(parse_size_mb("512mb") == 512);
  CHECK(parse_size_mb("512MB") == 512);
  CHECK(parse_size_mb("1tb") == 1048576);
  CHECK(parse_size_mb("1500kb") == 2);
  CHECK(parse_size_mb("1048576") == 1);  // bytes, as PBS
  CHECK(parse_size_mb("2g") == 2048);
  for (const char* bad : {"", "gb", "4xb", "-4gb", "4.5gb", "0mb", "lots"})
    CHECK_THROWS_AS(parse_size_mb(bad), UsageError);
}

TEST_CASE("-l lists and submit options", "[agent]") {
  corral::proto::JobSpec s;
  apply_resources("walltime=1:00:00,ncpus=4,mem=4gb,jobfs=1gb", s);
  CHECK(s.walltime == 3600);
  CHECK(s.ncpus == 4);
  CHECK(s.mem_mb == 4096);
  CHECK(s.jobfs_mb == 1024);
  CHECK_THROWS_WITH(apply_resources("ncpus=", s), Catch::Contains("empty value"));
  CHECK_THROWS_WITH(apply_resources("ncpus", s), Catch::Contains("no value"));
  CHECK_THROWS_WITH(apply_resources("gpu=1", s), Catch::Contains("unknown resource"));
  CHECK_THROWS_WITH(apply_resources("ncpus=x", s), Catch::Contains("invalid ncpus"));

  std::string script = "/tmp/corral-test-script.sh";
  {
    std::ofstream out(script);
    out << "#!/bin/sh\necho hi\n";
  }
  const char* argv[] = {"submit", "-l", "walltime=10", "-lncpus=2", "-q", "express", "-P", "p1",
                        "-N", "nm", "-o", "o.txt", "-e", "e.txt", "-R", "y", script.c_str()};
  SubmitArgs a = parse_submit(17, const_cast<char**>(argv));
  CHECK(a.spec.walltime == 10);
  CHECK(a.spec.ncpus == 2);
  CHECK(a.spec.queue == "express");
  CHECK(a.spec.project == "p1");
  CHECK(a.spec.name == "nm");
  CHECK(a.spec.stdout_path == "o.txt");
  CHECK(a.spec.stderr_path == "e.txt");
  CHECK(a.spec.reserve);
  CHECK(a.spec.script == "#!/bin/sh\necho hi\n");

  const char* wrap[] = {"submit", "--wrap", "echo x"};
  SubmitArgs w = parse_submit(3, const_cast<char**>(wrap));
  CHECK(w.spec.script == "#!/bin/sh\necho x\n");
  CHECK(w.spec.name == "wrap");

  const char* both[] = {"submit", "--wrap", "echo x", script.c_str()};
  CHECK_THROWS_WITH(parse_submit(4, const_cast<char**>(both)), Catch::Contains("not both"));
  const char* none[] = {"submit", "-N", "x"};
  CHECK_THROWS_WITH(parse_submit(3, const_cast<char**>(none)), Catch::Contains("missing job script"));
  const char* dir[] = {"submit", "/tmp"};
  CHECK_THROWS_WITH(parse_submit(2, const_cast<char**>(dir)), Catch::Contains("not a regular file"));
  const char* unk[] = {"submit", "--frob", "x"};
  CHECK_THROWS_WITH(parse_submit(3, const_cast<char**>(unk)), Catch::Contains("unknown option"));
  std::remove(script.c_str());
}

TEST_CASE("JSON output escapes and nulls", "[agent]") {
  corral::proto::JobInfo j;
  j.id = 5;
  j.name = "a\"b\\c\n";
  j.state = "pending";
  std::string js = to_json(j);
  CHECK(js.find("\"name\":\"a\\\"b\\\\c\\n\"") != std::string::npos);
  CHECK(js.find("\"exit_code\":null") != std::string::npos);
  CHECK(js.find("\"end_reason\":null") != std::string::npos);
  j.state = "ended";
  j.exit_code = 0;
  j.end_reason = "completed";
  js = to_json(j);
  CHECK(js.find("\"exit_code\":0") != std::string::npos);
  CHECK(js.find("\"end_reason\":\"completed\"") != std::string::npos);
}
