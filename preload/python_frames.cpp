#include "python_frames.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "interpose.h"
#include "loaded_objects.h"
#include "python_layouts.h"

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

// For the look for an interpreter, which asks the loader (dlsym) while it holds the lock: a thread
// that finds the lock taken must not wait, for it may hold the loader's lock itself (a library's
// constructor making a slow call), which the holder is waiting for. It goes without Python frames
// this once; a later slow call looks again.
struct TryLocked {
  TryLocked() : held(!g_lock.test_and_set(std::memory_order_acquire)) {}
  ~TryLocked() {
    if (held) g_lock.clear(std::memory_order_release);
  }
  const bool held;
};

// A Python function's id: a hash of "qualified name" NUL "file", eight bytes a step. Every slow call
// hashes each of its frames' names, so FNV's byte-serial multiply chain (name_hash) costs too much here.
// Never 0, which marks an empty slot of SentNames.
uint64_t function_hash(const char* text, size_t length) {
  constexpr uint64_t kMultiplier = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0x243F6A8885A308D3ull ^ length;
  size_t i = 0;
  for (; i + 8 <= length; i += 8) {
    uint64_t word;
    std::memcpy(&word, text + i, 8);
    h = (h ^ word) * kMultiplier;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, text + i, length - i);
  h = (h ^ tail) * kMultiplier;
  // MurmurHash3's finaliser: every input bit reaches every output bit.
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33;
  return h ? h : 1;
}

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
  const uint64_t id = function_hash(text, length);
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

// --- Frames read without the GIL ----------------------------------------------------------------
//
// A slow call's Python frames are its own thread's, and that thread is inside the call: it cannot push
// or pop a frame, and each frame on its chain holds its code object, which holds its names and line
// table. So the chain can be read with plain loads, whether or not the thread holds the GIL (PyTorch
// releases it around every operator), and without taking it, which could deadlock the program. Where
// the chain lies is CPython's internal layout, per minor version (python_layouts.h); it is trusted only
// after the interpreter's version picked a row, 3.13's own _Py_DebugOffsets agreed with it, the first
// walk (made through process_vm_readv, which fails on a bad address instead of faulting) passed every
// check, and, the first time a slow call comes with the GIL held, the C API's answer matched.

// Memory read directly, or through the kernel, which says when an address is not mapped.
struct DirectMemory {
  static bool read(uintptr_t address, void* out, size_t n) {
    std::memcpy(out, reinterpret_cast<const void*>(address), n);
    return true;
  }
};
struct CheckedMemory {
  static bool read(uintptr_t address, void* out, size_t n) {
    iovec local{out, n}, remote{reinterpret_cast<void*>(address), n};
    return address && syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0) == ssize_t(n);
  }
};

template <class Memory, class T>
bool load(uintptr_t address, T* out) {
  return Memory::read(address, out, sizeof(T));
}

struct Interpreter {
  cutrace_python_layout layout;
  uint32_t version;  // PY_VERSION_HEX
  uintptr_t code_type, unicode_type, bytes_type, frame_type;
  Object (*this_thread_state)();  // PyGILState_GetThisThreadState: this thread's, GIL or not
  Object (*gil_holder)();         // _PyThreadState_UncheckedGet (3.9-3.12) / PyThreadState_GetUnchecked
  int (*addr2line)(Object, int);  // PyCode_Addr2Line: reads the code object's line table, nothing else
  int (*is_initialized)();
  int (*is_finalizing)();         // _Py_IsFinalizing (3.9-3.12) / Py_IsFinalizing
};

enum FramesState : uint32_t {
  kNotFound,   // no CPython in the process (yet)
  kUnproven,   // a layout is chosen; the next walk reads through the kernel
  kProven,     // read directly
  kRefused,    // no Python frames in this process; said once
};
std::atomic<uint32_t> g_frames_state{kNotFound};
std::atomic<bool> g_compared_with_api{false};  // the C API check under the GIL was made
std::atomic<bool> g_status_sent{false};        // in this process (a forked child sends its own)
Interpreter g_interpreter;
char g_frames_status[320];  // what the status string says: "CPython 3.11.7", or why there are no frames
uint64_t g_frames_status_code;  // 0: frames are read; 1: refused

