// File helpers both cgroup backends share (cgroup.cpp, cgroup_v2.cpp): reading and writing
// control files, and the kill loop. Internal to agent/node.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

namespace corral::node {
class CgroupBackend;
}

namespace corral::node::cgio {

std::string read_file(const std::string& path);   // "" when it cannot be read
std::int64_t read_int(const std::string& path);   // 0 when absent or not a number
// Value of "key N" in a flat keyed file (memory.oom_control, memory.events, cpu.stat).
std::int64_t keyed_value(const std::string& text, const std::string& key);
// One write(2) of value to an existing file (no O_CREAT: cgroup files exist or it is an error).
bool write_file(const std::string& path, const std::string& value, std::string* err = nullptr);
std::string trim(std::string s);
// Throws CgroupError for a slot name that is not one path component.
void check_slot(const std::string& slot);
// Throws CgroupError for a parent that is not a relative group name.
void check_parent(const std::string& parent);

// The kill loop of both hierarchies: true once no process but `spare` is left in the slot, false
// if the deadline passes first. Each round `kill_at_once` may do it all (v2 cgroup.kill); else
// the slot is frozen when `freezable` (none can fork meanwhile), each process gets SIGKILL, and
// it is thawed.
bool kill_slot(CgroupBackend& cg, const std::string& slot, int timeout_ms, pid_t spare,
               const std::function<bool()>& freezable, const std::function<bool()>& kill_at_once);

}  // namespace corral::node::cgio
