// The directive grammar (tools/submit/directives.hpp) as a pure function, and how `corral
// submit` puts a script's directives under its command line.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

#include "proto/spec_check.hpp"
#include "tests/agent/submit_of.hpp"
#include "tools/corral/client.hpp"
#include "tools/submit/directives.hpp"

using namespace corral::cli;

namespace {
Directives ok(const std::string& text) {
  DirectiveResult r = parse_directives(text, "job.sh");
  INFO(r.error);
  REQUIRE(r.ok());
  return r.directives;
}
std::string error_of(const std::string& text) {
  DirectiveResult r = parse_directives(text, "job.sh");
  REQUIRE_FALSE(r.ok());
  return r.error;
}
}  // namespace

TEST_CASE("directives: PBS lines as NCI writes them", "[agent][directives]") {
  Directives d = ok("#!/bin/bash\n#PBS -P a00\n#PBS -q normal\n"
                    "#PBS -l walltime=02:00:00,ncpus=48,mem=190gb,jobfs=200gb\n#PBS -l wd\n"
                    "#PBS -N run7\n#PBS -o out.txt\n#PBS -e err.txt\n#PBS -j oe\n\nmodule load x\n");
  CHECK(d.lines == 8);
  CHECK(d.spec.project == "a00");
  CHECK(d.spec.queue == "normal");
  CHECK(d.spec.walltime == 7200);
  CHECK(d.spec.ncpus == 48);
  CHECK(d.have_ncpus);
  CHECK(d.spec.mem_mb == 190 * 1024);
  CHECK(d.spec.jobfs_mb == 200 * 1024);
  CHECK(d.spec.name == "run7");
  CHECK(d.spec.stdout_path == "out.txt");
  CHECK(d.spec.stderr_path == "err.txt");
  CHECK(d.spec.join);
}

TEST_CASE("directives: -l select=K:ncpus=M asks K chunks, each whole on one node", "[agent][directives]") {
  Directives d = ok("#PBS -l select=4:ncpus=16:mem=8gb,walltime=1:00:00\n");
  CHECK(d.spec.ncpus == 64);
  CHECK(d.spec.chunk_ncpus == 16);
  CHECK(d.spec.mem_mb == 4 * 8 * 1024);
  CHECK(d.spec.walltime == 3600);
  CHECK(d.have_ncpus);
  CHECK(ok("#PBS -l select=2\n").spec.ncpus == 2);
  CHECK(error_of("#PBS -l select=0:ncpus=2\n").find("the chunk count must be a positive integer") != std::string::npos);
  CHECK(error_of("#PBS -l select=2:ncpus=x\n").find("ncpus must be a positive integer") != std::string::npos);
  CHECK(error_of("#PBS -l select=2:gpus=1\n").find("unknown chunk resource 'gpus'") != std::string::npos);
}

TEST_CASE("directives: Grid Engine lines", "[agent][directives]") {
  Directives d = ok("#!/bin/sh\n#$ -l h_rt=0:30:00,h_vmem=2G\n#$ -pe smp 2-8\n#$ -R y\n#$ -N sim\n#$ -cwd\n"
                    "#$ -j y\n#$ -hold_jid 4,5\nhostname\n");
  CHECK(d.spec.walltime == 1800);
  CHECK(d.spec.mem_per_slot_mb == 2048);  // h_vmem is per slot: the job gets it times its slots
  CHECK(d.spec.mem_mb == 0);
  CHECK(d.spec.pe == "smp");
  CHECK(d.spec.slots_min == 2);
  CHECK(d.spec.slots_max == 8);
  CHECK_FALSE(d.have_ncpus);
  CHECK(d.spec.reserve);
  CHECK(d.spec.name == "sim");
  CHECK(d.spec.join);
  REQUIRE(d.spec.depend.size() == 2);
  CHECK(d.spec.depend[0] == corral::proto::Dependency{"afterany", 4});
  CHECK(d.spec.depend[1] == corral::proto::Dependency{"afterany", 5});
  // The last memory request wins: a total after h_vmem (a command line's -l mem=) replaces it.
  Directives both = ok("#$ -l h_vmem=1G\n#$ -l mem=3G\n");
  CHECK(both.spec.mem_mb == 3072);
  CHECK(both.spec.mem_per_slot_mb == 0);
  CHECK(corral::proto::mem_for_slots(ok("#$ -pe smp 4\n#$ -l h_vmem=1G\n").spec, 4) == 4096);
}

TEST_CASE("directives: #CORRAL lines take every submit option; spellings", "[agent][directives]") {
  Directives d = ok("#CORRAL --preempt=suspend -c -now y\n#CORRAL -qexpress -P=chip:synthesis\n"
                    "#CORRAL -W depend=afterok:7:8.host,afternotok:9\n");
  CHECK(d.spec.preempt == "suspend");
  CHECK(d.spec.checkpointable);
  CHECK(d.spec.immediate);
  CHECK(d.spec.queue == "express");
  CHECK(d.spec.project == "chip");
  CHECK(d.spec.flow_step == "synthesis");
  REQUIRE(d.spec.depend.size() == 3);
  CHECK(d.spec.depend[1] == corral::proto::Dependency{"afterok", 8});
  CHECK(d.spec.depend[2] == corral::proto::Dependency{"afternotok", 9});
}

