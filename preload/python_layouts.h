/* Where CPython 3.9 to 3.13 (x86-64 and aarch64, default build: GIL, no Py_TRACE_REFS) keep what a
 * thread's frame chain is read from, for reading it with plain loads while the thread has released
 * the GIL (python_frames.cpp). The layouts are CPython's internal ones, stable across the patch
 * releases of one minor version only, so there is one row per minor version.
 *
 * C, so that tests/e2e/profile/python_layout_probe.c can compile it beside an interpreter's own
 * headers and check every value against their offsetof (test_python_frames.py runs it for every
 * CPython the machine has). On 3.13 the interpreter also states most of them itself, in
 * _Py_DebugOffsets at the start of _PyRuntime; the shim compares those with the row before it reads a
 * frame. Values are byte offsets; kPythonNone marks a field the version does not have. */
#ifndef CUTRACE_PYTHON_LAYOUTS_H
#define CUTRACE_PYTHON_LAYOUTS_H

#include <stdint.h>

#define CUTRACE_PYTHON_NONE 0xFFFFu

/* How the frame chain is reached and walked. */
enum cutrace_python_frames {
  /* 3.9, 3.10: tstate->frame, a PyFrameObject per call, linked by f_back; f_lasti an int. */
  CUTRACE_PYTHON_FRAME_OBJECTS = 0,
  /* 3.11, 3.12: tstate->cframe->current_frame, an _PyInterpreterFrame, linked by previous;
   * prev_instr points at the last instruction begun. */
  CUTRACE_PYTHON_CFRAME = 1,
  /* 3.13: tstate->current_frame; instr_ptr points at the instruction being executed. */
  CUTRACE_PYTHON_CURRENT_FRAME = 2,
};

struct cutrace_python_layout {
  uint16_t minor;          /* 3.minor */
  uint16_t frames;         /* enum cutrace_python_frames */
  /* PyThreadState */
  uint16_t tstate_interp;
  uint16_t tstate_frame;   /* frame (3.9, 3.10), cframe (3.11, 3.12), current_frame (3.13) */
  uint16_t cframe_current; /* _PyCFrame.current_frame (3.11, 3.12) */
  /* A frame: PyFrameObject (3.9, 3.10) or _PyInterpreterFrame */
  uint16_t frame_back;     /* f_back / previous */
  uint16_t frame_code;     /* f_code / f_executable */
  uint16_t frame_position; /* f_lasti (int) / prev_instr / instr_ptr (pointer) */
  uint16_t frame_owner;    /* char, 3.11+ */
  uint16_t frame_is_entry; /* bool, 3.11 only: the frame a C call entered the eval loop with */
  uint8_t owner_generator; /* FRAME_OWNED_BY_GENERATOR, 3.11+ */
  uint8_t owner_cstack;    /* FRAME_OWNED_BY_CSTACK, 3.12+ (0xFF: none) */
  /* PyCodeObject */
  uint16_t code_filename;
  uint16_t code_name;
  uint16_t code_qualname;       /* 3.11+ */
  uint16_t code_firstlineno;    /* int */
  uint16_t code_code;           /* co_code, a bytes object (3.9, 3.10) */
  uint16_t code_adaptive;       /* co_code_adaptive, the instructions inline (3.11+) */
  uint16_t code_firsttraceable; /* _co_firsttraceable, int, in code units (3.11+) */
  /* str (PyASCIIObject / PyCompactUnicodeObject) and bytes */
  uint16_t unicode_length;
  uint16_t unicode_state;
  uint16_t ascii_size;   /* sizeof(PyASCIIObject): where a compact ASCII string's characters start */
  uint16_t compact_size; /* sizeof(PyCompactUnicodeObject): where other compact strings' start */
  uint16_t bytes_data;   /* PyBytesObject.ob_sval */
  uint16_t unicode_hash; /* the str's cached hash (-1 until computed; interned names have theirs) */
  uint16_t code_linetable; /* co_lnotab (3.9) / co_linetable, a bytes object */
};

/* All versions: PyObject.ob_type, PyVarObject.ob_size; str's state bits: kind 2-4, compact 5, ascii 6. */
#define CUTRACE_PYTHON_OB_TYPE 8
#define CUTRACE_PYTHON_OB_SIZE 16

static const struct cutrace_python_layout cutrace_python_layouts[] = {
    /* 3.9 */
    {9, CUTRACE_PYTHON_FRAME_OBJECTS, 16, 24, CUTRACE_PYTHON_NONE, 24, 32, 104, CUTRACE_PYTHON_NONE,
     CUTRACE_PYTHON_NONE, 0xFF, 0xFF, 104, 112, CUTRACE_PYTHON_NONE, 40, 48, CUTRACE_PYTHON_NONE,
     CUTRACE_PYTHON_NONE, 16, 32, 48, 72, 32, 24, 120},
    /* 3.10 */
    {10, CUTRACE_PYTHON_FRAME_OBJECTS, 16, 24, CUTRACE_PYTHON_NONE, 24, 32, 96, CUTRACE_PYTHON_NONE,
     CUTRACE_PYTHON_NONE, 0xFF, 0xFF, 104, 112, CUTRACE_PYTHON_NONE, 40, 48, CUTRACE_PYTHON_NONE,
     CUTRACE_PYTHON_NONE, 16, 32, 48, 72, 32, 24, 120},
    /* 3.11 */
    {11, CUTRACE_PYTHON_CFRAME, 16, 56, 8, 48, 32, 56, 69, 68, 1, 0xFF, 112, 120, 128, 72,
     CUTRACE_PYTHON_NONE, 184, 168, 16, 32, 48, 72, 32, 24, 136},
    /* 3.12 */
    {12, CUTRACE_PYTHON_CFRAME, 16, 56, 0, 8, 0, 56, 70, CUTRACE_PYTHON_NONE, 1, 3, 112, 120, 128, 68,
     CUTRACE_PYTHON_NONE, 192, 176, 16, 32, 40, 56, 32, 24, 136},
    /* 3.13 */
    {13, CUTRACE_PYTHON_CURRENT_FRAME, 16, 72, CUTRACE_PYTHON_NONE, 8, 0, 56, 70, CUTRACE_PYTHON_NONE, 1,
     3, 112, 120, 128, 68, CUTRACE_PYTHON_NONE, 200, 184, 16, 32, 40, 56, 32, 24, 136},
};

/* 3.13's _Py_DebugOffsets (v3.13.0 Include/internal/pycore_runtime.h): where in it the interpreter
 * states the offsets above, each a uint64_t. The struct is the same across 3.13's patch releases. */
struct cutrace_python_debug_offsets {
  uint16_t version;          /* PY_VERSION_HEX */
  uint16_t free_threaded;
  uint16_t tstate_interp;
  uint16_t tstate_frame;
  uint16_t frame_back;
  uint16_t frame_code;
  uint16_t frame_position;
  uint16_t frame_owner;
  uint16_t code_filename;
  uint16_t code_name;
  uint16_t code_qualname;
  uint16_t code_firstlineno;
  uint16_t code_adaptive;
  uint16_t ob_type;
  uint16_t unicode_state;
  uint16_t unicode_length;
  uint16_t ascii_size;
  uint16_t bytes_data;
  uint16_t code_linetable;
};

static const struct cutrace_python_debug_offsets cutrace_python_debug_offsets_313 = {
    8, 16, 176, 184, 232, 240, 248, 264, 280, 288, 296, 312, 344, 360, 544, 552, 560, 528, 304};

#endif
