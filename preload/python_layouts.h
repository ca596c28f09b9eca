/* Where CPython keeps what a thread's frame chain is read from (x86-64 and aarch64, default build: GIL,
 * no Py_TRACE_REFS), for reading it with plain loads while the thread has released the GIL
 * (python_frames.cpp). The layouts are CPython's internal ones, stable across the patch releases of
 * one minor version only.
 *
 * 3.9 to 3.12: one row per minor version below. From 3.13 the interpreter states its own layout, in
 * _Py_DebugOffsets at the start of _PyRuntime, and the layout is made from that statement
 * (cutrace_python_layout_from_debug_offsets), so that a new release needs no row: only where the
 * statement's own struct changes (3.14 added fields in the middle of its sections) does it need a
 * row of where in it each value is, and a statement in a form not known here is refused, never
 * guessed at (its fixed values must read as every CPython has them).
 *
 * C, so that tests/e2e/profile/python/layout_probe.c can compile it beside an interpreter's own
 * headers and check every value against their offsetof (test_python_frames.py runs it for every
 * CPython the machine has). Values are byte offsets; CUTRACE_PYTHON_NONE marks a field the version
 * does not have. */
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
  /* 3.13 on: tstate->current_frame; instr_ptr points at the instruction being executed. */
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
  /* The first owner of a frame that only enters the eval loop and runs no code of its own: 3.12+
   * (0xFF: none). FRAME_OWNED_BY_CSTACK in 3.12 and 3.13; FRAME_OWNED_BY_INTERPRETER in 3.14, where
   * CSTACK comes after it, and 3.15, which has no CSTACK. Every owner from it on is such a frame. */
  uint8_t owner_cstack;
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
  /* The low bits of the frame's code reference that are tags, not address: 3.14 made f_executable a
   * _PyStackRef, whose bit 0 says how it is counted (and 3.15's scheme uses bit 1 too). */
  uint8_t frame_code_tag_bits;
};

/* All versions: PyObject.ob_type, PyVarObject.ob_size; str's state bits: kind 2-4, compact 5, ascii 6. */
#define CUTRACE_PYTHON_OB_TYPE 8
#define CUTRACE_PYTHON_OB_SIZE 16

static const struct cutrace_python_layout cutrace_python_layouts[] = {
    /* 3.9 */
    {9, CUTRACE_PYTHON_FRAME_OBJECTS, 16, 24, CUTRACE_PYTHON_NONE, 24, 32, 104, CUTRACE_PYTHON_NONE,
     CUTRACE_PYTHON_NONE, 0xFF, 0xFF, 104, 112, CUTRACE_PYTHON_NONE, 40, 48, CUTRACE_PYTHON_NONE,
     CUTRACE_PYTHON_NONE, 16, 32, 48, 72, 32, 24, 120, 0},
    /* 3.10 */
    {10, CUTRACE_PYTHON_FRAME_OBJECTS, 16, 24, CUTRACE_PYTHON_NONE, 24, 32, 96, CUTRACE_PYTHON_NONE,
     CUTRACE_PYTHON_NONE, 0xFF, 0xFF, 104, 112, CUTRACE_PYTHON_NONE, 40, 48, CUTRACE_PYTHON_NONE,
     CUTRACE_PYTHON_NONE, 16, 32, 48, 72, 32, 24, 120, 0},
    /* 3.11 */
    {11, CUTRACE_PYTHON_CFRAME, 16, 56, 8, 48, 32, 56, 69, 68, 1, 0xFF, 112, 120, 128, 72,
     CUTRACE_PYTHON_NONE, 184, 168, 16, 32, 48, 72, 32, 24, 136, 0},
    /* 3.12 */
    {12, CUTRACE_PYTHON_CFRAME, 16, 56, 0, 8, 0, 56, 70, CUTRACE_PYTHON_NONE, 1, 3, 112, 120, 128, 68,
     CUTRACE_PYTHON_NONE, 192, 176, 16, 32, 40, 56, 32, 24, 136, 0},
};

/* _Py_DebugOffsets: where in it (a byte position from the start of _PyRuntime) the interpreter states
 * each value, each a uint64_t. One row per form of the struct, from the minor version that
 * introduced it (v3.13.0 Include/internal/pycore_runtime.h; 3.14's
 * Include/internal/pycore_debug_offsets.h, which added threads_main, code_object_generation and
 * tlbc_generation to the interpreter's section, stackpointer and tlbc_index to the frame's, co_tlbc
 * to the code object's, and set_object before dict_object). */
