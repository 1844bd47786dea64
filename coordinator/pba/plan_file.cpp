#include "coordinator/pba/plan_file.hpp"

#include "coordinator/names.hpp"  // find_duration

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace corral::pba {

bool ProjectDef::has_step(const std::string& step) const {
  for (const auto& f : flows)
    if (std::find(f.steps.begin(), f.steps.end(), step) != f.steps.end()) return true;
  return false;
}

const ProjectDef* ProjectPlan::project(const std::string& name) const {
  for (const auto& p : projects)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<const Allocation*> ProjectPlan::allocations_at(Time t) const {
  const IsoWeek w = iso_week(t);
  std::vector<const Allocation*> out;
  for (const auto& a : allocations)
    if (a.week == w && a.slots > 0) out.push_back(&a);
  return out;
}

int ProjectPlan::allocated_slots(const std::string& project, Time t) const {
  int n = 0;
  for (const Allocation* a : allocations_at(t))
    if (a->project == project) n += a->slots;
  return n;
}

std::string ProjectPlan::project_of(const std::string& user, const std::string& group) const {
  for (const auto& p : projects)
    if (!user.empty() && p.users.count(user)) return p.name;
  for (const auto& p : projects)
    if (!group.empty() && p.groups.count(group)) return p.name;
  return {};
}

std::optional<std::string> check_horizon(IsoWeek w, Time now, int horizon_weeks) {
  const long long ahead = week_index(w) - week_index(now);
  if (ahead > horizon_weeks)
    return "allocation for " + format_iso_week(w) + " is " + std::to_string(ahead) +
           " weeks ahead of " + format_iso_week(iso_week(now)) + "; allocations may be planned at most " +
           std::to_string(horizon_weeks) + " weeks ahead";
  return std::nullopt;
}

std::optional<std::string> set_allocation(ProjectPlan& plan, Allocation a, Time now) {
  const ProjectDef* p = plan.project(a.project);
  if (!p) return "unknown project '" + a.project + "'";
  if (a.slots < 0) return "negative slot count " + std::to_string(a.slots);
  if (!a.step.empty() && !p->flows.empty() && !p->has_step(a.step))
    return "project '" + a.project + "' has no flow step '" + a.step + "'";
  if (auto e = check_horizon(a.week, now, plan.horizon_weeks)) return e;
  auto it = std::find_if(plan.allocations.begin(), plan.allocations.end(),
                         [&](const Allocation& x) { return x.same_key(a); });
  if (a.slots == 0) {
    if (it != plan.allocations.end()) plan.allocations.erase(it);
  } else if (it != plan.allocations.end()) {
    *it = std::move(a);
  } else {
    plan.allocations.push_back(std::move(a));
  }
  return std::nullopt;
}

namespace {

std::vector<std::string> split_ws(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream is(line);
  std::string w;
  while (is >> w) out.push_back(w);
  return out;
}

bool parse_int(const std::string& s, long long& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end && *end == '\0';
}

bool parse_double(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtod(s.c_str(), &end);
  return errno == 0 && end && *end == '\0' && v == v;
}

// "key=value" -> (key, value); no '=' -> false.
bool split_kv(const std::string& tok, std::string& k, std::string& v) {
  const auto eq = tok.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  k = tok.substr(0, eq);
  v = tok.substr(eq + 1);
  return true;
}

struct Parser {
  const PlanParseOptions& opt;
  PlanParseResult res;
  int line = 0;

  void err(const std::string& msg) { res.errors.push_back("line " + std::to_string(line) + ": " + msg); }

  ProjectDef* need_project(const std::string& name) {
    for (auto& p : res.plan.projects)
      if (p.name == name) return &p;
    err("unknown project '" + name + "' (declare it first with 'project " + name + "')");
    return nullptr;
  }

  // WEEK: 2026-W48, or +N weeks after the origin's week.
  std::optional<IsoWeek> week(const std::string& s) {
    if (!s.empty() && s[0] == '+') {
      long long n;
      if (!parse_int(s.substr(1), n) || n < 0 || n > 100000) {
        err("bad relative week '" + s + "' (expected +N, N >= 0)");
        return std::nullopt;
      }
      return add_weeks(iso_week(opt.origin), n);
    }
    std::string e;
    auto w = parse_iso_week(s, &e);
    if (!w) err(e);
    return w;
  }

  // DEADLINE: absolute seconds, +DURATION from the origin, or an ISO week
  // (the deadline is the end of that week).
  std::optional<Time> deadline(const std::string& s) {
    if (!s.empty() && s[0] == '+') {
      auto d = find_duration(s.substr(1));
      if (!d) err("bad relative deadline '" + s + "' (expected +DURATION, e.g. +36h)");
      else return opt.origin + *d;
      return std::nullopt;
    }
    if (s.find('W') != std::string::npos || s.find('w') != std::string::npos) {
      std::string e;
      if (auto w = parse_iso_week(s, &e)) return week_start(*w) + kWeek;
      err(e);
      return std::nullopt;
    }
    long long v;
    if (parse_int(s, v) && v >= 0) return v;
    err("bad deadline '" + s + "' (expected seconds, +DURATION or an ISO week like 2026-W50)");
    return std::nullopt;
  }

  void project(const std::vector<std::string>& t) {
    if (t.size() != 2) return err("usage: project NAME");
    for (const auto& p : res.plan.projects)
      if (p.name == t[1]) return err("project '" + t[1] + "' declared twice");
    ProjectDef p;
    p.name = t[1];
    res.plan.projects.push_back(std::move(p));
  }

  void member(const std::vector<std::string>& t) {
    if (t.size() < 3) return err("usage: member PROJECT u:ID|g:ID|user:NAME|group:NAME|NAME ...");
    ProjectDef* p = need_project(t[1]);
    if (!p) return;
    for (std::size_t i = 2; i < t.size(); ++i) {
      const std::string& m = t[i];
      auto pre = [&](const char* x) { return m.rfind(x, 0) == 0; };
      std::string id;
      bool group = false;
      if (pre("u:")) id = m.substr(2);
      else if (pre("user:")) id = m.substr(5);
      else if (pre("g:")) { id = m.substr(2); group = true; }
      else if (pre("group:")) { id = m.substr(6); group = true; }
      else if (m.find(':') != std::string::npos) { err("bad member '" + m + "' (use u:ID, g:ID, user:NAME, group:NAME or a user name)"); continue; }
      else id = m;
      if (id.empty()) { err("empty member id in '" + m + "'"); continue; }
      (group ? p->groups : p->users).insert(id);
    }
  }

  void flow(const std::vector<std::string>& t) {
    if (t.size() < 4) return err("usage: flow PROJECT FLOW STEP [STEP ...]");
    ProjectDef* p = need_project(t[1]);
    if (!p) return;
    for (const auto& f : p->flows)
      if (f.name == t[2]) return err("flow '" + t[2] + "' of project '" + t[1] + "' declared twice");
    Flow f;
    f.name = t[2];
    f.steps.assign(t.begin() + 3, t.end());
    p->flows.push_back(std::move(f));
  }

  void alloc(const std::vector<std::string>& t) {
    if (t.size() < 4 || t.size() > 7)
      return err("usage: alloc PROJECT WEEK SLOTS [user=U] [group=G] [step=S]");
    ProjectDef* p = need_project(t[1]);
    auto w = week(t[2]);
    long long slots;
    bool ok = p && w;
    if (!parse_int(t[3], slots) || slots < 0 || slots > 100000000) {
      err("bad slot count '" + t[3] + "' (expected a whole number >= 0)");
      ok = false;
    }
    Allocation a;
    for (std::size_t i = 4; i < t.size(); ++i) {
      std::string k, v;
      if (!split_kv(t[i], k, v) || v.empty()) {
        err("bad narrowing '" + t[i] + "' (expected user=U, group=G or step=S)");
        ok = false;
        continue;
      }
      std::string* slot = k == "user" ? &a.user : k == "group" ? &a.group : k == "step" ? &a.step : nullptr;
      if (!slot) { err("unknown narrowing '" + k + "' (expected user, group or step)"); ok = false; continue; }
      if (!slot->empty()) { err("'" + k + "' given twice"); ok = false; continue; }
      // Trace ids may be written as in member lines: user=u:12, group=g:3.
      if ((k == "user" && v.rfind("u:", 0) == 0) || (k == "group" && v.rfind("g:", 0) == 0)) v = v.substr(2);
      *slot = v;
    }
    if (!ok) return;
    if (!a.step.empty() && !p->flows.empty() && !p->has_step(a.step))
      return err("project '" + p->name + "' has no flow step '" + a.step + "'");
    a.project = p->name;
    a.week = *w;
    a.slots = static_cast<int>(slots);
    a.line = line;
    for (const auto& o : res.plan.allocations)
      if (o.same_key(a))
        return err("duplicate allocation for " + a.project + " in " + format_iso_week(a.week) +
                   " (first given on line " + std::to_string(o.line) + ")");
    res.plan.allocations.push_back(std::move(a));
  }

  void sla(const std::vector<std::string>& t) {
    if (t.size() < 3) return err("usage: sla PROJECT velocity | sla PROJECT throughput JOBS DEADLINE");
    ProjectDef* p = need_project(t[1]);
    if (!p) return;
    if (t[2] == "velocity") {
      if (t.size() != 3) return err("usage: sla PROJECT velocity");
      p->sla = Sla{SlaKind::Velocity, 0, 0};
    } else if (t[2] == "throughput") {
      if (t.size() != 5) return err("usage: sla PROJECT throughput JOBS DEADLINE");
      long long n;
      if (!parse_int(t[3], n) || n <= 0 || n > 100000000) return err("bad job count '" + t[3] + "'");
      auto d = deadline(t[4]);
      if (!d) return;
      p->sla = Sla{SlaKind::Throughput, static_cast<int>(n), *d};
    } else {
      err("unknown service level '" + t[2] + "' (expected velocity or throughput)");
    }
  }

  void grant(const std::vector<std::string>& t) {
    if (t.size() < 3 || t.size() > 4) return err("usage: grant PROJECT SU [period=DURATION|week|month|quarter|year]");
    ProjectDef* p = need_project(t[1]);
    double su;
    if (!parse_double(t[2], su) || su < 0) return err("bad service units '" + t[2] + "'");
    Grant g;
    if (t.size() == 4) {
      std::string k, v;
      if (!split_kv(t[3], k, v) || k != "period") return err("bad grant option '" + t[3] + "' (expected period=...)");
      if (v == "week") g.period = kWeek;
      else if (v == "month") g.period = 30 * kDay;
      else if (v == "quarter") g.period = 91 * kDay;
      else if (v == "year") g.period = 365 * kDay;
      else if (auto d = find_duration(v)) g.period = *d;
      else return err("bad period '" + v + "'");
    }
    if (!p) return;
    for (const auto& o : res.plan.grants)
      if (o.project == p->name) return err("second grant for project '" + p->name + "'");
    g.project = p->name;
    g.su = su;
    res.plan.grants.push_back(std::move(g));
  }

  void queue(const std::vector<std::string>& t) {
    if (t.size() < 2) return err("usage: queue NAME [priority=N] [charge=F] [slots=N] [max_walltime=DUR] [max_cpus=N] [max_mem_mb=N] [max_jobfs_mb=N] [hosts=a,b]");
    for (const auto& q : res.plan.queues)
      if (q.name == t[1]) return err("queue '" + t[1] + "' declared twice");
    Queue q;
    q.name = t[1];
    bool ok = true;
    for (std::size_t i = 2; i < t.size(); ++i) {
      std::string k, v;
      long long n = 0;
      double f = 0;
      if (!split_kv(t[i], k, v)) { err("bad queue option '" + t[i] + "' (expected key=value)"); ok = false; continue; }
      auto int_opt = [&](auto& field) {
        if (parse_int(v, n) && n >= 0 && n <= (1LL << 50)) field = static_cast<std::remove_reference_t<decltype(field)>>(n);
        else { err("bad value for " + k + ": '" + v + "'"); ok = false; }
      };
      if (k == "priority") {
        if (parse_int(v, n) && n > -1000000 && n < 1000000) q.priority = static_cast<int>(n);
        else { err("bad value for priority: '" + v + "'"); ok = false; }
      } else if (k == "charge") {
        if (parse_double(v, f) && f >= 0) q.charge_factor = f;
        else { err("bad value for charge: '" + v + "'"); ok = false; }
      } else if (k == "slots") int_opt(q.slots);
      else if (k == "max_cpus") int_opt(q.max_cpus);
      else if (k == "max_mem_mb") int_opt(q.max_mem_mb);
      else if (k == "max_jobfs_mb") int_opt(q.max_jobfs_mb);
      else if (k == "max_walltime") {
        if (auto d = find_duration(v)) q.max_walltime = *d;
        else { err("bad value for max_walltime: '" + v + "'"); ok = false; }
      } else if (k == "hosts") {
        std::string h;
        std::istringstream is(v);
        while (std::getline(is, h, ','))
          if (!h.empty()) q.hosts.push_back(h);
      } else { err("unknown queue option '" + k + "'"); ok = false; }
    }
    if (ok) res.plan.queues.push_back(std::move(q));
  }

  void horizon(const std::vector<std::string>& t) {
    long long n;
    if (t.size() != 2 || !parse_int(t[1], n) || n < 0 || n > 520) return err("usage: horizon WEEKS (0..520)");
    res.plan.horizon_weeks = static_cast<int>(n);
  }
};

}  // namespace

PlanParseResult parse_plan(const std::string& text, const PlanParseOptions& opt) {
  Parser ps{opt, {}, 0};
  std::istringstream is(text);
  std::string raw;
  while (std::getline(is, raw)) {
    ++ps.line;
    if (const auto h = raw.find('#'); h != std::string::npos) raw.erase(h);
    const auto t = split_ws(raw);
    if (t.empty()) continue;
    const std::string& d = t[0];
    if (d == "project") ps.project(t);
    else if (d == "member") ps.member(t);
    else if (d == "flow") ps.flow(t);
    else if (d == "alloc") ps.alloc(t);
    else if (d == "sla") ps.sla(t);
    else if (d == "grant") ps.grant(t);
    else if (d == "queue") ps.queue(t);
    else if (d == "horizon") ps.horizon(t);
    else ps.err("unknown directive '" + d + "' (expected project, member, flow, alloc, sla, grant, queue or horizon)");
  }
  // The horizon rule, once the horizon is known (it may be set anywhere).
  auto& allocs = ps.res.plan.allocations;
  for (auto it = allocs.begin(); it != allocs.end();) {
    if (auto e = check_horizon(it->week, opt.origin, ps.res.plan.horizon_weeks)) {
      ps.res.errors.push_back("line " + std::to_string(it->line) + ": " + *e);
      it = allocs.erase(it);  // rejected, not kept
    } else {
      ++it;
    }
  }
  return std::move(ps.res);
}

}  // namespace corral::pba
