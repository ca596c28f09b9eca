"""What every part of the generator shares: its error and its name in messages, and the vocabulary of
include/cutrace/abi.h and format.h (domains, classes, argument formats, result kinds), which the
annotations are checked against and the emitters print."""

from __future__ import annotations

import re
from pathlib import Path

PROG = "gen_wrappers"


class GenError(Exception):
    """A problem the user has to fix; printed as one message, exit status 1."""


DOMAINS_FILE = Path(__file__).resolve().parents[3] / "include" / "cutrace" / "domains.def"


def read_domains(path: Path) -> dict[str, str]:
    """{name: ApiDomain enumerator} from the rows of domains.def, the list the C++ side includes."""
    row = re.compile(r'CUTRACE_DOMAIN\(\s*(k\w+)\s*,\s*(\d+)\s*,\s*"(\w+)"\s*,.*\)\s*$')
    domains = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.startswith("CUTRACE_DOMAIN("):
            continue
        m = row.match(line)
        if not m:
            raise GenError(f"{path}:{number}: a row is CUTRACE_DOMAIN(kName, id, \"name\", ...) on one line")
        domains[m.group(3)] = m.group(1)
    if not domains:
        raise GenError(f"{path}: no CUTRACE_DOMAIN rows")
    return domains


DOMAINS = read_domains(DOMAINS_FILE)

CLASSES = {"other": "kOther", "sync": "kSync", "memory": "kMemory", "kernel": "kKernel"}

ARG_FORMATS = {
    "unsigned": "kUnsigned",
    "signed": "kSigned",
    "bytes": "kBytes",
    "pointer": "kPointer",
    "memcpy_kind": "kMemcpyKind",
    "stream": "kStream",
    "device": "kDevice",
    "kernel_stub": "kKernelStub",
    "kernel_handle": "kKernelHandle",
    "dim3": "kDim3",
    "flags": "kFlags",
    "function": "kFunction",
    "enum": "kEnum",
}

# The MPI wrappers' formats (domain = "mpi"): a slot computed from one or more parameters by a function of
# preload/mpi_runtime.h, cutrace::mpi::FUNCTION(param, components[1:]...). Each is
# format -> (abi::ArgFormat, function, the parameters it takes, what they are).
MPI_FORMATS = {
    "mpi_comm": ("kUnsigned", "comm_id", 1, "the communicator"),
    "mpi_comm_size": ("kUnsigned", "comm_size", 1, "the communicator"),
    "mpi_rank": ("kMpiRank", "world_rank", 2, "the rank and its communicator"),
    "mpi_datatype": ("kMpiDatatype", "datatype_id", 1, "the datatype"),
    "mpi_bytes": ("kBytes", "bytes", 2, "the count and its datatype"),
    "mpi_status_source": ("kMpiRank", "status_source", 2, "the status and the communicator"),
    "mpi_status_tag": ("kSigned", "status_tag", 1, "the status"),
}
ARG_FORMATS.update({name: f[0] for name, f in MPI_FORMATS.items()})

# How a return value is recorded (format::ResultKind) and flagged (abi::kCallFlag*).
RESULT_KINDS = {
    "error": ("kErrorCode", None),
    "pointer": ("kPointer", "cutrace::abi::kCallFlagResultIsPointer"),
    "unsigned": ("kUnsigned", None),
    # A signed integer or an enum that is no error code (a count, a version, -1 for failure).
    "signed": ("kSigned", None),
    # A value the record cannot hold (a struct): recorded like a void function.
    "none": ("kVoid", "cutrace::abi::kCallFlagNoResult"),
}

MAX_ARGS = 12  # abi::kMaxApiArgs
