#include "tools/corral/sim_pictures.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "coordinator/sim/pictures/gantt.hpp"
#include "coordinator/sim/pictures/timeline.hpp"

namespace corral::cli {

std::string picture_usage_error(const SimPictures& p) {
  if ((p.from >= 0 || p.to >= 0) && p.gantt.empty()) return "--from/--to need --gantt FILE.svg";
  if (p.from >= 0 && p.to >= 0 && p.to <= p.from) return "--to must be after --from";
  return "";
}

void write_pictures(const SimPictures& p, const sim::SimResult& r, const sim::SwfTrace& trace,
                    const std::string& title, const std::string& policy, int cores_per_node) {
  const Time origin = trace.jobs.empty() ? 0 : trace.jobs.front().submit;
  if (!p.gantt.empty()) {
    sim::GanttOptions g;
    g.origin = origin;
    g.from = p.from >= 0 ? p.from : 0;
    g.to = p.to >= 0 ? p.to : g.from + 86400;  // default: one day
    g.unix_start = trace.unix_start;
    g.cores_per_node = cores_per_node;
    g.title = title + ", policy " + policy;
    write_text_file(p.gantt, sim::gantt_svg(r, g));
    const bool any = std::any_of(r.segments.begin(), r.segments.end(), [&](const sim::Segment& s) {
      return s.end - origin > g.from && s.start - origin < g.to;
    });
    if (!any)
      std::fprintf(stderr, "corral sim: --gantt: no job ran from %llds to %llds after the first submit (the replay "
                   "ends %llds after it)\n",
                   static_cast<long long>(g.from), static_cast<long long>(g.to), static_cast<long long>(r.makespan));
  }
  if (!p.timeline.empty()) {
    sim::TimelineOptions t;
    t.unix_start = trace.unix_start;
    t.title = title;
    t.policy = policy;
    write_text_file(p.timeline, sim::timeline_svg(r, t));
  }
}

std::string base_name(const std::string& path) {
  const std::size_t k = path.find_last_of('/');
  return k == std::string::npos ? path : path.substr(k + 1);
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
  f << text;
  f.close();
  if (!f) throw std::runtime_error("cannot write '" + path + "'");
}

}  // namespace corral::cli