struct cutrace_python_debug_offsets {
  uint16_t minor; /* the first 3.minor that states its layout in this form */
  uint16_t version;          /* PY_VERSION_HEX */
  uint16_t free_threaded;
  uint16_t tstate_size;
  uint16_t tstate_interp;
  uint16_t tstate_frame;
  uint16_t frame_size;
  uint16_t frame_back;
  uint16_t frame_code;
  uint16_t frame_position;
  uint16_t frame_owner;
  uint16_t code_size;
  uint16_t code_filename;
  uint16_t code_name;
  uint16_t code_qualname;
  uint16_t code_linetable;
  uint16_t code_firstlineno;
  uint16_t code_adaptive;
  uint16_t object_size;      /* sizeof(PyObject): 16 in every CPython so far */
  uint16_t ob_type;          /* 8 */
  uint16_t type_name;        /* PyTypeObject.tp_name: 24 */
  uint16_t tuple_items;      /* PyTupleObject.ob_item: 24 */
  uint16_t tuple_size;       /* ob_size: 16 */
  uint16_t bytes_size;       /* PyBytesObject's ob_size: 16 */
  uint16_t bytes_data;
  uint16_t unicode_state;
  uint16_t unicode_length;
  uint16_t ascii_size;
};

static const struct cutrace_python_debug_offsets cutrace_python_debug_offsets_forms[] = {
    {13, 8, 16, 152, 176, 184, 224, 232, 240, 248, 264, 272, 280, 288, 296, 304, 312, 344, 352, 360, 376, 408, 416,
     520, 528, 544, 552, 560},
    {14, 8, 16, 176, 200, 208, 248, 256, 264, 272, 288, 312, 320, 328, 336, 344, 352, 384, 400, 408, 424, 456, 464,
     600, 608, 624, 632, 640},
};

/* The layout of 3.`minor` (version `version`, PY_VERSION_HEX) from the statement at the start of its
 * _PyRuntime (`runtime`): NULL with *out filled, or why it cannot be believed. Every offset must lie
 * within the struct the statement gives the size of, and the values that no CPython has changed
 * (where an object's type is, a tuple's items, ...) must read as they are: a statement in another
 * form reads otherwise. What the statement does not say is the same in every version that has one:
 * _co_firsttraceable sits 16 bytes before the instructions (an int, then the co_extra pointer), a
 * compact str's characters 16 bytes after an ASCII one's (utf8_length and utf8), its hash right
 * after its length; a generator's frame is owned by 1, and owners from 3 on run no code. */
