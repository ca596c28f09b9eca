#include "timeline.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "simcuda.h"

namespace simcuda {

Timeline::Timeline() {
  int n = config().device_count;
  devices_.resize(n);
  for (int d = 0; d < n; ++d) {
    Stream s;
    s.info.device = d;
    s.info.legacy = true;
    streams_[legacy_stream(d)] = s;
  }
  // Legacy streams own ids 1..kMaxDeviceCount whatever the device count.
  next_id_ = uint64_t(kMaxDeviceCount) + 1;
}

Timeline::Stream* Timeline::find_stream_locked(StreamId id) {
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : &it->second;
}

Timeline::Event* Timeline::find_event_locked(EventId id) {
  auto it = events_.find(id);
  return it == events_.end() ? nullptr : &it->second;
}

Status Timeline::create_stream(int device, unsigned flags, int priority, bool per_thread,
                               StreamId* out) {
  if (out == nullptr || (flags & ~kStreamNonBlocking) != 0) return Status::kInvalidValue;
  Lock lock(mu_);
  if (device < 0 || size_t(device) >= devices_.size()) return Status::kInvalidDevice;
  Stream s;
  s.info.device = device;
  s.info.flags = flags;
  s.info.priority = priority;
  s.info.per_thread = per_thread;
  StreamId id = next_id_++;
  streams_[id] = s;
  *out = id;
  return Status::kOk;
}

Status Timeline::destroy_stream(StreamId id) {
  Lock lock(mu_);
  auto it = streams_.find(id);
  if (it == streams_.end() || it->second.info.legacy) return Status::kInvalidHandle;
  streams_.erase(it);
  return Status::kOk;
}

Status Timeline::stream_info(StreamId id, StreamInfo* out) {
  Lock lock(mu_);
  Stream* s = find_stream_locked(id);
  if (s == nullptr) return Status::kInvalidHandle;
  if (out != nullptr) *out = s->info;
  return Status::kOk;
}

OpTimes Timeline::submit_locked(StreamId id, Stream& s, Work work, uint64_t not_before_ns, uint64_t now) {
  DeviceState& d = devices_[s.info.device];
  uint64_t start = std::max({now, s.tail_end_ns, not_before_ns});
  bool blocking = (s.info.flags & kStreamNonBlocking) == 0;
  // The legacy default stream waits for all blocking streams of its device, and they wait for it.
  if (s.info.legacy) {
    start = std::max(start, d.blocking_end_ns);
  } else if (blocking) {
    start = std::max(start, d.legacy_end_ns);
  }
  uint64_t end = start + work.duration_ns;
  OpKey key{end, ++next_seq_};
  s.tail_end_ns = end;
  s.last = key;
  if (s.info.legacy) {
    d.legacy_end_ns = end;
  } else if (blocking) {
    d.blocking_end_ns = std::max(d.blocking_end_ns, end);
  }
  d.last = std::max(d.last, key);
  last_all_ = std::max(last_all_, key);
  queue_.emplace(key, Op{s.info.device, id, start, std::move(work)});
  ensure_worker_locked();
  cv_.notify_all();
  return OpTimes{key, start};
}

Status Timeline::submit(StreamId stream, Work work, OpTimes* times) {
  Lock lock(mu_);
  Stream* s = find_stream_locked(stream);
  if (s == nullptr) return Status::kInvalidHandle;
  OpTimes t = submit_locked(stream, *s, std::move(work), 0, now_ns());
  if (times != nullptr) *times = t;
  return Status::kOk;
}

Status Timeline::submit_all(StreamId stream, std::vector<Work> works, std::vector<OpTimes>* times) {
  Lock lock(mu_);
  Stream* s = find_stream_locked(stream);
  if (s == nullptr) return Status::kInvalidHandle;
  // One moment for all: each operation starts when the one before it ends, as if queued at once.
  const uint64_t now = now_ns();
  for (Work& work : works) {
    OpTimes t = submit_locked(stream, *s, std::move(work), 0, now);
    if (times != nullptr) times->push_back(t);
  }
  return Status::kOk;
}

Status Timeline::query_stream(StreamId stream) {
  Lock lock(mu_);
  Stream* s = find_stream_locked(stream);
  if (s == nullptr) return Status::kInvalidHandle;
  return s->last <= completed_ ? Status::kOk : Status::kNotReady;
}

Status Timeline::synchronize_stream(StreamId stream) {
  Lock lock(mu_);
  Stream* s = find_stream_locked(stream);
  if (s == nullptr) return Status::kInvalidHandle;
  wait_locked(s->last);
  return Status::kOk;
}

void Timeline::synchronize_device(int device) {
  Lock lock(mu_);
  if (device < 0 || size_t(device) >= devices_.size()) return;
  wait_locked(devices_[device].last);
}

void Timeline::synchronize_all() {
  Lock lock(mu_);
  wait_locked(last_all_);
}

Status Timeline::create_event(int device, unsigned flags, EventId* out) {
  if (out == nullptr) return Status::kInvalidValue;
  Lock lock(mu_);
  if (device < 0 || size_t(device) >= devices_.size()) return Status::kInvalidDevice;
  Event e;
  e.info.device = device;
  e.info.flags = flags;
  EventId id = next_id_++;
  events_[id] = e;
  *out = id;
  return Status::kOk;
}

Status Timeline::destroy_event(EventId id) {
  Lock lock(mu_);
  return events_.erase(id) == 1 ? Status::kOk : Status::kInvalidHandle;
}

Status Timeline::event_info(EventId id, EventInfo* out) {
  Lock lock(mu_);
  Event* e = find_event_locked(id);
  if (e == nullptr) return Status::kInvalidHandle;
  if (out != nullptr) *out = e->info;
  return Status::kOk;
}

Status Timeline::record_event(EventId event, StreamId stream, OpTimes* times) {
  Lock lock(mu_);
  Event* e = find_event_locked(event);
  Stream* s = find_stream_locked(stream);
  if (e == nullptr || s == nullptr || e->info.device != s->info.device) {
    return Status::kInvalidHandle;
  }
  OpTimes t = submit_locked(stream, *s, Work{OpKind::kEventRecord, 0, {}, {}}, 0, now_ns());
  e->info.recorded = true;
  e->time_ns = t.start_ns;
  e->key = t.key;
  if (times != nullptr) *times = t;
  return Status::kOk;
}

Status Timeline::stream_wait_event(StreamId stream, EventId event) {
  Lock lock(mu_);
  Event* e = find_event_locked(event);
  Stream* s = find_stream_locked(stream);
  if (e == nullptr || s == nullptr) return Status::kInvalidHandle;
  if (!e->info.recorded) return Status::kOk;
  submit_locked(stream, *s, Work{OpKind::kStreamWait, 0, {}, {}}, e->time_ns, now_ns());
  return Status::kOk;
}

Status Timeline::query_event(EventId event) {
  Lock lock(mu_);
  Event* e = find_event_locked(event);
  if (e == nullptr) return Status::kInvalidHandle;
  if (!e->info.recorded) return Status::kOk;
  return e->key <= completed_ ? Status::kOk : Status::kNotReady;
}

Status Timeline::synchronize_event(EventId event) {
  Lock lock(mu_);
  Event* e = find_event_locked(event);
  if (e == nullptr) return Status::kInvalidHandle;
  if (e->info.recorded) wait_locked(e->key);
  return Status::kOk;
}

Status Timeline::elapsed_ns(EventId start, EventId end, int64_t* out) {
  if (out == nullptr) return Status::kInvalidValue;
  Lock lock(mu_);
  Event* a = find_event_locked(start);
  Event* b = find_event_locked(end);
  if (a == nullptr || b == nullptr || !a->info.recorded || !b->info.recorded ||
      ((a->info.flags | b->info.flags) & kEventDisableTiming) != 0) {
    return Status::kInvalidHandle;
  }
  if (completed_ < a->key || completed_ < b->key) return Status::kNotReady;
  *out = int64_t(b->time_ns) - int64_t(a->time_ns);
  return Status::kOk;
}

void Timeline::reset_device(int device) {
  Lock lock(mu_);
  if (device < 0 || size_t(device) >= devices_.size()) return;
  // The effect in flight may write into memory the reset is about to free.
  while (in_flight_ && !(worker_running_ && pthread_equal(worker_, pthread_self()))) cv_.wait(mu_);
  for (auto& [key, op] : queue_) {
    if (op.device == device) op.work.effect = nullptr;
  }
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (it->second.info.device != device) {
      ++it;
    } else if (it->second.info.legacy) {
      it->second.tail_end_ns = 0;
      it->second.last = OpKey{};
      ++it;
    } else {
      it = streams_.erase(it);
    }
  }
  std::erase_if(events_, [device](const auto& kv) { return kv.second.info.device == device; });
  devices_[device] = DeviceState{};
  last_all_ = OpKey{};
  for (const DeviceState& d : devices_) last_all_ = std::max(last_all_, d.last);
}

