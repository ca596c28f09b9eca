#include "python_frames.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cstring>
#include <type_traits>

#include "interpose.h"
#include "loaded_objects.h"

namespace cutrace::preload {
namespace {

// CPython's C API, as far as frames go. PyObject* and friends are opaque here: the shim is built
// without Python's headers, and these functions have had these signatures since 3.9.
using Object = void*;
struct PythonApi {
  int (*is_initialized)();
  int (*gil_check)();
  Object (*thread_state)();                       // PyThreadState_Get: the GIL holder's
  Object (*thread_frame)(Object);                 // PyThreadState_GetFrame: new reference
  Object (*frame_code)(Object);                   // PyFrame_GetCode: new reference
  Object (*frame_back)(Object);                   // PyFrame_GetBack: new reference
  int (*frame_line)(Object);                      // PyFrame_GetLineNumber
  Object (*get_attr)(Object, const char*);        // PyObject_GetAttrString: new reference
  const char* (*utf8)(Object, long*);             // PyUnicode_AsUTF8AndSize
  void (*inc_ref)(Object);                        // Py_IncRef
  void (*dec_ref)(Object);                        // Py_DecRef
  void (*fetch_error)(Object*, Object*, Object*);  // PyErr_Fetch
  void (*restore_error)(Object, Object, Object);  // PyErr_Restore
  // For --python-sampling: the sampler thread takes the GIL and reads sys._current_frames().
  int (*gil_ensure)();                            // PyGILState_Ensure: PyGILState_STATE
  void (*gil_release)(int);                       // PyGILState_Release
  Object (*sys_object)(const char*);              // PySys_GetObject: borrowed reference
  Object (*call)(Object, Object);                 // PyObject_CallObject: new reference
  int (*dict_next)(Object, long*, Object*, Object*);  // PyDict_Next: borrowed references
  unsigned long (*as_ulong)(Object);              // PyLong_AsUnsignedLong
};

// Looked up once per change of the loaded objects: a program may load libpython late (an embedding
// host's dlopen).
std::atomic<const PythonApi*> g_api{nullptr};
std::atomic<uint64_t> g_looked_at_adds{~uint64_t(0)};
PythonApi g_api_storage;

const PythonApi* python_api() {
  if (const PythonApi* api = g_api.load(std::memory_order_acquire)) return api;
  uint64_t adds = 0, subs = 0;
  elf::load_counts(&adds, &subs);
  if (g_looked_at_adds.exchange(adds, std::memory_order_relaxed) == adds) return nullptr;
  const DlsymFn lookup = real_dlsym();
  if (!lookup) return nullptr;
  PythonApi api{};
  bool all = true;
  auto bind = [&](auto& slot, const char* name) {
    void* f = lookup(RTLD_DEFAULT, name);
    all &= f != nullptr;
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(f);
  };
  bind(api.is_initialized, "Py_IsInitialized");
  bind(api.gil_check, "PyGILState_Check");
  bind(api.thread_state, "PyThreadState_Get");
  bind(api.thread_frame, "PyThreadState_GetFrame");
  bind(api.frame_code, "PyFrame_GetCode");
  bind(api.frame_back, "PyFrame_GetBack");
  bind(api.frame_line, "PyFrame_GetLineNumber");
  bind(api.get_attr, "PyObject_GetAttrString");
  bind(api.utf8, "PyUnicode_AsUTF8AndSize");
  bind(api.inc_ref, "Py_IncRef");
  bind(api.dec_ref, "Py_DecRef");
  bind(api.fetch_error, "PyErr_Fetch");
  bind(api.restore_error, "PyErr_Restore");
  bind(api.gil_ensure, "PyGILState_Ensure");
  bind(api.gil_release, "PyGILState_Release");
  bind(api.sys_object, "PySys_GetObject");
  bind(api.call, "PyObject_CallObject");
  bind(api.dict_next, "PyDict_Next");
  bind(api.as_ulong, "PyLong_AsUnsignedLong");
  if (!all) return nullptr;  // no CPython, or one older than 3.9
  g_api_storage = api;
  g_api.store(&g_api_storage, std::memory_order_release);
  return &g_api_storage;
}

// Code object -> function id. A cached code object is kept alive (one reference), so its address
// cannot be reused by another while it is in the table. Bounded (16 probes); beyond, names are read each time.
constexpr size_t kCodeSlots = 4096;
struct CodeSlot {
  Object code;
  uint64_t id;
};
CodeSlot g_codes[kCodeSlots];  // open addressing on the address
SentNames<8192> g_sent;  // function ids named in this process
// The GIL serialises the callers; the lock also covers a build of CPython without one.
std::atomic_flag g_lock = ATOMIC_FLAG_INIT;

struct Locked {
  Locked() {
    while (g_lock.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~Locked() { g_lock.clear(std::memory_order_release); }
};

// Clears the error indicator, dropping what a lookup of ours left there.
void discard_error(const PythonApi& api) {
  Object type = nullptr, value = nullptr, trace = nullptr;
  api.fetch_error(&type, &value, &trace);
  for (Object o : {type, value, trace})
    if (o) api.dec_ref(o);
}

// The UTF-8 text of attribute `name` of `object`, into `out` (at most `capacity` bytes); its length.
size_t attribute_text(const PythonApi& api, Object object, const char* name, char* out, size_t capacity) {
  Object value = api.get_attr(object, name);
  if (!value) return size_t(-1);
  long length = 0;
  const char* text = api.utf8(value, &length);
  size_t n = 0;
  if (text && length > 0) {
    n = std::min(size_t(length), capacity);
    std::memcpy(out, text, n);
  }
  api.dec_ref(value);
  return text ? n : size_t(-1);
}

// The names of `code`'s function into `text`: "qualified name" NUL "file" (co_qualname from 3.11,
// co_name before); their length. Their hash is the function's id.
size_t function_names(const PythonApi& api, Object code, char (&text)[1024]) {
  size_t name = attribute_text(api, code, "co_qualname", text, 512);
  if (name == size_t(-1)) {
    discard_error(api);  // the AttributeError of a Python older than 3.11
    name = attribute_text(api, code, "co_name", text, 512);
    if (name == size_t(-1)) name = 0;
  }
  text[name] = '\0';
  size_t file = attribute_text(api, code, "co_filename", text + name + 1, sizeof text - name - 1);
  if (file == size_t(-1)) file = 0;
  return name + 1 + file;
}

// The id of `code`'s function, its names sent first when this process has not sent them yet (a
// forked child has sent none, though its code objects are cached).
uint64_t function_id(ThreadState& ts, const PythonApi& api, Object code) {
  const size_t home = size_t((reinterpret_cast<uintptr_t>(code) >> 4) * 0x9E3779B97F4A7C15ull) % kCodeSlots;
  CodeSlot* free_slot = nullptr;
  char text[1024];
  for (size_t i = 0; i < 16; ++i) {
    CodeSlot& slot = g_codes[(home + i) % kCodeSlots];
    if (slot.code == code) {
      if (g_sent.first_sending(slot.id))
        emit_string(ts, abi::StringKind::kPythonFunction, slot.id, text, function_names(api, code, text));
      return slot.id;
    }
    if (!slot.code) {
      free_slot = &slot;
      break;
    }
  }
  const size_t length = function_names(api, code, text);
  const uint64_t id = name_hash(text, length);
  if (free_slot) {
    api.inc_ref(code);
    *free_slot = {code, id};
  }
  if (g_sent.first_sending(id)) emit_string(ts, abi::StringKind::kPythonFunction, id, text, length);
  return id;
}

// The frames from `frame` (a reference this takes over) outwards, at most `capacity`. The caller holds
// the GIL and g_lock.
uint32_t walk_frames(ThreadState& ts, const PythonApi& api, Object frame, abi::PythonFrame* out, uint32_t capacity) {
  uint32_t count = 0;
  while (frame && count < capacity) {
    Object code = api.frame_code(frame);
    if (code) {
      out[count++] = {function_id(ts, api, code), uint64_t(api.frame_line(frame))};
      api.dec_ref(code);
    }
    Object back = api.frame_back(frame);
    api.dec_ref(frame);
    frame = back;
  }
  if (frame) api.dec_ref(frame);
  return count;
}

// --- --python-sampling ---------------------------------------------------------------------------

std::atomic<bool> g_sampler_started{false};  // in this process (a forked child starts its own)

// The kernel thread id of the thread whose pthread_t (CPython's thread ident) is `ident`: glibc tells
// its debuggers where struct pthread keeps it (libthread_db reads the same descriptor). The offset is
// checked on the calling thread before it is trusted; 0 when it cannot be.
class ThreadIds {
 public:
  ThreadIds() {
    const DlvsymFn lookup = real_dlvsym();
    const auto* field = lookup ? static_cast<const uint32_t*>(lookup(RTLD_DEFAULT, "_thread_db_pthread_tid", "GLIBC_PRIVATE"))
                               : nullptr;
    // {bits, count, offset}: one 32-bit pid_t.
    if (!field || field[0] != 32 || field[1] != 1 || field[2] > 4096) return;
    offset_ = field[2];
    if (tid_of(pthread_self()) != pid_t(syscall(SYS_gettid))) offset_ = 0;
  }
  bool usable() const { return offset_ != 0; }
  pid_t tid_of(unsigned long ident) const {
    if (!offset_ || !ident) return 0;
    pid_t tid;
    std::memcpy(&tid, reinterpret_cast<const uint8_t*>(ident) + offset_, sizeof tid);
    return tid;
  }

 private:
  uint32_t offset_ = 0;
};

void write_python_sample(ThreadState& ts, uint64_t time, pid_t tid, const abi::PythonFrame* frames, uint32_t count) {
  const uint32_t bytes = uint32_t(sizeof(abi::PythonSampleRecord) + sizeof(abi::PythonFrame) * count);
  WritingRecord writing(ts);
  uint8_t* p = ts.producer.reserve(bytes);
  if (!p) return;  // counted as dropped by the ring
  auto* r = reinterpret_cast<abi::PythonSampleRecord*>(p);
  r->header = {uint16_t(abi::RecordKind::kPythonSample), uint16_t(bytes), count};
  r->time = time;
  r->tid = uint32_t(tid);
  r->flags = 0;
  std::memcpy(r->frames, frames, sizeof(abi::PythonFrame) * count);
  ts.producer.commit(bytes);
}

// One round: the Python stack of every thread that runs Python code, read under the GIL.
void sample_python_threads(ThreadState& ts, const PythonApi& api, const ThreadIds& ids) {
  const int gil = api.gil_ensure();
  const uint64_t time = now();
  Object current_frames = api.sys_object("_current_frames");
  Object frames = current_frames ? api.call(current_frames, nullptr) : nullptr;
  if (frames) {
    Locked lock;
    const unsigned long self = static_cast<unsigned long>(pthread_self());
    long position = 0;
    Object ident = nullptr, frame = nullptr;
    abi::PythonFrame out[abi::kMaxPythonFrames];
    while (api.dict_next(frames, &position, &ident, &frame)) {
      const unsigned long thread = api.as_ulong(ident);
      const pid_t tid = thread == self ? 0 : ids.tid_of(thread);
      if (tid <= 0 || !frame) continue;
      api.inc_ref(frame);  // walk_frames takes a reference over; the dict keeps its own
      const uint32_t count = walk_frames(ts, api, frame, out, abi::kMaxPythonFrames);
      if (count) write_python_sample(ts, time, tid, out, count);
    }
    api.dec_ref(frames);
  }
  discard_error(api);
  api.gil_release(gil);
}

void* python_sampler(void*) {
  prctl(PR_SET_NAME, "cutrace-pysample", 0, 0, 0);
  ThreadState& ts = t_thread;
  const uint32_t hz = g_session->python_sampling_hz;
  const PythonApi* api = python_api();
  const ThreadIds ids;
  if (!api || !hz || !ids.usable()) return nullptr;
  const uint64_t period_ns = 1000000000ull / hz;
  // The interpreter comes up after the shim's constructor started this thread.
  while (!api->is_initialized()) {
    timespec pause{0, 2000000};
    nanosleep(&pause, nullptr);
  }
  if (!prepare_thread(ts)) return nullptr;
  // Whatever this thread calls (the GIL's waits, the allocator) is cutrace's, not the program's.
  ts.in_tracer++;
  timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (;;) {
    uint64_t at = uint64_t(next.tv_sec) * 1000000000ull + uint64_t(next.tv_nsec) + period_ns;
    timespec current;
    clock_gettime(CLOCK_MONOTONIC, &current);
    const uint64_t now_ns = uint64_t(current.tv_sec) * 1000000000ull + uint64_t(current.tv_nsec);
    if (at < now_ns) at = now_ns + period_ns;  // a round that waited long for the GIL: no burst after it
    next = {time_t(at / 1000000000ull), long(at % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr) == EINTR) {
    }
    // Finalising: PyGILState_Ensure would end this thread (or, in newer versions, block it forever).
    if (!api->is_initialized()) break;
    sample_python_threads(ts, *api, ids);
  }
  return nullptr;
}

}  // namespace

uint32_t python_frames(ThreadState& ts, abi::PythonFrame* out, uint32_t capacity) {
  const PythonApi* api = python_api();
  if (!api || capacity == 0 || !api->is_initialized() || !api->gil_check()) return 0;
  Object thread = api->thread_state();
  if (!thread) return 0;
  Locked lock;
  // Whatever exception the thread has pending stays as it was.
  Object type = nullptr, value = nullptr, trace = nullptr;
  api->fetch_error(&type, &value, &trace);
  const uint32_t count = walk_frames(ts, *api, api->thread_frame(thread), out, capacity);
  // An error the lookups left (an attribute missing) is not the program's.
  discard_error(*api);
  api->restore_error(type, value, trace);
  return count;
}

void start_python_sampling() {
  if (!g_session || g_session->python_sampling_hz == 0 || !python_api()) return;
  if (g_sampler_started.exchange(true)) return;
  if (!start_tracer_thread(python_sampler)) g_sampler_started.store(false);
}

void forget_python_functions() {
  // The child's trace is a process of its own: it must be sent every name again. The code objects
  // stay cached (and referenced) as they were.
  g_sent.forget();
  g_lock.clear(std::memory_order_relaxed);
  // The parent's sampler thread is not in the child; the child starts its own once it records.
  g_sampler_started.store(false, std::memory_order_relaxed);
}

}  // namespace cutrace::preload
