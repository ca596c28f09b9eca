#include "python_frames.h"

#include <dlfcn.h>

#include <algorithm>
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
// Function ids whose names this process has sent.
constexpr size_t kSentSlots = 8192;
uint64_t g_sent[kSentSlots];
// The GIL serialises the callers; the lock also covers a build of CPython without one.
std::atomic_flag g_lock = ATOMIC_FLAG_INIT;

struct Locked {
  Locked() {
    while (g_lock.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~Locked() { g_lock.clear(std::memory_order_release); }
};

uint64_t fnv1a(const char* text, size_t length, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < length; ++i) h = (h ^ uint8_t(text[i])) * 1099511628211ull;
  return h;
}

bool first_sending(uint64_t id) {
  for (size_t i = 0; i < kSentSlots; ++i) {
    uint64_t& slot = g_sent[(id + i) % kSentSlots];
    if (slot == id) return false;
    if (slot == 0) {
      slot = id;
      return true;
    }
  }
  return true;  // full: send again rather than leave a name out
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

// The id of `code`'s function, its names sent first when this process has not sent them yet.
uint64_t function_id(ThreadState& ts, const PythonApi& api, Object code) {
  const size_t home = size_t((reinterpret_cast<uintptr_t>(code) >> 4) * 0x9E3779B97F4A7C15ull) % kCodeSlots;
  CodeSlot* free_slot = nullptr;
  for (size_t i = 0; i < 16; ++i) {
    CodeSlot& slot = g_codes[(home + i) % kCodeSlots];
    if (slot.code == code) return slot.id;
    if (!slot.code) {
      free_slot = &slot;
      break;
    }
  }
  // "qualified name" NUL "file": co_qualname from 3.11, co_name before.
  char text[1024];
  size_t name = attribute_text(api, code, "co_qualname", text, 512);
  if (name == size_t(-1)) {
    discard_error(api);  // the AttributeError of a Python older than 3.11
    name = attribute_text(api, code, "co_name", text, 512);
    if (name == size_t(-1)) name = 0;
  }
  text[name] = '\0';
  size_t file = attribute_text(api, code, "co_filename", text + name + 1, sizeof text - name - 1);
  if (file == size_t(-1)) file = 0;
  const size_t length = name + 1 + file;
  uint64_t id = fnv1a(text, length);
  if (id == 0) id = 1;
  if (free_slot) {
    api.inc_ref(code);
    *free_slot = {code, id};
  }
  if (first_sending(id)) emit_string(ts, abi::StringKind::kPythonFunction, id, text, length);
  return id;
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
  uint32_t count = 0;
  Object frame = api->thread_frame(thread);
  while (frame && count < capacity) {
    Object code = api->frame_code(frame);
    if (code) {
      out[count++] = {function_id(ts, *api, code), uint64_t(api->frame_line(frame))};
      api->dec_ref(code);
    }
    Object back = api->frame_back(frame);
    api->dec_ref(frame);
    frame = back;
  }
  if (frame) api->dec_ref(frame);
  // An error the lookups left (an attribute missing) is not the program's.
  discard_error(*api);
  api->restore_error(type, value, trace);
  return count;
}

void forget_python_functions() {
  // The child's trace is a process of its own: it must be sent every name again. The code objects
  // stay cached (and referenced) as they were.
  std::memset(g_sent, 0, sizeof g_sent);
  g_lock.clear(std::memory_order_relaxed);
}

}  // namespace cutrace::preload