bool Timeline::complete(OpKey key) {
  Lock lock(mu_);
  return key <= completed_;
}

void Timeline::wait(OpKey key) {
  Lock lock(mu_);
  wait_locked(key);
}

void Timeline::wait_locked(OpKey key) {
  while (completed_ < key) {
    ensure_worker_locked();
    if (worker_running_ || in_flight_) {
      cv_.wait(mu_);
      continue;
    }
    // No device thread (the process is exiting, or one could not be started): this thread drives
    // the device until its operation is complete.
    uint64_t next_due;
    if (run_due_locked(&next_due)) continue;
    if (next_due == std::numeric_limits<uint64_t>::max()) {
      cv_.wait(mu_);
    } else {
      cv_.wait_until(mu_, next_due);
    }
  }
}

bool Timeline::run_due_locked(uint64_t* next_due_ns) {
  if (queue_.empty()) {
    *next_due_ns = std::numeric_limits<uint64_t>::max();
    return false;
  }
  auto it = queue_.begin();
  if (it->first.end_ns > now_ns()) {
    *next_due_ns = it->first.end_ns;
    return false;
  }
  auto node = queue_.extract(it);
  Op& op = node.mapped();
  // Reported before the operation counts as complete, so that a synchronising call that returns has
  // its operations' records already handed to the profiler, as with real CUPTI after a sync.
  const bool report = op.work.info != nullptr && activity::active();
  if (op.work.effect || report) {
    in_flight_ = true;
    mu_.unlock();
    if (op.work.effect) op.work.effect();
    if (report) activity::report_op(*op.work.info, op.start_ns, node.key().end_ns, op.device, op.stream);
    mu_.lock();
    in_flight_ = false;
  }
  completed_ = node.key();
  cv_.notify_all();
  return true;
}

