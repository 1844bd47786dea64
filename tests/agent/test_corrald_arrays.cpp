// Job arrays on one node (corral submit -J / -t, #PBS -J): each task runs with its index
// variables and its own output file; %max_running holds; one task or all are cancelled, held
// and released by name (ID[INDEX]); an array of 100,000 tasks is a handful of journal entries;
// a restart of corrald mid-array runs the rest and none twice.
#include <fstream>
#include <map>
#include <set>

#include "agent/journal_format.hpp"
#include "tests/agent/harness.hpp"

using namespace harness;

namespace {

std::string submitted_id(const Result& r) {
  INFO(r.err);
  REQUIRE(r.rc == 0);
  return trim(r.out);
}

void write_script(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), 0755);
}

// The lines of `path`.
std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(slurp(path));
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// `corral wait ID` (bounded by the test's deadline through the job's own walltime).
Result wait_for(const Agent& a, const std::string& id) { return a.cli({"wait", id}); }

// The journal's entries: puts of the array's own record, and of its tasks' records.
struct JournalCount {
  std::size_t entries = 0, array_puts = 0, task_puts = 0;
  std::set<std::uint64_t> tasks;
};
JournalCount count_journal(const Agent& a, std::uint64_t array) {
  JournalCount c;
  const std::string data = slurp(a.dir + "/state/journal");
  corral::agent::journal::Entry e;
  for (std::size_t pos = 0, n; pos < data.size() && (n = corral::agent::journal::decode_at(data, pos, e)) > 0; pos += n) {
    ++c.entries;
    if (e.op != "put") continue;
    if (e.job.id == array) ++c.array_puts;
    if (e.job.array_id == array) ++c.task_puts, c.tasks.insert(e.job.id);
  }
  return c;
}

}  // namespace

TEST_CASE("array tasks run with their index, their own output files and at most %max_running at once") {
  SKIP_UNLESS_ROOT();
  Agent a("arr-run");
  a.start();
  const std::string work = a.dir + "/work";
  write_script(work + "/arr.sh",
               "#!/bin/sh\n"
               "#PBS -J 1-7:2%1\n"
               "#PBS -N arr\n"
               "#PBS -l walltime=60,ncpus=1,mem=32mb\n"
               "echo \"$CORRAL_ARRAY_INDEX $PBS_ARRAY_INDEX $SGE_TASK_ID $SGE_TASK_FIRST $SGE_TASK_LAST "
               "$SGE_TASK_STEPSIZE $PBS_ARRAY_ID\"\n"
               "sleep 0.2\n");
  const std::string id = submitted_id(a.submit({"arr.sh"}));
  Result w = wait_for(a, id);
  INFO(w.err << a.log());
  CHECK(w.rc == 0);
  for (int i : {1, 3, 5, 7}) {
    const std::string n = std::to_string(i);
    CHECK(slurp(work + "/arr.o" + id + "." + n) == n + " " + n + " " + n + " 1 7 2 " + id + "[]\n");
  }
  CHECK(slurp(work + "/arr.o" + id + ".2").empty());  // no task 2 with step 2

  // The array is one line; -t lists its tasks. %1: no two tasks' runs overlap.
  Result one = a.cli({"stat", id});
  CHECK(one.out.find(id + "[]") != std::string::npos);
  CHECK(one.out.find("tasks 1-7:2%1: 0 queued, 0 pending, 0 running, 4 ended") != std::string::npos);
  Result all = a.cli({"stat", "-t", id, "--json"});
  REQUIRE(all.rc == 0);
  std::vector<std::pair<double, double>> runs;
  for (int i : {1, 3, 5, 7}) {
    const std::string js = stat_json(a, id + "[" + std::to_string(i) + "]");
    CHECK(json_field(js, "end_reason") == "completed");
    CHECK(json_field(js, "array_index") == std::to_string(i));
    runs.emplace_back(std::stod(json_field(js, "start_time")), std::stod(json_field(js, "end_time")));
    CHECK(all.out.find("\"array_index\":" + std::to_string(i)) != std::string::npos);
  }
  std::sort(runs.begin(), runs.end());
  for (std::size_t i = 1; i < runs.size(); ++i) CHECK(runs[i].first >= runs[i - 1].second);
  CHECK(a.cli({"stat", id + "[4]"}).rc != 0);  // not a task of 1-7:2
}

