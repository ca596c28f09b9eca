"""A launcher of ranks, as mpirun or torchrun is: its children get different job variables in their
environments, in the two ways a tracer must follow (exec, and fork without exec).

usage: job_launcher.py LIBRARY PROGRAM [ARG...]
Exec: runs PROGRAM ARG... four times, one after another, with (the other job variables removed)
  exec0: RANK=0 LOCAL_RANK=0 WORLD_SIZE=6
  exec1: OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_LOCAL_RANK=1 OMPI_COMM_WORLD_SIZE=6
  exec2: RANK=2 WORLD_SIZE=6 and SLURM_PROCID=9 SLURM_LOCALID=9 SLURM_NTASKS=99 (RANK's family wins;
         no LOCAL_RANK, so no local rank: families are not mixed)
  exec3: none
Fork: then two children forked without exec, fork4 and fork5, each of which sets RANK=4|5,
LOCAL_RANK=0|1, WORLD_SIZE=6 in its own environment before it loads LIBRARY (the CUDA runtime) with
ctypes and calls cudaGetDeviceCount: the parent itself never uses CUDA.
stdout: "<role> pid <pid>" for each child."""
import ctypes
import os
import subprocess
import sys

JOB_VARIABLES = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                 "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE", "SLURM_PROCID", "SLURM_LOCALID",
                 "SLURM_NTASKS"]

EXEC_CHILDREN = [
    ("exec0", {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "6"}),
    ("exec1", {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_SIZE": "6"}),
    ("exec2", {"RANK": "2", "WORLD_SIZE": "6", "SLURM_PROCID": "9", "SLURM_LOCALID": "9", "SLURM_NTASKS": "99"}),
    ("exec3", {}),
]


def main():
    library, command = sys.argv[1], sys.argv[2:]
    base = {k: v for k, v in os.environ.items() if k not in JOB_VARIABLES}
    for role, variables in EXEC_CHILDREN:
        child = subprocess.Popen(command, env={**base, **variables}, stdout=subprocess.DEVNULL)
        print(f"{role} pid {child.pid}", flush=True)
        if child.wait() != 0:
            sys.exit(f"{role} exited {child.returncode}")
    for rank in (4, 5):
        pid = os.fork()
        if pid == 0:
            for name in JOB_VARIABLES:
                os.environ.pop(name, None)
            os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank - 4), "WORLD_SIZE": "6"})
            count = ctypes.c_int(0)
            status = ctypes.CDLL(library).cudaGetDeviceCount(ctypes.byref(count))
            os.write(1, f"fork{rank} pid {os.getpid()}\n".encode())
            os._exit(0 if status == 0 else 1)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            sys.exit(f"fork{rank} exited with status {status}")


if __name__ == "__main__":
    main()