// "3.11.7", "3.14.0a1", "3.13.0rc2".
void format_version(uint32_t hex, char* out, size_t size) {
  static const char* const kLevels[16] = {"", "", "", "", "", "", "", "", "", "", "a", "b", "rc", "", "", ""};
  const unsigned level = (hex >> 4) & 0xF;
  if (level == 0xF || !kLevels[level][0])
    snprintf(out, size, "%u.%u.%u", hex >> 24, (hex >> 16) & 0xFF, (hex >> 8) & 0xFF);
  else
    snprintf(out, size, "%u.%u.%u%s%u", hex >> 24, (hex >> 16) & 0xFF, (hex >> 8) & 0xFF, kLevels[level], hex & 0xF);
}

void refuse(const char* why) {
  char version[32];
  format_version(g_interpreter.version, version, sizeof version);
  snprintf(g_frames_status, sizeof g_frames_status, "CPython %s %s, so the stacks of its slow calls have no Python frames",
           version, why);
  g_frames_status_code = 1;
  g_frames_state.store(kRefused, std::memory_order_release);
}

// The interpreter's version: Py_Version from 3.11, else the text Py_GetVersion() starts with.
uint32_t interpreter_version(DlsymFn lookup) {
  if (const auto* hex = static_cast<const unsigned long*>(lookup(RTLD_DEFAULT, "Py_Version"))) return uint32_t(*hex);
  auto get_version = reinterpret_cast<const char* (*)()>(lookup(RTLD_DEFAULT, "Py_GetVersion"));
  if (!get_version) return 0;
  unsigned major = 0, minor = 0, micro = 0;
  if (sscanf(get_version(), "%u.%u.%u", &major, &minor, &micro) != 3) return 0;
  return (major << 24) | (minor << 16) | (micro << 8) | 0xF0;
}

// Looks for CPython once per change of the loaded objects, and picks its layout; the caller holds g_lock.
std::atomic<uint64_t> g_interpreter_looked_at_adds{~uint64_t(0)};

// Whether the loaded objects changed since find_interpreter() last looked: a process without CPython
// asks this on every slow call, without taking the lock.
bool loaded_objects_changed() {
  uint64_t adds = 0, subs = 0;
  elf::load_counts(&adds, &subs);
  return g_interpreter_looked_at_adds.load(std::memory_order_relaxed) != adds;
}

void find_interpreter() {
  uint64_t adds = 0, subs = 0;
  elf::load_counts(&adds, &subs);
  if (g_interpreter_looked_at_adds.exchange(adds, std::memory_order_relaxed) == adds) return;
  const DlsymFn lookup = real_dlsym();
  if (!lookup) return;
  Interpreter in{};
  in.this_thread_state = reinterpret_cast<Object (*)()>(lookup(RTLD_DEFAULT, "PyGILState_GetThisThreadState"));
  in.is_initialized = reinterpret_cast<int (*)()>(lookup(RTLD_DEFAULT, "Py_IsInitialized"));
  if (!in.this_thread_state || !in.is_initialized) return;  // no CPython
  in.version = interpreter_version(lookup);
  g_interpreter = in;
  const uint32_t major = in.version >> 24, minor = (in.version >> 16) & 0xFF;
  if (major < 3 || (major == 3 && minor < 9)) {
    refuse("is older than 3.9, the first whose frames cutrace reads");
    return;
  }
  if (major != 3) {
    refuse("is a major version whose frame layout this build of cutrace does not know");
    return;
  }
  // Py_TRACE_REFS puts two pointers before every object's type.
  if (lookup(RTLD_DEFAULT, "_Py_PrintReferences")) {
    refuse("is built with Py_TRACE_REFS, which lays objects out differently");
    return;
  }
  // A row up to 3.12; from 3.13, what the interpreter states of itself (python_layouts.h).
  const cutrace_python_layout* row = nullptr;
  for (const cutrace_python_layout& l : cutrace_python_layouts)
    if (l.minor == minor) row = &l;
  if (row) {
    in.layout = *row;
  } else if (minor < 13) {
    refuse("is a version whose frame layout this build of cutrace does not know");
    return;
  } else {
    const auto* runtime = static_cast<const unsigned char*>(lookup(RTLD_DEFAULT, "_PyRuntime"));
    const char* why = runtime ? cutrace_python_layout_from_debug_offsets(runtime, minor, in.version, &in.layout)
                              : "has no _PyRuntime, where it would state its layout";
    if (why) {
      refuse(why);
      return;
    }
  }
  in.code_type = reinterpret_cast<uintptr_t>(lookup(RTLD_DEFAULT, "PyCode_Type"));
  in.unicode_type = reinterpret_cast<uintptr_t>(lookup(RTLD_DEFAULT, "PyUnicode_Type"));
  in.bytes_type = reinterpret_cast<uintptr_t>(lookup(RTLD_DEFAULT, "PyBytes_Type"));
  in.frame_type = reinterpret_cast<uintptr_t>(lookup(RTLD_DEFAULT, "PyFrame_Type"));
  in.addr2line = reinterpret_cast<int (*)(Object, int)>(lookup(RTLD_DEFAULT, "PyCode_Addr2Line"));
  in.gil_holder = reinterpret_cast<Object (*)()>(lookup(RTLD_DEFAULT, minor >= 13 ? "PyThreadState_GetUnchecked"
                                                                                  : "_PyThreadState_UncheckedGet"));
  in.is_finalizing =
      reinterpret_cast<int (*)()>(lookup(RTLD_DEFAULT, minor >= 13 ? "Py_IsFinalizing" : "_Py_IsFinalizing"));
  g_interpreter = in;
  if (!in.code_type || !in.unicode_type || !in.bytes_type || !in.frame_type || !in.addr2line || !in.gil_holder ||
      !in.is_finalizing) {
    refuse("does not export a function or type its frames are read with");
    return;
  }
  char version[32];
  format_version(in.version, version, sizeof version);
  snprintf(g_frames_status, sizeof g_frames_status, "CPython %s", version);
  g_frames_status_code = 0;
  g_frames_state.store(kUnproven, std::memory_order_release);
}

