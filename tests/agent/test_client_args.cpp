#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/agent/submit_of.hpp"
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

TEST_CASE("-pe slot ranges: Grid Engine forms, clear errors", "[agent]") {
  using corral::proto::kSlotsUnbounded;
  auto r = parse_slot_range("2-4");
  CHECK((r.min == 2 && r.max == 4));
  r = parse_slot_range("3");  // m = m-m
  CHECK((r.min == 3 && r.max == 3));
  r = parse_slot_range("-4");  // -m = 1-m
  CHECK((r.min == 1 && r.max == 4));
  r = parse_slot_range("2-");  // n- = n to infinity (the node caps it)
  CHECK((r.min == 2 && r.max == kSlotsUnbounded));
  CHECK_THROWS_WITH(parse_slot_range("0"), Catch::Contains("start at 1"));
  CHECK_THROWS_WITH(parse_slot_range("0-4"), Catch::Contains("start at 1"));
  CHECK_THROWS_WITH(parse_slot_range("4-2"), Catch::Contains("below the minimum"));
  CHECK_THROWS_WITH(parse_slot_range("abc"), Catch::Contains("not a positive integer"));
  CHECK_THROWS_WITH(parse_slot_range("2-4,8"), Catch::Contains("range lists"));
  CHECK_THROWS_WITH(parse_slot_range("-"), Catch::Contains("no bound"));
  CHECK_THROWS_WITH(parse_slot_range("1-2-3"), Catch::Contains("more than one"));
  CHECK_THROWS_WITH(parse_slot_range(""), Catch::Contains("empty"));
  CHECK_THROWS_WITH(parse_slot_range("2.5"), Catch::Contains("not a positive integer"));
  for (const char* bad : {"0", "4-2", "x-3", "3-x", " 2", "+2", "99999999999"})
    CHECK_THROWS_AS(parse_slot_range(bad), UsageError);

  const char* ok[] = {"submit", "-pe", "smp", "1-4", "-l", "walltime=60", "--wrap", "true"};
  SubmitArgs a = parse_submit(8, const_cast<char**>(ok));
  CHECK(a.spec.pe == "smp");
  CHECK(a.spec.slots_min == 1);
  CHECK(a.spec.slots_max == 4);
  CHECK(a.spec.ncpus == 1);  // the minimum
  CHECK(a.spec.walltime == 60);
  const char* open[] = {"submit", "-pe", "mpi", "2-", "--wrap", "true"};
  SubmitArgs o = parse_submit(6, const_cast<char**>(open));
  CHECK(o.spec.slots_min == 2);
  CHECK(o.spec.slots_max == kSlotsUnbounded);
  CHECK(o.spec.ncpus == 2);

  // -pe with ncpus= (either order) is refused: the range is the cpu count.
  const char* both1[] = {"submit", "-pe", "smp", "1-4", "-l", "ncpus=2", "--wrap", "true"};
  CHECK_THROWS_WITH(parse_submit(8, const_cast<char**>(both1)), Catch::Contains("not both"));
  const char* both2[] = {"submit", "-l", "walltime=5,ncpus=1", "-pe", "smp", "2", "--wrap", "true"};
  CHECK_THROWS_WITH(parse_submit(8, const_cast<char**>(both2)), Catch::Contains("not both"));
  const char* missing[] = {"submit", "-pe", "smp"};
  CHECK_THROWS_WITH(parse_submit(3, const_cast<char**>(missing)), Catch::Contains("-pe needs"));
  const char* flag[] = {"submit", "-pe", "smp", "--wrap", "true"};
  CHECK_THROWS_WITH(parse_submit(5, const_cast<char**>(flag)), Catch::Contains("-pe needs"));
  const char* twice[] = {"submit", "-pe", "smp", "2", "-pe", "smp", "3", "--wrap", "true"};
  CHECK_THROWS_WITH(parse_submit(9, const_cast<char**>(twice)), Catch::Contains("twice"));
  const char* badname[] = {"submit", "-pe", "s m p", "2", "--wrap", "true"};
  CHECK_THROWS_WITH(parse_submit(6, const_cast<char**>(badname)), Catch::Contains("invalid parallel environment name"));
  const char* zero[] = {"submit", "-pe", "smp", "0", "--wrap", "true"};
  CHECK_THROWS_WITH(parse_submit(6, const_cast<char**>(zero)), Catch::Contains("invalid -pe slot range '0'"));
}

