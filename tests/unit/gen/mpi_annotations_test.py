"""The generator's MPI annotations (domain = "mpi"): the slot formats that compute a value from several
parameters are checked where they are read, and the wrappers it writes call the profiling interface's
PMPI_ function, read their inputs before the call and their out-parameters after a successful one.
Usage: mpi_annotations_test.py"""
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "preload" / "gen"))
from cutrace_gen.common import ARG_FORMATS, GenError  # noqa: E402
from cutrace_gen.emit_interposers import emit_mpi_wrapper  # noqa: E402
from cutrace_gen.model import Api, validate_function  # noqa: E402
from cutrace_gen.schema import load_library  # noqa: E402
from cutrace_gen.tokens import Param, Prototype, Token  # noqa: E402

LIBRARY = """[library]
soname = "libmpi.so.40"
domain = "{domain}"
wrap = "listed"
headers = ["mpi.h"]
success = "MPI_SUCCESS"
[library.results]
int = {{ kind = "error" }}
"""


def load(domain, functions):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "mpi.toml"
        text = LIBRARY.format(domain=domain) + functions
        if domain != "mpi":
            text = text.replace('wrap = "listed"\n', "")
        path.write_text(text)
        return load_library("openmpi", path, Path("/nonexistent/libmpi.so.40"))


class MpiAnnotations(unittest.TestCase):
    def refused(self, domain, functions):
        with self.assertRaises(GenError) as e:
            load(domain, functions)
        return str(e.exception)

    def test_formats_take_their_components(self):
        spec = load("mpi", '[functions.MPI_Send]\nargs = [{ param = "dest", format = "mpi_rank", '
                           'components = ["dest", "comm"], name = "peer" }, '
                           '{ param = "comm", format = "mpi_comm" }]\n')
        peer, comm = spec.functions["MPI_Send"].args
        self.assertEqual((peer.fmt, peer.components, peer.label), ("mpi_rank", ["dest", "comm"], "peer"))
        self.assertEqual((comm.fmt, comm.components), ("mpi_comm", ["comm"]))
        self.assertEqual(ARG_FORMATS["mpi_rank"], "kMpiRank")
        self.assertEqual(ARG_FORMATS["mpi_datatype"], "kMpiDatatype")

    def test_a_rank_without_its_communicator_is_refused(self):
        message = self.refused("mpi", '[functions.MPI_Send]\nargs = [{ param = "dest", format = "mpi_rank" }]\n')
        self.assertIn('format "mpi_rank" takes the rank and its communicator: components names 2 parameters, '
                      'param being the first', message)

    def test_bytes_must_start_with_the_count(self):
        message = self.refused("mpi", '[functions.MPI_Send]\nargs = [{ param = "count", format = "mpi_bytes", '
                                      'components = ["datatype", "count"] }]\n')
        self.assertIn('format "mpi_bytes" takes the count and its datatype', message)

    def test_a_field_is_refused(self):
        message = self.refused("mpi", '[functions.MPI_Recv]\nargs = [{ param = "status", format = "mpi_status_tag", '
                                      'field = "MPI_TAG" }]\n')
        self.assertIn('format "mpi_status_tag" takes the parameter itself; remove field', message)

    def test_mpi_formats_belong_to_the_mpi_domain(self):
        message = self.refused("cuda_runtime", '[functions.cudaFree]\nargs = [{ param = "p", format = "mpi_comm" }]\n')
        self.assertIn('"mpi_comm" is for the MPI wrappers (domain = "mpi")', message)

    def test_the_mpi_domain_wraps_a_list(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "mpi.toml"
            path.write_text(LIBRARY.format(domain="mpi").replace('wrap = "listed"\n', ""))
            with self.assertRaises(GenError) as e:
                load_library("openmpi", path, Path("/nonexistent"))
        self.assertIn('an mpi library wraps only the functions it lists, unversioned', str(e.exception))


class MpiWrapper(unittest.TestCase):
    def test_inputs_before_the_call_outputs_after_a_successful_one(self):
        spec = load("mpi", '[functions.MPI_Recv]\nargs = [{ param = "comm", format = "mpi_comm" }, '
                           '{ param = "status", format = "mpi_status_tag", name = "status_tag", out = true }]\n'
                           'hook = { name = "forget_comm", args = ["comm"] }\n')
        def param(*words):
            tokens = [Token(w, "mpi.h", 1) for w in words]
            return Param(tokens, words[-1], len(words) - 1, "*" in words)
        proto = Prototype("MPI_Recv", [Token("int", "mpi.h", 1)],
                          [param("void", "*", "buf"), param("int", "count"), param("MPI_Comm", "comm"),
                           param("MPI_Status", "*", "status")], False, "mpi.h", 1)
        api = Api("MPI_Recv", spec, proto, spec.functions["MPI_Recv"], id=7)
        validate_function(api)
        text = emit_mpi_wrapper(api, 3)
        self.assertIn("cutrace::mpi::real_function<CutraceFn>(3)", text)
        self.assertIn("cutrace::kApi_openmpi_MPI_Recv", text)
        before, after = text.split("CallScope cutrace_scope", 1)
        self.assertIn("cutrace_args[0] = cutrace::mpi::comm_id(comm);", before)
        self.assertIn("cutrace::mpi::hooks::forget_comm(comm);", before)
        self.assertIn("cutrace_args[1] = cutrace_result == MPI_SUCCESS ? cutrace::mpi::status_tag(status) : 0;", after)
        # Not recording: the hook still runs, before the call.
        self.assertLess(text.index("forget_comm"), text.index("return cutrace_real("))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]])