// A compact str's text as UTF-8, cut at `capacity` bytes as CPython's own UTF-8 would be; its length,
// -1 when `text` is not a compact str, or -2 when it holds a lone surrogate, which has no UTF-8.
template <class Memory>
ptrdiff_t read_text(const Interpreter& in, uintptr_t text, char* out, size_t capacity) {
  const cutrace_python_layout& l = in.layout;
  uintptr_t type = 0;
  uint32_t state = 0;
  int64_t length = 0;
  if (!load<Memory>(text + CUTRACE_PYTHON_OB_TYPE, &type) || type != in.unicode_type ||
      !load<Memory>(text + l.unicode_state, &state) || !load<Memory>(text + l.unicode_length, &length))
    return -1;
  const unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || length < 0 || !(kind == 1 || kind == 2 || kind == 4)) return -1;
  const uintptr_t data = text + (ascii ? l.ascii_size : l.compact_size);
  // Never more characters than could fill the output.
  const size_t characters = std::min<size_t>(size_t(length), capacity);
  if (ascii) return Memory::read(data, out, characters) ? ptrdiff_t(characters) : -1;
  uint8_t raw[4 * 1024];
  if (characters * kind > sizeof raw || !Memory::read(data, raw, characters * kind)) return -1;
  size_t n = 0;
  for (size_t i = 0; i < characters && n < capacity; ++i) {
    uint32_t c = kind == 1 ? raw[i] : kind == 2 ? uint32_t(reinterpret_cast<const uint16_t*>(raw)[i])
                                                : reinterpret_cast<const uint32_t*>(raw)[i];
    if (c >= 0xD800 && c <= 0xDFFF) return -2;
    if (c > 0x10FFFF) return -1;
    uint8_t bytes[4];
    size_t width;
    if (c < 0x80) {
      bytes[0] = uint8_t(c);
      width = 1;
    } else if (c < 0x800) {
      bytes[0] = uint8_t(0xC0 | (c >> 6)), bytes[1] = uint8_t(0x80 | (c & 0x3F));
      width = 2;
    } else if (c < 0x10000) {
      bytes[0] = uint8_t(0xE0 | (c >> 12)), bytes[1] = uint8_t(0x80 | ((c >> 6) & 0x3F));
      bytes[2] = uint8_t(0x80 | (c & 0x3F));
      width = 3;
    } else {
      bytes[0] = uint8_t(0xF0 | (c >> 18)), bytes[1] = uint8_t(0x80 | ((c >> 12) & 0x3F));
      bytes[2] = uint8_t(0x80 | ((c >> 6) & 0x3F)), bytes[3] = uint8_t(0x80 | (c & 0x3F));
      width = 4;
    }
    for (size_t b = 0; b < width && n < capacity; ++b) out[n++] = char(bytes[b]);
  }
  return ptrdiff_t(n);
}