TEST_CASE("JSON output: every control character escaped, bad UTF-8 replaced, read back", "[agent][json]") {
  corral::proto::JobInfo j;
  j.id = 6;
  j.state = "ended";
  j.end_reason = "mem";
  for (int c = 1; c < 0x20; ++c) j.comment += static_cast<char>(c);
  j.comment += "\x7f\"\\";
  j.name = "bad\xff utf-8";
  j.runs.push_back({1.5, 2.25, "mem", 137, j.comment});
  const std::string js = to_json(j);
  for (char c : js) CHECK(static_cast<unsigned char>(c) >= 0x20);
  const auto back = nlohmann::json::parse(js);
  CHECK(back["comment"] == j.comment);
  CHECK(back["runs"][0]["comment"] == j.comment);
  CHECK(back["runs"][0]["end_reason"] == "mem");
  CHECK(back["name"] == "bad\xef\xbf\xbd utf-8");  // U+FFFD: the output never stops on a user's bytes
  corral::proto::NodeStatus n;
  n.node = "n\x01";
  n.recent.push_back(j);
  CHECK(nlohmann::json::parse(to_json(n))["recent"][0]["comment"] == j.comment);
}

TEST_CASE("stat JSON shows the slot range and the granted slots", "[agent]") {
  corral::proto::JobInfo j;
  j.id = 9;
  j.state = "running";
  j.ncpus = 1;
  j.pe = "smp";
  j.slots_min = 1;
  j.slots_max = 4;
  j.slots = 2;
  j.cores = {0, 1};
  std::string js = to_json(j);
  CHECK(js.find("\"pe\":\"smp\"") != std::string::npos);
  CHECK(js.find("\"slots_min\":1") != std::string::npos);
  CHECK(js.find("\"slots_max\":4") != std::string::npos);
  CHECK(js.find("\"slots\":2") != std::string::npos);
  j.slots_max = corral::proto::kSlotsUnbounded;
  j.slots = 0;
  j.pe.clear();
  js = to_json(j);
  CHECK(js.find("\"slots_max\":null") != std::string::npos);
  CHECK(js.find("\"slots\":null") != std::string::npos);
  CHECK(js.find("\"pe\":null") != std::string::npos);
}

TEST_CASE("suspend/resume/requeue/checkpoint arguments", "[agent]") {
  const char* a[] = {"requeue", "4", "5.node1", "--socket", "/tmp/s"};
  ControlArgs c = parse_control(5, const_cast<char**>(a));
  CHECK(c.action == "requeue");
  CHECK(c.ids == std::vector<JobRef>{{4, -1}, {5, -1}});
  CHECK(c.socket == "/tmp/s");
  const char* none[] = {"suspend"};
  CHECK_THROWS_WITH(parse_control(1, const_cast<char**>(none)), Catch::Contains("missing job id"));
  const char* bad[] = {"resume", "x1"};
  CHECK_THROWS_WITH(parse_control(2, const_cast<char**>(bad)), Catch::Contains("invalid job id"));
  const char* opt[] = {"resume", "-f", "3"};
  CHECK_THROWS_WITH(parse_control(3, const_cast<char**>(opt)), Catch::Contains("unknown option"));
  const char* zero[] = {"resume", "0"};
  CHECK_THROWS_AS(parse_control(2, const_cast<char**>(zero)), UsageError);
}

