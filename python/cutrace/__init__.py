"""Read cutrace traces as tables: pyarrow, pandas, DuckDB.

    import cutrace
    trace = cutrace.open("run.cutrace")
    trace.tables()                                   # the table names (docs/sql.md)
    kernels = trace.table("CUPTI_ACTIVITY_KIND_KERNEL")   # a pyarrow.Table
    kernels.to_pandas()
    for name, batch in trace.batches(): ...          # every table, a record batch at a time

The tables are those of `cutrace export --type sqlite`, with the same columns and rows: the trace is
read by the project's own C++ reader (libcutrace-tables.so), which hands Arrow record batches over the
Arrow C data interface, so a trace of any size streams with bounded memory.
"""
import ctypes
import os
import stat
from pathlib import Path

try:
    import pyarrow as pa
except ImportError as _e:  # `python3 -m cutrace export` says what is missing, in one sentence
    pa = None
    _PYARROW_ERROR = _e

__all__ = ["open", "Trace", "TraceError", "table_names", "read_arrow_export"]

_ABI_VERSION = 4


class TraceError(Exception):
    """A trace that cannot be read, or a library that does not fit this package; the message says why."""


class _ArrowSchema(ctypes.Structure):
    _fields_ = [("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_char_p),
                ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64), ("children", ctypes.c_void_p),
                ("dictionary", ctypes.c_void_p), ("release", ctypes.c_void_p), ("private_data", ctypes.c_void_p)]


class _ArrowArray(ctypes.Structure):
    _fields_ = [("length", ctypes.c_int64), ("null_count", ctypes.c_int64), ("offset", ctypes.c_int64),
                ("n_buffers", ctypes.c_int64), ("n_children", ctypes.c_int64), ("buffers", ctypes.c_void_p),
                ("children", ctypes.c_void_p), ("dictionary", ctypes.c_void_p), ("release", ctypes.c_void_p),
                ("private_data", ctypes.c_void_p)]


def _library_path():
    """libcutrace-tables.so: $CUTRACE_TABLES_LIBRARY, else beside this package (pip install .)."""
    given = os.environ.get("CUTRACE_TABLES_LIBRARY")
    if given:
        return Path(given)
    return Path(__file__).resolve().parent / "libcutrace-tables.so"


_lib = None


def _library():
    global _lib
    if _lib is not None:
        return _lib
    if pa is None:
        raise TraceError(f"the cutrace package needs pyarrow, which this Python cannot import ({_PYARROW_ERROR}); "
                         "pip install pyarrow")
    path = _library_path()
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise TraceError(f"cannot load {path} ({e}); install the package with `pip install .` from a cutrace "
                         "checkout, or set CUTRACE_TABLES_LIBRARY to a build's lib/libcutrace-tables.so") from None
    lib.cutrace_tables_abi_version.restype = ctypes.c_int
    if lib.cutrace_tables_abi_version() != _ABI_VERSION:
        raise TraceError(f"{path} is of another cutrace version than this package; install both from one checkout")
    lib.cutrace_tables_count.restype = ctypes.c_int
    lib.cutrace_tables_name.restype = ctypes.c_char_p
    lib.cutrace_tables_name.argtypes = [ctypes.c_int]
    lib.cutrace_tables_schema.argtypes = [ctypes.c_int, ctypes.POINTER(_ArrowSchema)]
    lib.cutrace_tables_open.restype = ctypes.c_void_p
    lib.cutrace_tables_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                                        ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, ctypes.c_char_p,
                                        ctypes.c_size_t]
    lib.cutrace_tables_next.restype = ctypes.c_int
    lib.cutrace_tables_next.argtypes = [ctypes.c_void_p, ctypes.POINTER(_ArrowArray)]
    lib.cutrace_tables_complete.restype = ctypes.c_int
    lib.cutrace_tables_complete.argtypes = [ctypes.c_void_p]
    lib.cutrace_tables_status.restype = ctypes.c_char_p
    lib.cutrace_tables_status.argtypes = [ctypes.c_void_p]
    lib.cutrace_tables_progress.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                                            ctypes.POINTER(ctypes.c_uint64)]
    lib.cutrace_tables_close.argtypes = [ctypes.c_void_p]
    lib.cutrace_tables_cuda_library_prefixes.restype = ctypes.c_char_p
    lib.cutrace_tables_metadata.restype = ctypes.c_int64
    lib.cutrace_tables_metadata.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                            ctypes.c_size_t]
    _lib = lib
    return lib