static inline const char* cutrace_python_layout_from_debug_offsets(const unsigned char* runtime, unsigned minor,
                                                                     uint64_t version,
                                                                     struct cutrace_python_layout* out) {
  const struct cutrace_python_debug_offsets* at = 0;
  unsigned i;
  for (i = 0; i < sizeof cutrace_python_debug_offsets_forms / sizeof cutrace_python_debug_offsets_forms[0]; ++i)
    if (cutrace_python_debug_offsets_forms[i].minor <= minor) at = &cutrace_python_debug_offsets_forms[i];
  if (!at || runtime[0] != 'x' || runtime[1] != 'd' || runtime[2] != 'e' || runtime[3] != 'b' || runtime[4] != 'u' ||
      runtime[5] != 'g' || runtime[6] != 'p' || runtime[7] != 'y')
    return "does not state its layout at the start of its _PyRuntime (_Py_DebugOffsets)";
#define CUTRACE_STATED(field) \
  ((uint64_t)runtime[at->field] | (uint64_t)runtime[at->field + 1] << 8 | (uint64_t)runtime[at->field + 2] << 16 | \
   (uint64_t)runtime[at->field + 3] << 24 | (uint64_t)runtime[at->field + 4] << 32 | \
   (uint64_t)runtime[at->field + 5] << 40 | (uint64_t)runtime[at->field + 6] << 48 | \
   (uint64_t)runtime[at->field + 7] << 56)
  if (CUTRACE_STATED(version) != version) return "states another version in its _PyRuntime than it reports";
  if (CUTRACE_STATED(free_threaded)) return "is a free-threaded build, whose objects are laid out differently";
  if (CUTRACE_STATED(object_size) != 16 || CUTRACE_STATED(ob_type) != 8 || CUTRACE_STATED(type_name) != 24 ||
      CUTRACE_STATED(tuple_items) != 24 || CUTRACE_STATED(tuple_size) != 16 || CUTRACE_STATED(bytes_size) != 16)
    return "states its layout in a form this build of cutrace does not know";
  {
    const uint64_t tstate = CUTRACE_STATED(tstate_size), frame = CUTRACE_STATED(frame_size),
                   code = CUTRACE_STATED(code_size);
    const uint64_t within_tstate[] = {CUTRACE_STATED(tstate_interp), CUTRACE_STATED(tstate_frame)};
    const uint64_t within_frame[] = {CUTRACE_STATED(frame_back), CUTRACE_STATED(frame_code),
                                     CUTRACE_STATED(frame_position), CUTRACE_STATED(frame_owner)};
    const uint64_t within_code[] = {CUTRACE_STATED(code_filename), CUTRACE_STATED(code_name),
                                    CUTRACE_STATED(code_qualname), CUTRACE_STATED(code_linetable),
                                    CUTRACE_STATED(code_firstlineno), CUTRACE_STATED(code_adaptive)};
    const uint64_t ascii = CUTRACE_STATED(ascii_size), bytes_data = CUTRACE_STATED(bytes_data);
    int sound = tstate < 0x10000 && frame < 0x10000 && code < 0x10000 && ascii >= 32 && ascii <= 64 &&
                bytes_data >= 24 && bytes_data <= 64 && CUTRACE_STATED(code_adaptive) >= 16;
    for (i = 0; i < 2; ++i) sound = sound && within_tstate[i] < tstate;
    for (i = 0; i < 4; ++i) sound = sound && within_frame[i] < frame;
    for (i = 0; i < 6; ++i) sound = sound && within_code[i] < code;
    sound = sound && CUTRACE_STATED(unicode_state) < ascii && CUTRACE_STATED(unicode_length) + 8 < ascii;
    if (!sound) return "states offsets in its _PyRuntime that lie outside the structs they are in";
  }
  out->minor = (uint16_t)minor;
  out->frames = CUTRACE_PYTHON_CURRENT_FRAME;
  out->tstate_interp = (uint16_t)CUTRACE_STATED(tstate_interp);
  out->tstate_frame = (uint16_t)CUTRACE_STATED(tstate_frame);
  out->cframe_current = CUTRACE_PYTHON_NONE;
  out->frame_back = (uint16_t)CUTRACE_STATED(frame_back);
  out->frame_code = (uint16_t)CUTRACE_STATED(frame_code);
  out->frame_position = (uint16_t)CUTRACE_STATED(frame_position);
  out->frame_owner = (uint16_t)CUTRACE_STATED(frame_owner);
  out->frame_is_entry = CUTRACE_PYTHON_NONE;
  out->owner_generator = 1;
  out->owner_cstack = 3;
  out->code_filename = (uint16_t)CUTRACE_STATED(code_filename);
  out->code_name = (uint16_t)CUTRACE_STATED(code_name);
  out->code_qualname = (uint16_t)CUTRACE_STATED(code_qualname);
  out->code_firstlineno = (uint16_t)CUTRACE_STATED(code_firstlineno);
  out->code_code = CUTRACE_PYTHON_NONE;
  out->code_adaptive = (uint16_t)CUTRACE_STATED(code_adaptive);
  out->code_firsttraceable = (uint16_t)(CUTRACE_STATED(code_adaptive) - 16);
  out->unicode_length = (uint16_t)CUTRACE_STATED(unicode_length);
  out->unicode_state = (uint16_t)CUTRACE_STATED(unicode_state);
  out->ascii_size = (uint16_t)CUTRACE_STATED(ascii_size);
  out->compact_size = (uint16_t)(CUTRACE_STATED(ascii_size) + 16);
  out->bytes_data = (uint16_t)CUTRACE_STATED(bytes_data);
  out->unicode_hash = (uint16_t)(CUTRACE_STATED(unicode_length) + 8);
  out->code_linetable = (uint16_t)CUTRACE_STATED(code_linetable);
  out->frame_code_tag_bits = minor >= 14 ? 3 : 0;
#undef CUTRACE_STATED
  return 0;
}

#endif