TEST_CASE("submit: qsub spellings through CLI11, -pe as a value, --help first", "[agent][cli]") {
  // "-pe" as -N's value names the job; the -pe after it is the option.
  const char* named[] = {"submit", "-N", "-pe", "-pe", "smp", "-4", "-q=express", "-Pproj", "--wrap", "true"};
  SubmitArgs a = parse_submit(10, const_cast<char**>(named));
  CHECK(a.spec.name == "-pe");
  CHECK(a.spec.pe == "smp");
  CHECK((a.spec.slots_min == 1 && a.spec.slots_max == 4));  // "-4" = 1-4, not an option
  CHECK(a.spec.queue == "express");
  CHECK(a.spec.project == "proj");
  // Repeated options: the last -q wins, every -l adds.
  const char* again[] = {"submit", "-q", "a", "-l", "walltime=60", "-q", "b", "-l", "mem=1gb", "--socket=/x", "--wrap", "true"};
  SubmitArgs r = parse_submit(12, const_cast<char**>(again));
  CHECK(r.spec.queue == "b");
  CHECK(r.spec.walltime == 60);
  CHECK(r.spec.mem_mb == 1024);
  CHECK(r.socket == "/x");
  // --help is answered whatever else the line holds (no script, an unknown option).
  const char* help[] = {"submit", "--bogus", "-l", "walltime=abc", "--help"};
  CHECK(parse_submit(5, const_cast<char**>(help)).help);
  // After "--" a script may start with '-'.
  const char* dashed[] = {"submit", "--", "-no-such-script"};
  CHECK_THROWS_WITH(parse_submit(3, const_cast<char**>(dashed)), Catch::Contains("cannot read script '-no-such-script'"));
  const char* unk[] = {"submit", "-x", "--wrap", "true"};
  CHECK_THROWS_WITH(parse_submit(4, const_cast<char**>(unk)),
                    Catch::Equals("unknown option '-x' (see corral submit --help)"));
  const char* two[] = {"submit", "a.sh", "b.sh"};
  CHECK_THROWS_WITH(parse_submit(3, const_cast<char**>(two)), Catch::Contains("more than one script given ('a.sh' and 'b.sh')"));
  const char* novalue[] = {"submit", "--wrap", "true", "-N"};
  CHECK_THROWS_WITH(parse_submit(4, const_cast<char**>(novalue)), Catch::Equals("-N needs a value"));
}

TEST_CASE("stat/cancel/wait/node and the control commands: --help, --socket, ids", "[agent][cli]") {
  const char* h[] = {"cancel", "7", "-h"};
  CHECK(parse_common("cancel", 3, const_cast<char**>(h), false).help);
  const char* s[] = {"stat", "--socket", "/a", "4", "--json", "--socket=/b"};
  Common c = parse_common("stat", 6, const_cast<char**>(s), true);
  CHECK(c.socket == "/b");  // the last one given
  CHECK(c.json);
  CHECK(c.args == std::vector<std::string>{"4"});
  const char* j[] = {"wait", "--json", "4"};
  CHECK_THROWS_WITH(parse_common("wait", 3, const_cast<char**>(j), false),
                    Catch::Equals("unknown option '--json' (see corral wait --help)"));
  const char* ch[] = {"checkpoint", "--help"};
  ControlArgs ctl = parse_control(2, const_cast<char**>(ch));
  CHECK(ctl.help);
  CHECK(ctl.ids.empty());
}

TEST_CASE("an empty value after '=' is that option's value, not the next argument", "[agent][cli]") {
  const char* wrap[] = {"submit", "--wrap=", "job.sh"};
  CHECK_THROWS_WITH(parse_submit(3, const_cast<char**>(wrap)), Catch::Contains("give a script or --wrap, not both"));
  const char* q[] = {"submit", "-q=", "--wrap", "true"};
  CHECK(parse_submit(4, const_cast<char**>(q)).spec.queue.empty());
  const char* s[] = {"cancel", "--socket=", "5"};
  Common c = parse_common("cancel", 3, const_cast<char**>(s), false);
  CHECK(c.args == std::vector<std::string>{"5"});
  CHECK(c.socket == default_socket());
}