TEST_CASE("directives: read up to the first command, as qsub", "[agent][directives]") {
  Directives d = ok("\n  # indented comment\n#PBS -N first\n#PBSX -q no\n#$-q no\necho hi\n#PBS -q late\n#PBS -m abe\n");
  CHECK(d.spec.name == "first");
  CHECK(d.spec.queue.empty());
  CHECK(d.lines == 1);
  CHECK(ok("echo\n#PBS -bogus\n").lines == 0);
  CHECK(ok("").lines == 0);
  CHECK(ok("#PBS\n#$   \n").spec.name.empty());  // a prefix alone asks for nothing
  CHECK(ok("#PBS -N dos\r\n").spec.name == "dos");
}

TEST_CASE("directives: anything not understood names the file, line and text", "[agent][directives]") {
  CHECK(error_of("#!/bin/sh\n#PBS -N ok\n#PBS -m abe\n") ==
        "job.sh:3: '#PBS -m abe': unknown option '-m' (a directive may hold -l -q -P -N -o -e -j -R -pe -now -cwd "
        "-W -J -t -tc -hold_jid --preempt -c --checkpointable)");
  CHECK(error_of("#$ -l h_rt=1:00:00,license=2\n") ==
        "job.sh:1: '#$ -l h_rt=1:00:00,license=2': unknown resource 'license' (known: walltime, ncpus, select, mem, "
        "vmem, jobfs, h_rt, h_vmem, wd)");
  CHECK(error_of("#PBS -l walltime=1:99:00\n") == "job.sh:1: '#PBS -l walltime=1:99:00': invalid walltime '1:99:00' "
                                                 "(minutes and seconds must be below 60)");
  CHECK(error_of("#CORRAL -pe smp\n") == "job.sh:1: '#CORRAL -pe smp': -pe needs two values");
  CHECK(error_of("#PBS -W group_list=x\n") ==
        "job.sh:1: '#PBS -W group_list=x': unknown -W attribute 'group_list' (Corral knows depend=TYPE:ID[:ID...])");
  CHECK(error_of("#PBS -W depend=before:3\n").find("unknown dependency type 'before'") != std::string::npos);
  CHECK(error_of("#PBS -W depend=afterok\n").find("afterok needs at least one job id") != std::string::npos);
  CHECK(error_of("#$ -hold_jid prep\n").find("invalid job id 'prep'") != std::string::npos);
  CHECK(error_of("#PBS -j eo\n").find("-j takes oe") != std::string::npos);
  CHECK(error_of("#CORRAL --wrap x\n").find("--wrap belongs on the command line") != std::string::npos);
  CHECK(error_of("#CORRAL --socket=/x\n").find("--socket belongs on the command line") != std::string::npos);
  CHECK(error_of("#PBS job.sh\n").find("unexpected word 'job.sh'") != std::string::npos);
  CHECK(error_of(std::string("#PBS -N a\x01") + "b -m\n").find("'#PBS -N a\\x01b -m'") != std::string::npos);
}

TEST_CASE("submit: a script's PBS and Grid Engine directives under the command line", "[agent][directives]") {
  char tmpl[] = "/tmp/corral-test-directives-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string script = std::string(tmpl) + "/job.pbs";
  std::ofstream(script) << "#!/bin/sh\n#PBS -l walltime=60,ncpus=2 -q normal\n#PBS -W depend=afterok:3\n"
                           "#$ -N fromscript\ntrue\n";
  SubmitArgs a = submit_of({"submit", script});
  CHECK(a.spec.walltime == 60);
  CHECK(a.spec.ncpus == 2);
  CHECK(a.spec.queue == "normal");
  CHECK(a.spec.name == "fromscript");
  CHECK(a.spec.depend == std::vector<corral::proto::Dependency>{{"afterok", 3}});
  // The command line wins, its dependencies replacing the script's.
  a = submit_of({"submit", "-q", "express", "-l", "walltime=5", "-hold_jid", "9", "-j", "oe", "-cwd", script});
  CHECK(a.spec.queue == "express");
  CHECK(a.spec.walltime == 5);
  CHECK(a.spec.ncpus == 2);
  CHECK(a.spec.join);
  CHECK(a.spec.depend == std::vector<corral::proto::Dependency>{{"afterany", 9}});
  // -pe on the command line with ncpus from a directive: both name the cpu count.
  CHECK_THROWS_WITH(submit_of({"submit", "-pe", "smp", "2", script}), Catch::Contains("not both"));
  std::ofstream(script) << "#!/bin/sh\n#PBS -l walltime=60\n#PBS -M me@example.org\ntrue\n";
  CHECK_THROWS_WITH(submit_of({"submit", script}),
                    Catch::StartsWith(script + ":3: '#PBS -M me@example.org': unknown option '-M'"));
  std::remove(script.c_str());
  ::rmdir(tmpl);
}

TEST_CASE("submit: -W depend and -hold_jid on the command line", "[agent][directives]") {
  SubmitArgs a = submit_of({"submit", "-W", "depend=afterok:1:2", "-hold_jid", "2,3", "-W", "depend=afterany:2", "--wrap", "true"});
  CHECK(a.spec.depend == std::vector<corral::proto::Dependency>{{"afterok", 1}, {"afterok", 2}, {"afterany", 2}, {"afterany", 3}});
  CHECK_THROWS_WITH(submit_of({"submit", "-W", "depend=afterok:x", "--wrap", "true"}), "invalid job id 'x'");
  CHECK_THROWS_WITH(submit_of({"submit", "-hold_jid"}), Catch::Contains("-hold_jid needs a job id"));
}
