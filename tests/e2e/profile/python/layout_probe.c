/* Checks preload/python_layouts.h against the headers of the CPython it is compiled with: every offset
 * of that version's row is compared with the compiler's offsetof. Built and run by
 * test_python_frames.py once per interpreter found; prints each mismatch and exits 1, or prints
 * "layout 3.N checked" and exits 0. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#else
#include <frameobject.h>
#endif
#if PY_VERSION_HEX >= 0x030D0000
#include "internal/pycore_runtime.h"
#endif

#include "python_layouts.h"

static int failures = 0;

static void check(const char* field, unsigned table, size_t actual) {
  if (table == actual) return;
  printf("3.%d %s: table %u, headers %zu\n", PY_MINOR_VERSION, field, table, actual);
  failures++;
}
#define CHECK(field, actual) check(#field, row->field, (actual))
#define ABSENT(field) check(#field, row->field, CUTRACE_PYTHON_NONE)

int main(void) {
  const struct cutrace_python_layout* row = NULL;
  for (size_t i = 0; i < sizeof cutrace_python_layouts / sizeof cutrace_python_layouts[0]; ++i)
    if (cutrace_python_layouts[i].minor == PY_MINOR_VERSION) row = &cutrace_python_layouts[i];
  if (PY_MAJOR_VERSION != 3 || !row) {
    printf("no row for %s\n", PY_VERSION);
    return 1;
  }
  check("ob_type", CUTRACE_PYTHON_OB_TYPE, offsetof(PyObject, ob_type));
  check("ob_size", CUTRACE_PYTHON_OB_SIZE, offsetof(PyVarObject, ob_size));
  CHECK(tstate_interp, offsetof(PyThreadState, interp));
#if PY_VERSION_HEX < 0x030B0000
  CHECK(frames, CUTRACE_PYTHON_FRAME_OBJECTS);
  CHECK(tstate_frame, offsetof(PyThreadState, frame));
  ABSENT(cframe_current);
  CHECK(frame_back, offsetof(PyFrameObject, f_back));
  CHECK(frame_code, offsetof(PyFrameObject, f_code));
  CHECK(frame_position, offsetof(PyFrameObject, f_lasti));
  ABSENT(frame_owner);
  ABSENT(frame_is_entry);
  ABSENT(code_qualname);
  CHECK(code_code, offsetof(PyCodeObject, co_code));
  ABSENT(code_adaptive);
  ABSENT(code_firsttraceable);
#else
#if PY_VERSION_HEX < 0x030D0000
  CHECK(frames, CUTRACE_PYTHON_CFRAME);
  CHECK(tstate_frame, offsetof(PyThreadState, cframe));
  CHECK(cframe_current, offsetof(_PyCFrame, current_frame));
  CHECK(frame_code, offsetof(_PyInterpreterFrame, f_code));
  CHECK(frame_position, offsetof(_PyInterpreterFrame, prev_instr));
#else
  CHECK(frames, CUTRACE_PYTHON_CURRENT_FRAME);
  CHECK(tstate_frame, offsetof(PyThreadState, current_frame));
  ABSENT(cframe_current);
  CHECK(frame_code, offsetof(_PyInterpreterFrame, f_executable));
  CHECK(frame_position, offsetof(_PyInterpreterFrame, instr_ptr));
#endif
  CHECK(frame_back, offsetof(_PyInterpreterFrame, previous));
  CHECK(frame_owner, offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX < 0x030C0000
  CHECK(frame_is_entry, offsetof(_PyInterpreterFrame, is_entry));
  CHECK(owner_cstack, 0xFF);
#else
  ABSENT(frame_is_entry);
  CHECK(owner_cstack, FRAME_OWNED_BY_CSTACK);
#endif
  CHECK(owner_generator, FRAME_OWNED_BY_GENERATOR);
  CHECK(code_qualname, offsetof(PyCodeObject, co_qualname));
  ABSENT(code_code);
  CHECK(code_adaptive, offsetof(PyCodeObject, co_code_adaptive));
  CHECK(code_firsttraceable, offsetof(PyCodeObject, _co_firsttraceable));
#endif
  CHECK(code_filename, offsetof(PyCodeObject, co_filename));
  CHECK(code_name, offsetof(PyCodeObject, co_name));
  CHECK(code_firstlineno, offsetof(PyCodeObject, co_firstlineno));
  CHECK(unicode_length, offsetof(PyASCIIObject, length));
  CHECK(unicode_state, offsetof(PyASCIIObject, state));
  CHECK(ascii_size, sizeof(PyASCIIObject));
  CHECK(compact_size, sizeof(PyCompactUnicodeObject));
  CHECK(bytes_data, offsetof(PyBytesObject, ob_sval));
  CHECK(unicode_hash, offsetof(PyASCIIObject, hash));
#if PY_VERSION_HEX < 0x030A0000
  CHECK(code_linetable, offsetof(PyCodeObject, co_lnotab));
#else
  CHECK(code_linetable, offsetof(PyCodeObject, co_linetable));
#endif
#if PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x030E0000
  {
    const struct cutrace_python_debug_offsets* d = &cutrace_python_debug_offsets_313;
#define DEBUG(field, member) check("debug " #field, d->field, offsetof(_Py_DebugOffsets, member))
    DEBUG(version, version);
    DEBUG(free_threaded, free_threaded);
    DEBUG(tstate_interp, thread_state.interp);
    DEBUG(tstate_frame, thread_state.current_frame);
    DEBUG(frame_back, interpreter_frame.previous);
    DEBUG(frame_code, interpreter_frame.executable);
    DEBUG(frame_position, interpreter_frame.instr_ptr);
    DEBUG(frame_owner, interpreter_frame.owner);
    DEBUG(code_filename, code_object.filename);
    DEBUG(code_name, code_object.name);
    DEBUG(code_qualname, code_object.qualname);
    DEBUG(code_firstlineno, code_object.firstlineno);
    DEBUG(code_adaptive, code_object.co_code_adaptive);
    DEBUG(ob_type, pyobject.ob_type);
    DEBUG(unicode_state, unicode_object.state);
    DEBUG(unicode_length, unicode_object.length);
    DEBUG(ascii_size, unicode_object.asciiobject_size);
    DEBUG(bytes_data, bytes_object.ob_sval);
    DEBUG(code_linetable, code_object.linetable);
  }
#endif
  if (failures) return 1;
  printf("layout 3.%d checked\n", PY_MINOR_VERSION);
  return 0;
}
