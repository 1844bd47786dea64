#include "coordinator/service/raft_io.hpp"

#include <algorithm>
#include <cstring>

#include "coordinator/service/raft_codec.hpp"

namespace corral::service {
namespace {

void* raft_copy(const std::string& data) {
  void* p = raft_malloc(data.empty() ? 1 : data.size());
  if (p != nullptr && !data.empty()) std::memcpy(p, data.data(), data.size());
  return p;
}

DiskEntry disk_entry(const raft_entry& e) {
  return DiskEntry{e.term, e.type,
                   std::string(static_cast<const char*>(e.buf.base), e.buf.len)};
}

}  // namespace

EnvIo::EnvIo(Env& env, RaftDisk& disk)
    : env_(env), disk_(disk), alive_(std::make_shared<EnvIo*>(this)) {
  io_.version = 2;
  io_.impl = this;
  io_.init = m_init;
  io_.close = m_close;
  io_.load = m_load;
  io_.start = m_start;
  io_.bootstrap = m_bootstrap;
  io_.recover = m_recover;
  io_.set_term = m_set_term;
  io_.set_vote = m_set_vote;
  io_.send = m_send;
  io_.append = m_append;
  io_.truncate = m_truncate;
  io_.snapshot_put = m_snapshot_put;
  io_.snapshot_get = m_snapshot_get;
  io_.time = m_time;
  io_.random = m_random;
  io_.async_work = m_async_work;
}

EnvIo::~EnvIo() {
  if (!closed_) env_.listen({});
}

void EnvIo::later(Finish finish) {
  std::uint64_t key = next_req_++;
  pending_.emplace(key, std::move(finish));
  std::weak_ptr<EnvIo*> w = alive_;
  env_.post(0, [w, key] {
    auto p = w.lock();
    if (!p) return;
    EnvIo* s = *p;
    auto it = s->pending_.find(key);
    if (it == s->pending_.end()) return;
    Finish f = std::move(it->second);
    s->pending_.erase(it);
    f(0);
  });
}

void EnvIo::enqueue_disk(DiskOp op) {
  disk_queue_.push_back(std::move(op));
  if (!disk_busy_) next_disk();
}

void EnvIo::next_disk() {
  if (disk_queue_.empty() || closed_) {
    disk_busy_ = false;
    return;
  }
  disk_busy_ = true;
  std::weak_ptr<EnvIo*> w = alive_;
  env_.post(env_.disk_latency_ms(), [w] {
    auto p = w.lock();
    if (!p || (*p)->closed_) return;
    EnvIo* s = *p;
    if (s->disk_queue_.front().append) {
      for (auto& [finish, status] : s->append_run())
        if (finish) finish(status);
    } else {
      DiskOp op = std::move(s->disk_queue_.front());
      s->disk_queue_.pop_front();
      int status = op.write();
      if (op.finish) op.finish(status);
    }
    s->next_disk();
  });
}

// A burst of proposals queues many small appends behind the one being written;
// each on its own would cost a sync. Written as one batch they are durable
// together, and each completes with the batch's status.
std::vector<std::pair<EnvIo::Finish, int>> EnvIo::append_run() {
  std::deque<DiskEntry> all;
  std::vector<std::pair<Finish, int>> done;
  while (!disk_queue_.empty() && disk_queue_.front().append) {
    DiskOp op = std::move(disk_queue_.front());
    disk_queue_.pop_front();
    for (auto& e : *op.append) all.push_back(std::move(e));
    done.emplace_back(std::move(op.finish), 0);
  }
  std::uint64_t at = disk_.first_index + disk_.entries.size();
  int status = durable([&](DiskWriter& f) { f.append(at, all); });
  if (status == 0)
    for (auto& e : all) disk_.entries.push_back(std::move(e));
  for (auto& d : done) d.second = status;
  // A failed batch completes newest first, as a close cancels (see m_close).
  if (status != 0) std::reverse(done.begin(), done.end());
  return done;
}

int EnvIo::durable(const std::function<void(DiskWriter&)>& write) {
  if (disk_.files == nullptr) return 0;
  try {
    write(*disk_.files);
    return 0;
  } catch (const std::exception& e) {
    last_error_ = e.what();
    return RAFT_IOERR;
  }
}

int EnvIo::m_init(raft_io* io, raft_id id, const char* address) {
  self(io)->id_ = id;
  self(io)->address_ = address;
  return 0;
}

void EnvIo::m_close(raft_io* io, raft_io_close_cb cb) {
  EnvIo* s = self(io);
  s->closed_ = true;
  s->env_.listen({});
  // Raft is already unavailable: its waiting requests learn they were
  // cancelled (and free their memory) before the close completes.
  auto pending = std::move(s->pending_);
  s->pending_.clear();
  for (auto& [key, f] : pending) f(RAFT_CANCELED);
  // Newest first: libraft truncates its log from a failed append's first
  // entry, so an older append cancelled first takes the newer one's entries
  // with it, and the newer one's cancel then releases them again (a crash).
  auto disk = std::move(s->disk_queue_);
  s->disk_queue_.clear();
  for (auto op = disk.rbegin(); op != disk.rend(); ++op)
    if (op->finish) op->finish(RAFT_CANCELED);
  if (cb != nullptr) cb(io);
}

raft_snapshot* EnvIo::copy_snapshot() const {
  const DiskSnapshot& d = *disk_.snapshot;
  auto* s = static_cast<raft_snapshot*>(raft_calloc(1, sizeof(raft_snapshot)));
  auto* bufs = static_cast<raft_buffer*>(raft_malloc(sizeof(raft_buffer)));
  void* data = raft_copy(d.data);
  if (s == nullptr || bufs == nullptr || data == nullptr ||
      configuration_of(d.conf, s->configuration) != 0) {
    raft_free(s);
    raft_free(bufs);
    raft_free(data);
    return nullptr;
  }
  s->index = d.index;
  s->term = d.term;
  s->configuration_index = d.conf_index;
  bufs[0].base = data;
  bufs[0].len = d.data.size();
  s->bufs = bufs;
  s->n_bufs = 1;
  return s;
}

int EnvIo::m_load(raft_io* io, raft_term* term, raft_id* vote, raft_snapshot** snapshot,
                  raft_index* start_index, raft_entry** entries, size_t* n_entries) {
  EnvIo* s = self(io);
  const RaftDisk& d = s->disk_;
  *term = d.term;
  *vote = d.vote;
  *snapshot = nullptr;
  if (d.snapshot) {
    *snapshot = s->copy_snapshot();
    if (*snapshot == nullptr) return RAFT_NOMEM;
  }
  *start_index = d.first_index;
  *n_entries = d.entries.size();
  *entries = nullptr;
  if (d.entries.empty()) return 0;
  std::size_t total = 0;
  for (const auto& e : d.entries) total += e.data.size();
  auto* batch = static_cast<char*>(raft_malloc(total == 0 ? 1 : total));
  auto* out = static_cast<raft_entry*>(raft_calloc(d.entries.size(), sizeof(raft_entry)));
  if (batch == nullptr || out == nullptr) {
    raft_free(batch);
    raft_free(out);
    if (*snapshot != nullptr) {
      raft_configuration_close(&(*snapshot)->configuration);
      raft_free((*snapshot)->bufs[0].base);
      raft_free((*snapshot)->bufs);
      raft_free(*snapshot);
      *snapshot = nullptr;
    }
    return RAFT_NOMEM;
  }
  std::size_t off = 0;
  for (std::size_t i = 0; i < d.entries.size(); ++i) {
    const auto& e = d.entries[i];
    out[i].term = e.term;
    out[i].type = e.type;
    out[i].buf.base = batch + off;
    out[i].buf.len = e.data.size();
    out[i].batch = batch;
    if (!e.data.empty()) std::memcpy(batch + off, e.data.data(), e.data.size());
    off += e.data.size();
  }
  *entries = out;
  return 0;
}

int EnvIo::m_start(raft_io* io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv) {
  EnvIo* s = self(io);
  s->tick_ms_ = msecs;
  s->tick_cb_ = tick;
  s->recv_cb_ = recv;
  std::weak_ptr<EnvIo*> w = s->alive_;
  s->env_.listen([w](std::string_view bytes) {
    if (auto p = w.lock()) (*p)->receive(bytes);
  });
  s->schedule_tick();
  return 0;
}

void EnvIo::schedule_tick() {
  std::weak_ptr<EnvIo*> w = alive_;
  env_.post(tick_ms_, [w] {
    auto p = w.lock();
    if (!p || (*p)->closed_) return;
    EnvIo* s = *p;
    s->tick_cb_(&s->io_);
    if (s->closed_) return;
    s->schedule_tick();
    if (s->after_) s->after_();
  });
}

void EnvIo::receive(std::string_view bytes) {
  if (closed_ || recv_cb_ == nullptr) return;
  raft_message m;
  std::string address;
  if (!decode_raft_message(bytes, m, address)) return;  // not raft's: dropped, as a lost message
  // What the leader's message would verify if raft accepts it: entries up to
  // prev_log_index + n_entries, or the whole snapshot.
  std::uint64_t term = 0, upto = 0;
  if (m.type == RAFT_IO_APPEND_ENTRIES) {
    term = m.append_entries.term;
    upto = m.append_entries.prev_log_index + m.append_entries.n_entries;
  } else if (m.type == RAFT_IO_INSTALL_SNAPSHOT) {
    term = m.install_snapshot.term;
    upto = m.install_snapshot.last_index;
  }
  if (term == 0) {
    recv_cb_(&io_, &m);
  } else {
    if (term != verified_term_) {
      verified_term_ = term;
      verified_ = 0;
    }
    verifying_ = Verifying{true, false, upto};
    recv_cb_(&io_, &m);  // raft owns the entries and snapshot from here on
    if (verifying_.appended) verified_ = std::max(verified_, upto);
    verifying_ = Verifying{};
  }
  if (!closed_ && after_) after_();
}

int EnvIo::m_bootstrap(raft_io* io, const raft_configuration* conf) {
  EnvIo* s = self(io);
  RaftDisk& d = s->disk_;
  if (d.term != 0 || !d.entries.empty() || d.snapshot) return RAFT_CANTBOOTSTRAP;
  raft_buffer buf{};
  int rv = raft_configuration_encode(conf, &buf);
  if (rv != 0) return rv;
  std::deque<DiskEntry> first{DiskEntry{1, RAFT_CHANGE, std::string(static_cast<char*>(buf.base), buf.len)}};
  raft_free(buf.base);
  rv = s->durable([&](DiskWriter& f) {
    f.append(1, first);
    f.save_term(1, 0);
  });
  if (rv != 0) return rv;
  d.entries = std::move(first);
  d.term = 1;
  d.vote = 0;
  d.first_index = 1;
  return 0;
}

int EnvIo::m_recover(raft_io*, const raft_configuration*) { return RAFT_INVALID; }

int EnvIo::m_set_term(raft_io* io, raft_term term) {
  if (int rv = self(io)->durable([&](DiskWriter& f) { f.save_term(term, 0); })) return rv;
  self(io)->disk_.term = term;
  self(io)->disk_.vote = 0;
  return 0;
}

int EnvIo::m_set_vote(raft_io* io, raft_id id) {
  EnvIo* s = self(io);
  if (int rv = s->durable([&](DiskWriter& f) { f.save_term(s->disk_.term, id); })) return rv;
  s->disk_.vote = id;
  return 0;
}

int EnvIo::m_send(raft_io* io, raft_io_send* req, const raft_message* m, raft_io_send_cb cb) {
  EnvIo* s = self(io);
  raft_message out = *m;
  if (out.type == RAFT_IO_APPEND_ENTRIES_RESULT) s->cap_match(out);
  // Encoded now: raft may release the entries once the callback fired.
  s->env_.send(out.server_id, out.server_address ? out.server_address : "",
               encode_raft_message(s->id_, s->address_, out));
  req->cb = cb;
  s->later([req, cb](int status) {
    if (cb != nullptr) cb(req, status);
  });
  return 0;
}

void EnvIo::cap_match(raft_message& result) {
  raft_append_entries_result& r = result.append_entries_result;
  std::uint64_t snap = disk_.snapshot ? disk_.snapshot->index : 0;
  if (r.rejected != 0 && r.rejected <= snap && verifying_.active && r.term == verified_term_) {
    // libraft rejects an AppendEntries whose prev_log_index lies inside its
    // own snapshot, and the leader then probes ever lower and never gets
    // past it. A snapshot holds only committed entries, the same on every
    // member: answer that everything up to it matches.
    r.rejected = 0;
    r.last_log_index = snap;
    verified_ = std::max(verified_, snap);
    return;
  }
  if (r.rejected != 0) return;
  if (verifying_.active) verified_ = std::max(verified_, verifying_.upto);  // accepted at once
  if (r.term == verified_term_) r.last_log_index = std::min<raft_index>(r.last_log_index, verified_);
}

int EnvIo::m_append(raft_io* io, raft_io_append* req, const raft_entry entries[], unsigned n,
                    raft_io_append_cb cb) {
  EnvIo* s = self(io);
  if (s->verifying_.active) s->verifying_.appended = true;
  req->cb = cb;
  // Copied now: raft keeps the entries alive, but the copy is what the disk holds.
  auto batch = std::make_shared<std::deque<DiskEntry>>();
  for (unsigned i = 0; i < n; ++i) batch->push_back(disk_entry(entries[i]));
  s->enqueue_disk(DiskOp{{},
                         [req, cb](int status) {
                           if (cb != nullptr) cb(req, status);
                         },
                         std::move(batch)});
  return 0;
}

int EnvIo::m_truncate(raft_io* io, raft_index index) {
  EnvIo* s = self(io);
  RaftDisk* d = &s->disk_;
  s->enqueue_disk(DiskOp{[s, d, index] {
                           // Drops every entry from `index` on. Files that
                           // refuse refuse every later write too.
                           if (int rv = s->durable([&](DiskWriter& f) { f.truncate(index); })) return rv;
                           while (!d->entries.empty() &&
                                  d->first_index + d->entries.size() - 1 >= index)
                             d->entries.pop_back();
                           return 0;
                         },
                         {},
                         nullptr});
  return 0;
}

int EnvIo::m_snapshot_put(raft_io* io, unsigned trailing, raft_io_snapshot_put* req,
                          const raft_snapshot* snapshot, raft_io_snapshot_put_cb cb) {
  EnvIo* s = self(io);
  if (s->verifying_.active) s->verifying_.appended = true;  // installing the leader's snapshot
  req->cb = cb;
  auto snap = std::make_shared<DiskSnapshot>();
  snap->index = snapshot->index;
  snap->term = snapshot->term;
  snap->conf = members_of(snapshot->configuration);
  snap->conf_index = snapshot->configuration_index;
  for (unsigned i = 0; i < snapshot->n_bufs; ++i)
    snap->data.append(static_cast<const char*>(snapshot->bufs[i].base), snapshot->bufs[i].len);
  RaftDisk* d = &s->disk_;
  auto write = [s, d, snap, trailing] {
    if (int rv = s->durable([&](DiskWriter& f) { f.put_snapshot(*snap, trailing); })) return rv;
    d->snapshot = *snap;
    if (trailing == 0) {  // installed from the leader: the log starts after it
      d->entries.clear();
      d->first_index = snap->index + 1;
      return 0;
    }
    // Keeps the last `trailing` entries the snapshot covers.
    std::uint64_t first = first_after_snapshot(d->first_index, d->entries.size(), snap->index, trailing);
    while (d->first_index < first) {
      d->entries.pop_front();
      ++d->first_index;
    }
    return 0;
  };
  s->enqueue_disk(DiskOp{write,
                         [req, cb](int status) {
                           if (cb != nullptr) cb(req, status);
                         },
                         nullptr});
  return 0;
}

int EnvIo::m_snapshot_get(raft_io* io, raft_io_snapshot_get* req, raft_io_snapshot_get_cb cb) {
  EnvIo* s = self(io);
  req->cb = cb;
  s->later([s, req, cb](int status) {
    raft_snapshot* snap = nullptr;
    if (status == 0 && s->disk_.snapshot) snap = s->copy_snapshot();
    if (status == 0 && snap == nullptr) status = RAFT_NOTFOUND;
    cb(req, snap, status);
  });
  return 0;
}

raft_time EnvIo::m_time(raft_io* io) { return self(io)->env_.now_ms(); }

int EnvIo::m_random(raft_io* io, int min, int max) { return self(io)->env_.random(min, max); }

int EnvIo::m_async_work(raft_io* io, raft_io_async_work* req, raft_io_async_work_cb cb) {
  req->cb = cb;
  self(io)->later([req, cb](int status) {
    if (status == 0) status = req->work(req);
    cb(req, status);
  });
  return 0;
}

}  // namespace corral::service
