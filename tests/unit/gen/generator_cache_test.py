"""The generator's cache of outputs (preload/gen/cutrace_gen/cache.py): an entry is used only while every
file its run read has the size and modification time it had; another run's arguments or generator
sources name another entry; an entry made stale gives way to the next run's.
Usage: generator_cache_test.py"""
import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "preload" / "gen"))
from cutrace_gen import cache  # noqa: E402


class GeneratorCacheTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)
        self.header = self.root / "cuda.h"
        self.header.write_text("int cudaMalloc(void**, unsigned long);\n")
        self.source = self.root / "gen.py"
        self.source.write_text("# generator\n")
        self.outputs = {"api_ids.h": "#define A 0\n", "wrappers_cudart.cpp": "// cudaMalloc\n"}

    def tearDown(self):
        self.dir.cleanup()

    def entry(self, arguments=None):
        return cache.entry_dir(self.root / "cache", arguments or {"library": [["cudart", "a.toml", "lib.so"]]},
                               {str(self.source)})

    def test_an_entry_gives_back_what_was_stored_while_its_inputs_are_unchanged(self):
        cache.store(self.entry(), self.outputs, {str(self.header)}, "cudart: 1 wrapped\n")
        self.assertEqual(cache.load(self.entry()), (self.outputs, [str(self.header)], "cudart: 1 wrapped\n"))

    def test_an_input_changed_since_makes_the_entry_unusable(self):
        cache.store(self.entry(), self.outputs, {str(self.header)}, "")
        stat = self.header.stat()
        os.utime(self.header, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        self.assertIsNone(cache.load(self.entry()))
        self.header.unlink()
        self.assertIsNone(cache.load(self.entry()))

    def test_other_arguments_or_generator_sources_name_another_entry(self):
        first = self.entry()
        self.assertNotEqual(first, self.entry({"library": [["cudart", "b.toml", "lib.so"]]}))
        self.source.write_text("# generator, changed\n")
        self.assertNotEqual(first, self.entry())

    def test_a_stale_entry_gives_way_to_the_next_runs(self):
        cache.store(self.entry(), self.outputs, {str(self.header)}, "old\n")
        self.header.write_text("int cudaMalloc(void**, unsigned long long);\n")
        os.utime(self.header, ns=(0, 1))
        self.assertIsNone(cache.load(self.entry()))
        cache.store(self.entry(), {"api_ids.h": "#define A 1\n"}, {str(self.header)}, "new\n")
        self.assertEqual(cache.load(self.entry()), ({"api_ids.h": "#define A 1\n"}, [str(self.header)], "new\n"))

    def test_no_entry_is_stored_for_a_run_whose_input_is_gone(self):
        cache.store(self.entry(), self.outputs, {str(self.root / "missing.h")}, "")
        self.assertIsNone(cache.load(self.entry()))


if __name__ == "__main__":
    unittest.main()