def cuda_library_prefixes():
    """The file-name prefixes of the CUDA libraries cutrace traces, as include/cutrace/domains.def lists
    them ("libcudart.so", "libcudnn_", ...)."""
    return _library().cutrace_tables_cuda_library_prefixes().decode().split()


def table_names():
    """Every table a trace can have, in the order of the export (those of docs/sql.md)."""
    lib = _library()
    return [lib.cutrace_tables_name(i).decode() for i in range(lib.cutrace_tables_count())]


def _schemas():
    lib = _library()
    schemas = []
    for i in range(lib.cutrace_tables_count()):
        c = _ArrowSchema()
        lib.cutrace_tables_schema(i, ctypes.byref(c))
        schemas.append(pa.Schema._import_from_c(ctypes.addressof(c)))
    return schemas


class Trace:
    """A cutrace trace, read as tables. Each of batches(), table() and tables_of() reads the trace once."""

    def __init__(self, path, show_internal=False, start_ns=0, end_ns=None, times=None, ts_normalize=False,
                 ts_shift_ns=0):
        self.path = str(path)
        self.show_internal = show_internal
        self.start_ns = start_ns
        self.end_ns = (1 << 64) - 1 if end_ns is None else end_ns
        self.times = [times] if isinstance(times, str) else list(times or [])
        self.ts_normalize = ts_normalize
        self.ts_shift_ns = ts_shift_ns
        self.complete = None  # after a read: whether the trace was whole
        self.status = None    # and the reader's sentence about it
        self._metadata = None
        # Fails now, with the reader's sentence, rather than at the first read.
        self._close(self._open())

    def _open(self):
        lib = _library()
        error = ctypes.create_string_buffer(1024)
        times = ",".join(self.times).encode() if self.times else None
        handle = lib.cutrace_tables_open(os.fsencode(self.path), int(self.show_internal), self.start_ns, self.end_ns,
                                         times, int(self.ts_normalize), self.ts_shift_ns, error, len(error))
        if not handle:
            raise TraceError(error.value.decode(errors="replace"))
        return handle

    def _close(self, handle):
        lib = _library()
        self.complete = bool(lib.cutrace_tables_complete(handle))
        self.status = lib.cutrace_tables_status(handle).decode(errors="replace")
        lib.cutrace_tables_close(handle)

    @property
    def metadata(self):
        """The metadata the trace starts with, as META_DATA_CAPTURE has it ({"host": ..., "job.rank": ...,
        "start.realtime_ns": ...}), read without reading the events."""
        if self._metadata is None:
            lib = _library()
            error = ctypes.create_string_buffer(1024)
            size = 1 << 16
            while True:
                out = ctypes.create_string_buffer(size)
                need = lib.cutrace_tables_metadata(os.fsencode(self.path), out, size, error, len(error))
                if need < 0:
                    raise TraceError(error.value.decode(errors="replace"))
                if need <= size:
                    break
                size = need
            fields = out.raw[:need].split(b"\0")[:-1]
            pairs = {}
            for key, value in zip(fields[0::2], fields[1::2]):
                pairs.setdefault(key.decode(errors="replace"), value.decode(errors="replace"))  # the first wins
            self._metadata = pairs
        return self._metadata

    def _job(self, key):
        value = self.metadata.get(key)
        return int(value) if value is not None else None

    @property
    def rank(self):
        """The session's rank in its job (job.rank: from the launcher's environment), or None."""
        return self._job("job.rank")

    @property
    def local_rank(self):
        """job.local_rank, or None."""
        return self._job("job.local_rank")

    @property
    def world_size(self):
        """job.world_size, or None."""
        return self._job("job.world_size")

    def tables(self):
        """The names of the tables (all of them: a table the trace has no rows for is empty)."""
        return table_names()

    def batches(self, progress=None):
        """Yields (table name, pyarrow.RecordBatch) for every row of every table, in one pass.
        `progress(done_bytes, total_bytes)`, when given, is called after each batch."""
        lib = _library()
        names, schemas = table_names(), _schemas()
        handle = self._open()
        done, total = ctypes.c_uint64(), ctypes.c_uint64()
        try:
            while True:
                c = _ArrowArray()
                table = lib.cutrace_tables_next(handle, ctypes.byref(c))
                if table < 0:
                    break
                batch = pa.RecordBatch._import_from_c(ctypes.addressof(c), schemas[table])
                if progress:
                    lib.cutrace_tables_progress(handle, ctypes.byref(done), ctypes.byref(total))
                    progress(done.value, total.value)
                yield names[table], batch
        finally:
            self._close(handle)

    def tables_of(self, names):
        """{name: pyarrow.Table} for the tables named, in one pass."""
        wanted = {n: [] for n in names}
        unknown = set(wanted) - set(table_names())
        if unknown:
            raise TraceError(f"no table {', '.join(sorted(unknown))}; the tables are {', '.join(table_names())}")
        schemas = dict(zip(table_names(), _schemas()))
        for name, batch in self.batches():
            if name in wanted:
                wanted[name].append(batch)
        return {n: pa.Table.from_batches(b, schema=schemas[n]) for n, b in wanted.items()}

    def table(self, name):
        """One table as a pyarrow.Table (.to_pandas() for a DataFrame; DuckDB queries it by name)."""
        return self.tables_of([name])[name]


