// Mutex and condition variable over raw pthread objects: a forked child re-initialises them (its copy
// may have been held or waited on by threads that no longer exist), which std::mutex does not allow,
// and the condition variable waits on CLOCK_MONOTONIC, the device clock.
#pragma once

#include <pthread.h>
#include <time.h>

#include <cstdint>

namespace simcuda {

inline uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

class Mutex {
 public:
  Mutex() { pthread_mutex_init(&m_, nullptr); }
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  ~Mutex() { pthread_mutex_destroy(&m_); }
  void lock() { pthread_mutex_lock(&m_); }
  void unlock() { pthread_mutex_unlock(&m_); }
  // Only in a forked child, whose copy may be marked as held by a thread of the parent.
  void reinit_in_child() { pthread_mutex_init(&m_, nullptr); }
  pthread_mutex_t* native() { return &m_; }

 private:
  pthread_mutex_t m_;
};

class Lock {
 public:
  explicit Lock(Mutex& m) : m_(m) { m_.lock(); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
  ~Lock() { m_.unlock(); }

 private:
  Mutex& m_;
};

class CondVar {
 public:
  CondVar() { init(); }
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;
  ~CondVar() { pthread_cond_destroy(&c_); }
  void wait(Mutex& m) { pthread_cond_wait(&c_, m.native()); }
  // Waits until notified or until CLOCK_MONOTONIC reaches deadline_ns.
  void wait_until(Mutex& m, uint64_t deadline_ns) {
    timespec t{time_t(deadline_ns / 1000000000ull), long(deadline_ns % 1000000000ull)};
    pthread_cond_timedwait(&c_, m.native(), &t);
  }
  void notify_all() { pthread_cond_broadcast(&c_); }
  void reinit_in_child() { init(); }

 private:
  void init() {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&c_, &a);
    pthread_condattr_destroy(&a);
  }
  pthread_cond_t c_;
};

}  // namespace simcuda