// Lines already looked up, per thread: a slow call's outer frames (a training loop, <module>) are the
// same call after call, and CPython finds a line by walking the line table from its start, which for a
// long module costs microseconds. A code object is not referenced here (that needs the GIL), so an entry
// counts only for the same code address and instruction, the same function id (computed from the names,
// read afresh every time), the same line table object and first line: another code object at a freed one's
// address would need all of them. A forked child's threads see another generation.
struct LineCacheEntry {
  uintptr_t code;
  uintptr_t line_table;
  uint64_t id;
  int64_t offset;
  uint64_t line;
  int32_t first_line;
  uint32_t generation;  // also: the id's names were sent in this generation
};
constexpr size_t kLineCacheEntries = 64;
thread_local LineCacheEntry t_lines[kLineCacheEntries] __attribute__((tls_model("initial-exec")));
std::atomic<uint32_t> g_function_generation{1};

// The id of a code object's function, as function_names() and function_hash() make it from the C API,
// with its names in `text` (`*length` bytes). 0 when its names cannot be read.
template <class Memory>
uint64_t raw_function_id(const Interpreter& in, uintptr_t code, char (&text)[1024], size_t* length) {
  const cutrace_python_layout& l = in.layout;
  uintptr_t name = 0, file = 0;
  if (!load<Memory>(code + (l.code_qualname != CUTRACE_PYTHON_NONE ? l.code_qualname : l.code_name), &name) ||
      !load<Memory>(code + l.code_filename, &file))
    return 0;
  // A name CPython cannot encode either is left empty, as function_names() leaves it.
  ptrdiff_t name_length = read_text<Memory>(in, name, text, 512);
  if (name_length == -1) return 0;
  name_length = std::max<ptrdiff_t>(name_length, 0);
  text[name_length] = '\0';
  ptrdiff_t file_length = read_text<Memory>(in, file, text + name_length + 1, sizeof text - size_t(name_length) - 1);
  if (file_length == -1) return 0;
  file_length = std::max<ptrdiff_t>(file_length, 0);
  *length = size_t(name_length) + 1 + size_t(file_length);
  return function_hash(text, *length);
}

// Checks one code object and the instruction its frame is at (in bytes from the first; -1 or -2 before
// it); false when anything is off.
template <class Memory>
bool code_and_offset_agree(const Interpreter& in, uintptr_t code, int64_t offset_bytes) {
  uintptr_t type = 0;
  if (!load<Memory>(code + CUTRACE_PYTHON_OB_TYPE, &type) || type != in.code_type) return false;
  // The instructions' size: co_code's (3.9, 3.10) or the code object's own (code units, 3.11+).
  int64_t size_bytes = 0;
  if (in.layout.code_code != CUTRACE_PYTHON_NONE) {
    uintptr_t bytes = 0;
    if (!load<Memory>(code + in.layout.code_code, &bytes) || !load<Memory>(bytes + CUTRACE_PYTHON_OB_TYPE, &type) ||
        type != in.bytes_type || !load<Memory>(bytes + CUTRACE_PYTHON_OB_SIZE, &size_bytes))
      return false;
  } else {
    if (!load<Memory>(code + CUTRACE_PYTHON_OB_SIZE, &size_bytes)) return false;
    size_bytes *= 2;
  }
  return offset_bytes < size_bytes && offset_bytes >= -2;
}

// One frame: its function's id (its names sent first when this process has not sent them yet) and its
// line, from this thread's cache or CPython's line table. False when its names cannot be read.
template <class Memory>
bool name_frame(ThreadState& ts, const Interpreter& in, uintptr_t code, int64_t offset_bytes, abi::PythonFrame* out) {
  char text[1024];
  size_t length = 0;
  const uint64_t id = raw_function_id<Memory>(in, code, text, &length);
  uintptr_t line_table = 0;
  int32_t first_line = 0;
  if (!id || !load<Memory>(code + in.layout.code_linetable, &line_table) ||
      !load<Memory>(code + in.layout.code_firstlineno, &first_line))
    return false;
  const uint32_t generation = g_function_generation.load(std::memory_order_relaxed);
  LineCacheEntry& cached = t_lines[((code >> 4) ^ uint64_t(offset_bytes) * 0x9E3779B97F4A7C15ull) % kLineCacheEntries];
  if (cached.code == code && cached.offset == offset_bytes && cached.id == id && cached.line_table == line_table &&
      cached.first_line == first_line && cached.generation == generation) {
    *out = {id, cached.line};
    return true;
  }
  if (g_sent.first_sending(id)) emit_string(ts, abi::StringKind::kPythonFunction, id, text, length);
  // Before the first instruction (-1 or -2) CPython says the function's first line, as here.
  const uint64_t line = uint64_t(in.addr2line(reinterpret_cast<Object>(code), int(offset_bytes < 0 ? -1 : offset_bytes)));
  cached = {code, line_table, id, offset_bytes, line, first_line, generation};
  *out = {id, line};
  return true;
}