TEST_CASE("submit: -P PROJECT:STEP, --preempt, -now y, CORRAL_PREEMPT", "[agent]") {
  SubmitArgs a = submit_of({"submit", "-P", "chip:synthesis", "--preempt", "suspend", "-now", "y", "--wrap", "true"});
  CHECK(a.spec.project == "chip");
  CHECK(a.spec.flow_step == "synthesis");
  CHECK(a.spec.preempt == "suspend");
  CHECK(a.spec.immediate);
  a = submit_of({"submit", "-P", "chip", "--wrap", "true"});
  CHECK(a.spec.project == "chip");
  CHECK(a.spec.flow_step.empty());
  CHECK(a.spec.preempt.empty());
  CHECK_FALSE(a.spec.immediate);
  CHECK_THROWS_WITH(submit_of({"submit", "-P", ":x", "--wrap", "true"}), Catch::Contains("-P takes PROJECT or PROJECT:STEP"));
  CHECK_THROWS_WITH(submit_of({"submit", "--preempt", "kill", "--wrap", "true"}),
                    "--preempt: expected requeue or suspend, got 'kill'");
  CHECK_THROWS_WITH(submit_of({"submit", "-now", "y", "-now", "n", "--wrap", "true"}), "-now given twice");
  // The environment chooses when the command line did not; never over it.
  char env1[] = "CORRAL_PREEMPT=suspend";
  char* env[] = {env1, nullptr};
  a = submit_of({"submit", "--wrap", "true"});
  finish_submit(a.spec, "/tmp", env);
  CHECK(a.spec.preempt == "suspend");
  a = submit_of({"submit", "--preempt", "requeue", "--wrap", "true"});
  finish_submit(a.spec, "/tmp", env);
  CHECK(a.spec.preempt == "requeue");
  char bad1[] = "CORRAL_PREEMPT=later";
  char* bad[] = {bad1, nullptr};
  a = submit_of({"submit", "--wrap", "true"});
  CHECK_THROWS_WITH(finish_submit(a.spec, "/tmp", bad), "CORRAL_PREEMPT: expected requeue or suspend, got 'later'");
}

TEST_CASE("submit: #CORRAL directives before the first command; the command line wins", "[agent]") {
  const std::string script = "/tmp/corral-test-directives.sh";
  std::ofstream(script) << "#!/bin/sh\n# a comment\n#CORRAL --preempt suspend -N fromscript\n\n"
                           "#CORRAL -l walltime=60 -P chip:verification -now y\n"
                           "echo hi\n#CORRAL -q late\n";
  SubmitArgs a = submit_of({"submit", script});
  CHECK(a.spec.preempt == "suspend");
  CHECK(a.spec.name == "fromscript");
  CHECK(a.spec.walltime == 60);
  CHECK(a.spec.project == "chip");
  CHECK(a.spec.flow_step == "verification");
  CHECK(a.spec.immediate);
  CHECK(a.spec.queue.empty());  // after the first command: not a directive
  a = submit_of({"submit", "--preempt", "requeue", "-N", "cmd", "-l", "walltime=5", script});
  CHECK(a.spec.preempt == "requeue");
  CHECK(a.spec.name == "cmd");
  CHECK(a.spec.walltime == 5);
  CHECK(a.spec.flow_step == "verification");
  std::ofstream(script) << "#!/bin/sh\n#CORRAL --wrap 'x'\ntrue\n";
  CHECK_THROWS_WITH(submit_of({"submit", script}), Catch::Contains("--wrap belongs on the command line"));
  std::ofstream(script) << "#!/bin/sh\n#CORRAL --bogus\ntrue\n";
  CHECK_THROWS_WITH(submit_of({"submit", script}), Catch::Contains(":2: '#CORRAL --bogus': unknown option '--bogus'"));
  std::ofstream(script) << "#!/bin/sh\n#CORRALX -q nope\ntrue\n";
  CHECK(submit_of({"submit", script}).spec.queue.empty());
  std::remove(script.c_str());
}