TEST_CASE("one task or the whole array is cancelled, held and released by name") {
  SKIP_UNLESS_ROOT();
  Agent a("arr-cancel");
  a.start();
  const std::string id = submitted_id(
      a.submit({"-t", "1-5", "-tc", "1", "-l", "walltime=60,ncpus=1,mem=32mb", "--wrap", "sleep 30"}));
  CHECK(wait_state(a, id + "[1]", "running") == "running");
  // Task 4 has not been handed to the scheduler (-tc 1): stat shows it queued, cancel ends it.
  CHECK(json_field(stat_json(a, id + "[4]"), "comment") == "queued: not yet handed to the scheduler");
  Result c4 = a.cli({"cancel", id + "[4]"});
  INFO(c4.err);
  CHECK(c4.rc == 0);
  CHECK(json_field(stat_json(a, id + "[4]"), "end_reason") == "cancelled");
  Result h = a.cli({"hold", id + "[2]"});
  INFO(h.err);
  CHECK(h.rc == 0);
  CHECK(json_field(stat_json(a, id + "[2]"), "wait_reason") == "held");
  CHECK(a.cli({"release", id + "[2]"}).rc == 0);
  // Released, it waits for task 1: the array's -tc 1, named as such.
  const std::string t2 = stat_json(a, id + "[2]");
  CHECK(json_field(t2, "wait_reason") == "array_limit");
  CHECK(json_field(t2, "wait_detail") ==
        "job array " + id + " runs its limit of 1 tasks at once (%1): it starts when one of them ends");
  CHECK(json_field(stat_json(a, id + "[1]"), "state") == "running");

  Result c = a.cli({"cancel", id});
  INFO(c.err);
  CHECK(c.rc == 0);
  Result w = wait_for(a, id);
  CHECK(w.rc == 1);
  const std::string js = stat_json(a, id);
  CHECK(json_field(js, "end_reason") == "cancelled");
  CHECK(json_field(stat_json(a, id + "[1]"), "end_reason") == "cancelled");
  Result never = a.cli({"stat", id + "[5]"});
  CHECK(never.rc != 0);
  CHECK(never.err.find("never ran") != std::string::npos);
}

TEST_CASE("a 100,000-task array is a few journal entries; a restart runs the rest once") {
  SKIP_UNLESS_ROOT();
  Agent a("arr-journal");
  a.start();
  const std::string work = a.dir + "/work";
  const std::string big = submitted_id(a.submit({"-J", "1-100000", "-l", "walltime=60,ncpus=1,mem=32mb", "--wrap", "sleep 30"}));
  CHECK(wait_state(a, big, "running") == "running");
  CHECK(a.cli({"cancel", big}).rc == 0);
  CHECK(wait_for(a, big).rc == 1);
  JournalCount jc = count_journal(a, std::stoull(big));
  CHECK(jc.tasks.size() < 200);  // only the tasks handed to the scheduler (64 waiting, the running) have records
  CHECK(jc.entries < 1000);

  // Tasks append their index; a restart while task 2 runs: 3 and 4 still run, none runs twice.
  write_script(work + "/seq.sh",
               "#!/bin/sh\n"
               "#$ -t 1-4\n"
               "#$ -tc 1\n"
               "#$ -l h_rt=60\n"
               "echo $SGE_TASK_ID >> seq.out\n"
               "sleep 0.5\n");
  const std::string id = submitted_id(a.submit({"seq.sh"}));
  for (int t = 0; t < 20000 && lines_of(work + "/seq.out").size() < 2; t += 20)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  a.stop(SIGTERM);
  a.start();
  Result w = wait_for(a, id);
  INFO(w.err << a.log());
  CHECK(w.rc == 0);
  CHECK(lines_of(work + "/seq.out") == std::vector<std::string>{"1", "2", "3", "4"});
  CHECK(count_journal(a, std::stoull(id)).tasks.size() == 4);
}