// This thread's frames, innermost first, from `tstate`; false when a check failed (the frames before it
// are in `out`, `*count` of them).
template <class Memory>
bool walk_raw(ThreadState& ts, const Interpreter& in, uintptr_t tstate, abi::PythonFrame* out, uint32_t capacity,
              uint32_t* count) {
  const cutrace_python_layout& l = in.layout;
  *count = 0;
  uintptr_t frame = 0;
  if (!load<Memory>(tstate + l.tstate_frame, &frame)) return false;
  if (l.frames == CUTRACE_PYTHON_CFRAME && frame && !load<Memory>(frame + l.cframe_current, &frame)) return false;
  // Links followed at most: what the capacity needs and the entry shims between them, with room for
  // incomplete frames; a longer chain is not believed.
  for (uint32_t links = 0; frame && *count < capacity; ++links) {
    if (links > 4 * capacity + 64) return false;
    uintptr_t code = 0, next = 0;
    if (!load<Memory>(frame + l.frame_code, &code) || !load<Memory>(frame + l.frame_back, &next)) return false;
    code &= ~uintptr_t(l.frame_code_tag_bits);
    int64_t offset_bytes;
    if (l.frames == CUTRACE_PYTHON_FRAME_OBJECTS) {
      uintptr_t type = 0;
      int32_t lasti = 0;
      if (!load<Memory>(frame + CUTRACE_PYTHON_OB_TYPE, &type) || type != in.frame_type ||
          !load<Memory>(frame + l.frame_position, &lasti))
        return false;
      offset_bytes = l.minor == 9 ? lasti : int64_t(lasti) * 2;  // bytes in 3.9, code units in 3.10
    } else {
      uint8_t owner = 0;
      if (!load<Memory>(frame + l.frame_owner, &owner)) return false;
      if (owner >= l.owner_cstack) {  // an entry into the eval loop: no code of its own
        frame = next;
        continue;
      }
      uintptr_t instruction = 0;
      int32_t first_traceable = 0;
      if (!load<Memory>(frame + l.frame_position, &instruction) ||
          !load<Memory>(code + l.code_firsttraceable, &first_traceable))
        return false;
      const uintptr_t start = code + l.code_adaptive;
      // A frame still being set up (its arguments copied, its cells made) is not yet the caller's
      // frame to CPython either (_PyFrame_IsIncomplete).
      if (owner != l.owner_generator && instruction < start + 2 * uintptr_t(int64_t(first_traceable))) {
        frame = next;
        continue;
      }
      offset_bytes = int64_t(instruction - start);
    }
    if (!code_and_offset_agree<Memory>(in, code, offset_bytes) || !name_frame<Memory>(ts, in, code, offset_bytes, &out[*count]))
      return false;
    // Whether the eval loop's run that executes this frame began with it (a C function called it):
    // each frame in 3.9 and 3.10; is_entry in 3.11; from 3.12, the C stack's entry shim comes next.
    bool entry = true;
    if (l.frame_is_entry != CUTRACE_PYTHON_NONE) {
      uint8_t is_entry = 0;
      if (!load<Memory>(frame + l.frame_is_entry, &is_entry)) return false;
      entry = is_entry != 0;
    } else if (l.owner_cstack != 0xFF && next) {
      uint8_t next_owner = 0;
      if (!load<Memory>(next + l.frame_owner, &next_owner)) return false;
      entry = next_owner >= l.owner_cstack;
    }
    if (entry) out[*count].line |= abi::kPythonFrameEntry;
    ++*count;
    frame = next;
  }
  // Cut at the capacity: the frames kept end the innermost runs they belong to, as far as a reader
  // placing them in the native stack can tell.
  if (frame && *count) out[*count - 1].line |= abi::kPythonFrameEntry;
  return true;
}

