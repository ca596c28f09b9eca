/* Checks preload/python_layouts.h against the headers of the CPython it is compiled with: every offset
 * of that version's layout is compared with the compiler's offsetof. Up to 3.12 the layout is the
 * version's row; from 3.13 it is what cutrace_python_layout_from_debug_offsets makes of a statement
 * that holds, where the headers' _Py_DebugOffsets puts them, the values CPython's own initializer
 * gives them (offsetof and sizeof of its structs). Built and run by test_python_frames.py once per
 * interpreter found; prints each mismatch and exits 1, or prints "layout 3.N checked" and exits 0. */
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
#include <string.h>
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

#if PY_VERSION_HEX >= 0x030D0000
static unsigned char statement[sizeof(_Py_DebugOffsets)];
static void state(size_t position, uint64_t value) { memcpy(statement + position, &value, sizeof value); }
#define STATE(member, value) state(offsetof(_Py_DebugOffsets, member), (value))
#endif

int main(void) {
  const struct cutrace_python_layout* row = NULL;
#if PY_VERSION_HEX >= 0x030D0000
  struct cutrace_python_layout derived;
  memcpy(statement, "xdebugpy", 8);
  STATE(version, PY_VERSION_HEX);
  STATE(free_threaded, 0);
  STATE(thread_state.size, sizeof(PyThreadState));
  STATE(thread_state.interp, offsetof(PyThreadState, interp));
  STATE(thread_state.current_frame, offsetof(PyThreadState, current_frame));
  STATE(interpreter_frame.size, sizeof(_PyInterpreterFrame));
  STATE(interpreter_frame.previous, offsetof(_PyInterpreterFrame, previous));
  STATE(interpreter_frame.executable, offsetof(_PyInterpreterFrame, f_executable));
  STATE(interpreter_frame.instr_ptr, offsetof(_PyInterpreterFrame, instr_ptr));
  STATE(interpreter_frame.owner, offsetof(_PyInterpreterFrame, owner));
  STATE(code_object.size, sizeof(PyCodeObject));
  STATE(code_object.filename, offsetof(PyCodeObject, co_filename));
  STATE(code_object.name, offsetof(PyCodeObject, co_name));
  STATE(code_object.qualname, offsetof(PyCodeObject, co_qualname));
  STATE(code_object.linetable, offsetof(PyCodeObject, co_linetable));
  STATE(code_object.firstlineno, offsetof(PyCodeObject, co_firstlineno));
  STATE(code_object.co_code_adaptive, offsetof(PyCodeObject, co_code_adaptive));
  STATE(pyobject.size, sizeof(PyObject));
  STATE(pyobject.ob_type, offsetof(PyObject, ob_type));
  STATE(type_object.tp_name, offsetof(PyTypeObject, tp_name));
  STATE(tuple_object.ob_item, offsetof(PyTupleObject, ob_item));
  STATE(tuple_object.ob_size, offsetof(PyTupleObject, ob_base.ob_size));
  STATE(bytes_object.ob_size, offsetof(PyBytesObject, ob_base.ob_size));
  STATE(bytes_object.ob_sval, offsetof(PyBytesObject, ob_sval));
  STATE(unicode_object.state, offsetof(PyUnicodeObject, _base._base.state));
  STATE(unicode_object.length, offsetof(PyUnicodeObject, _base._base.length));
  STATE(unicode_object.asciiobject_size, sizeof(PyASCIIObject));
  {
    const char* why = cutrace_python_layout_from_debug_offsets(statement, PY_MINOR_VERSION, PY_VERSION_HEX, &derived);
    if (why) {
      printf("3.%d: the statement is refused: %s\n", PY_MINOR_VERSION, why);
      return 1;
    }
  }
  row = &derived;
#else
  for (size_t i = 0; i < sizeof cutrace_python_layouts / sizeof cutrace_python_layouts[0]; ++i)
    if (cutrace_python_layouts[i].minor == PY_MINOR_VERSION) row = &cutrace_python_layouts[i];
#endif
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
#elif PY_VERSION_HEX < 0x030E0000
  ABSENT(frame_is_entry);
  CHECK(owner_cstack, FRAME_OWNED_BY_CSTACK);
#else
  ABSENT(frame_is_entry);
  CHECK(owner_cstack, FRAME_OWNED_BY_INTERPRETER);
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
#if PY_VERSION_HEX >= 0x030E0000
  /* Every tag bit of the code reference is masked, and no bit an object's address can have (8-aligned). */
  check("frame_code_tag_bits covers Py_TAG_BITS", row->frame_code_tag_bits & Py_TAG_BITS, Py_TAG_BITS);
  check("frame_code_tag_bits", row->frame_code_tag_bits & ~7u, 0);
#else
  CHECK(frame_code_tag_bits, 0);
#endif
  if (failures) return 1;
  printf("layout 3.%d checked\n", PY_MINOR_VERSION);
  return 0;
}
