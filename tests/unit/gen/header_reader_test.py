"""The generator's header reader (libclang) on a small header with the declarations the CUDA and C library
headers are made of: calling-convention and attribute macros, default arguments written with a macro,
function pointers, arrays, deprecation markers, extern "C" blocks, and what it must leave out (C++
linkage, namespaces, definitions, asm labels).
Usage: header_reader_test.py CXX"""
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "preload" / "gen"))
from cutrace_gen.common import GenError  # noqa: E402
from cutrace_gen.headers import HeaderParser, collect_c_prototypes, defined_macros, macro_probes  # noqa: E402
from cutrace_gen.tokens import render  # noqa: E402

CXX = "c++"

HEADER = r"""#pragma once
#define CUDARTAPI
#define __annotate__(a) __attribute__((a))
#define __location__(a) __annotate__(a)
#define __host__ __location__(host)
#define __dv(v) = v
#define DEPRECATED(msg) __attribute__((deprecated(msg)))
#define SOCKADDR_ARG struct sockaddr *__restrict
#define VERSIONED(name) name##_v2
#define shadowed shadowed_v2
#define gone 1
#undef gone

struct sockaddr;
typedef struct Stream* stream_t;
typedef int status_t;

#ifdef __cplusplus
extern "C" {
#endif
extern __host__ status_t CUDARTAPI launch(const void* func, unsigned int count __dv(1), stream_t stream __dv(0));
status_t CUDARTAPI on_done(stream_t stream, void (CUDARTAPI *callback)(stream_t, status_t, void*), void* user);
status_t unnamed_callback(void (*)(int), unsigned long int);
DEPRECATED("use launch") status_t old_launch(const void* func);
[[deprecated]] int older(int);
int accept_like(int fd, SOCKADDR_ARG addr, unsigned long int* __restrict len) noexcept(true);
int arrays(int values[4], const char name[]);
int print_like(const char* format, ...);
const char* CUDARTAPI name_of(status_t status);
int shadowed_v2(void);
inline int defined_here(int a) { return a; }
int renamed(int) __asm__("other_name");
#ifdef __cplusplus
}
#endif

extern "C" int single(double d);
int cxx_linkage(int);
namespace ns {
extern "C" int in_namespace(int);
}
"""

WANTED = {"launch", "on_done", "unnamed_callback", "old_launch", "older", "accept_like", "arrays", "print_like",
          "name_of", "shadowed_v2", "defined_here", "renamed", "single", "cxx_linkage", "in_namespace"}


class HeaderReader(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="cutrace-header-reader-")
        Path(cls.dir.name, "tricky.h").write_text(HEADER)
        parser = HeaderParser([CXX], [cls.dir.name], ["-std=c++20"])
        source = "#include <tricky.h>\n" + macro_probes({"shadowed", "gone", "launch"})
        tu = parser.parse(source, [], "tricky.h")
        cls.found = collect_c_prototypes(tu, WANTED)
        cls.macros = defined_macros(tu, {"shadowed", "gone", "launch"})
        cls.dependencies = parser.dependencies

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def proto(self, name):
        self.assertIn(name, self.found)
        self.assertEqual(len(self.found[name]), 1, name)
        return self.found[name][0]

    def declaration(self, name):
        p = self.proto(name)
        params = [param.declaration(param.name or f"arg{k}") for k, param in enumerate(p.params)]
        return f"{render(p.ret)} {p.name}({', '.join(params + (['...'] if p.variadic else []))})"

    def test_reads_exactly_the_c_declarations(self):
        self.assertEqual(set(self.found), WANTED - {"defined_here", "renamed", "cxx_linkage", "in_namespace"})

    def test_macros_expand_as_the_compiler_expands_them(self):
        # Calling-convention and attribute macros vanish; default arguments written with __dv go.
        self.assertEqual(self.declaration("launch"),
                         "status_t launch(const void* func, unsigned int count, stream_t stream)")
        self.assertEqual(self.declaration("name_of"), "const char* name_of(status_t status)")
        # A type written with a macro is spelled as the macro expands.
        self.assertEqual(self.declaration("accept_like"),
                         "int accept_like(int fd, struct sockaddr* __restrict addr, unsigned long int* __restrict len)")

    def test_function_pointers_arrays_and_unnamed_parameters(self):
        self.assertEqual(self.declaration("on_done"),
                         "status_t on_done(stream_t stream, void (*callback)(stream_t, status_t, void*), void* user)")
        p = self.proto("unnamed_callback")
        self.assertEqual([q.name for q in p.params], [None, None])
        self.assertEqual(p.params[0].declaration("fn"), "void (*fn)(int)")
        self.assertEqual(p.params[1].declaration("flags"), "unsigned long int flags")
        self.assertEqual(self.declaration("arrays"), "int arrays(int values[4], const char name[])")

    def test_deprecation_markers_and_variadic_functions(self):
        self.assertEqual(self.declaration("old_launch"), "status_t old_launch(const void* func)")
        self.assertEqual(self.declaration("older"), "int older(int arg0)")
        self.assertEqual(self.declaration("print_like"), "int print_like(const char* format, ...)")
        self.assertTrue(self.proto("print_like").variadic)
        self.assertFalse(self.proto("launch").variadic)

    def test_pointer_parameters_and_locations(self):
        self.assertEqual([q.is_pointer for q in self.proto("launch").params], [True, False, False])
        self.assertEqual([q.is_pointer for q in self.proto("accept_like").params], [False, True, True])
        self.assertEqual([q.is_pointer for q in self.proto("arrays").params], [True, True])
        self.assertEqual(self.proto("on_done").params[1].is_pointer, True)
        launch = self.proto("launch")
        self.assertEqual(launch.where, f"{self.dir.name}/tricky.h:{HEADER.splitlines().index(next(line for line in HEADER.splitlines() if 'launch(' in line)) + 1}")
        self.assertEqual(self.proto("single").ret_spelling, "int")
        self.assertEqual(self.proto("single").signature_key(), ("int", ("double",), False))

    def test_macros_still_defined_at_the_end_and_dependencies(self):
        self.assertEqual(self.macros, {"shadowed"})
        self.assertIn(f"{self.dir.name}/tricky.h", self.dependencies)

    def test_a_missing_header_stops_with_a_message(self):
        parser = HeaderParser([CXX], [self.dir.name], ["-std=c++20"])
        with self.assertRaises(GenError) as e:
            parser.parse("#include <no_such_header.h>\n", [], "no_such_header.h")
        self.assertIn("'no_such_header.h' file not found", str(e.exception))

    def test_a_macro_that_pastes_tokens_is_refused_by_name(self):
        Path(self.dir.name, "pasting.h").write_text('#define VERSIONED(name) name##_v2\n'
                                                   'extern "C" int VERSIONED(f)(int), f_v3(VERSIONED(int) x);\n')
        parser = HeaderParser([CXX], [self.dir.name], ["-std=c++20"])
        tu = parser.parse("typedef int int_v2;\n#include <pasting.h>\n", [], "pasting.h")
        with self.assertRaises(GenError) as e:
            collect_c_prototypes(tu, {"f_v3"})
        self.assertIn("macro VERSIONED, which stringizes or pastes tokens", str(e.exception))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        CXX = sys.argv.pop(1)
    unittest.main()