// The same frames through the C API; the caller holds the GIL and g_lock. The ids are made as
// raw_function_id() makes them, without sending names.
uint32_t walk_with_api(const PythonApi& api, abi::PythonFrame* out, uint32_t capacity) {
  Object thread = api.thread_state();
  if (!thread) return 0;
  Object type = nullptr, value = nullptr, trace = nullptr;
  api.fetch_error(&type, &value, &trace);
  uint32_t count = 0;
  Object frame = api.thread_frame(thread);
  char text[1024];
  while (frame && count < capacity) {
    if (Object code = api.frame_code(frame)) {
      out[count++] = {function_hash(text, function_names(api, code, text)), uint64_t(api.frame_line(frame))};
      api.dec_ref(code);
    }
    Object back = api.frame_back(frame);
    api.dec_ref(frame);
    frame = back;
  }
  if (frame) api.dec_ref(frame);
  discard_error(api);
  api.restore_error(type, value, trace);
  return count;
}

void send_frames_status(ThreadState& ts) {
  if (g_status_sent.exchange(true)) return;
  emit_string(ts, abi::StringKind::kPythonFramesStatus, g_frames_status_code, g_frames_status, strlen(g_frames_status));
}

}  // namespace

uint32_t python_frames(ThreadState& ts, abi::PythonFrame* out, uint32_t capacity) {
  uint32_t state = g_frames_state.load(std::memory_order_acquire);
  if (state == kNotFound) {
    if (!loaded_objects_changed()) return 0;
    TryLocked lock;
    if (!lock.held) return 0;
    find_interpreter();
    state = g_frames_state.load(std::memory_order_acquire);
  }
  if (state == kNotFound || capacity == 0) return 0;
  if (state == kRefused) {
    send_frames_status(ts);
    return 0;
  }
  const Interpreter& in = g_interpreter;
  if (!in.is_initialized() || in.is_finalizing()) return 0;
  const auto tstate = reinterpret_cast<uintptr_t>(in.this_thread_state());
  if (!tstate) return 0;  // a thread that never ran Python (a library's worker)
  uint32_t count = 0;
  bool walked = false;
  if (state == kUnproven) {
    Locked lock;
    if (g_frames_state.load(std::memory_order_acquire) == kUnproven) {
      if (!walk_raw<CheckedMemory>(ts, in, tstate, out, capacity, &count)) {
        refuse("keeps its frames elsewhere than this build of cutrace expects");
        send_frames_status(ts);
        return 0;
      }
      send_frames_status(ts);
      if (count) g_frames_state.store(kProven, std::memory_order_release);
      walked = true;
    } else if (g_frames_state.load(std::memory_order_acquire) != kProven) {
      return 0;
    }
  }
  // A check that fails on a proven layout keeps the frames above it: those below are not believed.
  if (!walked) walk_raw<DirectMemory>(ts, in, tstate, out, capacity, &count);
  // Once, with the GIL held: CPython's own answer must be the same.
  if (!g_compared_with_api.load(std::memory_order_relaxed) && reinterpret_cast<uintptr_t>(in.gil_holder()) == tstate) {
    const PythonApi* api = python_api();
    Locked lock;
    if (api && !g_compared_with_api.exchange(true)) {
      abi::PythonFrame expected[abi::kMaxPythonFrames];
      const uint32_t expected_count = walk_with_api(*api, expected, capacity);
      bool same = expected_count == count;
      for (uint32_t i = 0; same && i < count; ++i)
        same = expected[i].function == out[i].function && expected[i].line == abi::python_frame_line(out[i]);
      if (!same) {
        refuse("gave other frames through its C API than those read without the GIL");
        g_status_sent.store(false);
        send_frames_status(ts);
        return 0;
      }
    }
  }
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
  g_status_sent.store(false, std::memory_order_relaxed);
  g_function_generation.fetch_add(1, std::memory_order_relaxed);
  // The parent's sampler thread is not in the child; the child starts its own once it records.
  g_sampler_started.store(false, std::memory_order_relaxed);
}

}  // namespace cutrace::preload

// --pytorch's start-up hook (python/bootstrap/_cutrace_pytorch.py) says through ctypes whether its
// annotations started in this process: a kPytorchStatus string for the recorder's warnings and `cutrace
// info`. The text is Python's, bounded like any string record.
extern "C" CUTRACE_EXPORT void cutrace_pytorch_status(uint32_t code, const char* text) {
  using namespace cutrace::preload;
  ThreadState& ts = t_thread;
  const int saved_errno = errno;
  if (text && (ts.producer.header || prepare_thread(ts)))
    emit_string(ts, cutrace::abi::StringKind::kPytorchStatus, code, text, strnlen(text, cutrace::abi::kMaxStringBytes));
  errno = saved_errno;
}