def open(path, show_internal=False, start_ns=0, end_ns=None, times=None, ts_normalize=False,  # noqa: A001
         ts_shift_ns=0):
    """Opens a trace; raises TraceError with the reason when it cannot be read. start_ns and end_ns
    choose a window counted from the session's start; times (nsys export's --times ranges, a string or
    a list of them), ts_normalize (times in ns since the epoch) and ts_shift_ns move and filter the
    tables' times as nsys export's options of those names do."""
    return Trace(path, show_internal=show_internal, start_ns=start_ns, end_ns=end_ns, times=times,
                 ts_normalize=ts_normalize, ts_shift_ns=ts_shift_ns)


_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind_of_mode(mode):
    return next((k for test, k in _FILE_KINDS if test(mode)), "a special file")


def _file_kind(path):
    """What a path that exists but is no regular file is ("a FIFO (named pipe)", "a directory", ...)."""
    return _kind_of_mode(os.stat(path).st_mode)


def _refuse_unless_regular(path, what):
    """Raises TraceError in one sentence when `path` is not a regular file: opening a FIFO (or a link
    to one) for reading would wait for a writer forever, and a directory or a device is no file of ours."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file; check the path.") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot open ({e.strerror}); check its permissions.") from None
    if not stat.S_ISREG(mode):
        raise TraceError(f"{path}: is {_kind_of_mode(mode)}, not {what}.")


def read_arrow_export(path):
    """{table name: pyarrow.Table} of a `cutrace export --type arrow` file: one Arrow IPC stream per
    table, one after the other, each naming its table in its schema's metadata ("table"), which the
    tables returned no longer carry. Needs no trace and no libcutrace-tables.so."""
    import pyarrow.ipc as ipc
    _refuse_unless_regular(path, "an arrow export; give the path of a file `cutrace export --type arrow` wrote")
    tables = {}
    with pa.OSFile(str(path), "rb") as f:
        size = f.size()
        while f.tell() < size:
            at = f.tell()
            reader = ipc.open_stream(f)
            table = reader.read_all()
            name = (reader.schema.metadata or {}).get(b"table")
            if name is None:
                raise TraceError(f"{path}: the Arrow stream at byte {at} names no table; it is not a cutrace "
                                 "arrow export")
            tables[name.decode()] = table.replace_schema_metadata(None)
    return tables