void Timeline::ensure_worker_locked() {
  if (worker_running_ || shutdown_) return;
  // Signals meant for the application must not be delivered to the device thread.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&worker_, nullptr, &Timeline::worker_main, this);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) return;  // waiters drive the device themselves
  worker_running_ = true;
  if (!exit_hook_registered_) {
    // Registered now rather than at load time so that it runs before the destructors of objects the
    // application built before its first CUDA call, whose memory queued copies may still target.
    exit_hook_registered_ = std::atexit(&Timeline::shutdown_at_exit) == 0;
  }
}

void* Timeline::worker_main(void* self) {
  pthread_setname_np(pthread_self(), "simcuda-device");
  static_cast<Timeline*>(self)->worker_loop();
  return nullptr;
}

void Timeline::worker_loop() {
  mu_.lock();
  while (!shutdown_) {
    uint64_t next_due;
    if (run_due_locked(&next_due)) continue;
    if (next_due == std::numeric_limits<uint64_t>::max()) {
      cv_.wait(mu_);
    } else {
      cv_.wait_until(mu_, next_due);
    }
  }
  worker_running_ = false;
  cv_.notify_all();
  mu_.unlock();
}

void Timeline::shutdown() {
  mu_.lock();
  shutdown_ = true;
  bool join = worker_running_ && !pthread_equal(worker_, pthread_self());
  pthread_t worker = worker_;
  cv_.notify_all();
  mu_.unlock();
  if (join) pthread_join(worker, nullptr);
}

void Timeline::shutdown_at_exit() { timeline().shutdown(); }

void Timeline::prepare_fork() {
  mu_.lock();
  // The child gets a snapshot of memory: let the effect in flight finish so it is all or nothing.
  while (in_flight_ && !(worker_running_ && pthread_equal(worker_, pthread_self()))) cv_.wait(mu_);
}

void Timeline::parent_after_fork() { mu_.unlock(); }

void Timeline::child_after_fork() {
  mu_.reinit_in_child();
  cv_.reinit_in_child();
  // Only the forking thread exists in the child; unless it is the device thread itself (a host
  // function that forked), a new device thread starts with the next submission or wait.
  if (worker_running_ && !pthread_equal(worker_, pthread_self())) worker_running_ = false;
}

Timeline& timeline() {
  // Never destroyed: the device thread and exit-time waits use it until the process is gone.
  static Timeline* t = new Timeline;
  return *t;
}

}  // namespace simcuda
