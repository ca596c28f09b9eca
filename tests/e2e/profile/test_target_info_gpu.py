"""TARGET_INFO_GPU: the GPUs as CUPTI describes them (its DEVICE records, one per device), carried by the
trace's GPU device records into nsys's table, here for the simulated device(s) of tests/simcuda/core/device.h
exactly; none without GPU activity; `cutrace info` lists them. TARGET_INFO_CUDA_DEVICE: which of them
each process's device numbers are."""
import sqlite3

from conftest import app, profile, run_tool, sim_env


def uuid_text(device):
    # The simulated device's UUID bytes (device_uuid in core/device.cpp), written as nvidia-smi writes one.
    h = f"simcuda-dev{device:04d}".encode().ljust(16, b"\0").hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def expected_row(device):
    """The simulated Hopper-class part of core/device.h, in nsys's columns and units (B/s, Hz)."""
    return {
        "vmId": 0, "id": device, "name": f"Simulated CUDA Device {device}", "busLocation": None, "isDiscrete": None,
        "l2CacheSize": 50 << 20, "totalMemory": 16384 << 20,
        # Double data rate: 2 x 2,619,000 kHz x 5120 bits / 8, CUPTI's kB/s in B/s.
        "memoryBandwidth": 2 * 2619000 * 640 * 1000, "clockRate": 1755000 * 1000, "smCount": 132,
        "pwGpuId": None, "uuid": uuid_text(device), "luid": None, "chipName": None, "cuDevice": device,
        "ctxswDevPath": None, "ctrlDevPath": None, "revision": None, "nodeMask": None, "constantMemory": 64 << 10,
        "maxIPC": 4, "maxRegistersPerBlock": 65536, "maxShmemPerBlock": 48 << 10, "maxShmemPerBlockOptin": None,
        "maxShmemPerSm": 228 << 10, "maxRegistersPerSm": 65536, "threadsPerWarp": 32, "asyncEngines": 3,
        "maxWarpsPerSm": 64, "maxBlocksPerSm": 32, "maxThreadsPerBlock": 1024, "maxBlockDimX": 1024,
        "maxBlockDimY": 1024, "maxBlockDimZ": 64, "maxGridDimX": 2147483647, "maxGridDimY": 65535,
        "maxGridDimZ": 65535, "computeMajor": 9, "computeMinor": 0, "smMajor": None, "smMinor": None,
    }


def gpu_rows(trace, out):
    run_tool("export", "--type", "sqlite", "-o", out, trace)
    db = sqlite3.connect(out)
    db.row_factory = sqlite3.Row
    return [dict(r) for r in db.execute("SELECT * FROM TARGET_INFO_GPU ORDER BY rowid")]


def test_the_simulated_device_is_one_row_with_nsys_columns(tmp_path):
    _, trace = profile(tmp_path, [app("sim_vector_add"), "2"])
    rows = gpu_rows(trace, tmp_path / "one.sqlite")
    assert rows == [expected_row(0)]
    db = sqlite3.connect(tmp_path / "one.sqlite")
    (pid,) = db.execute("SELECT pid FROM CUTRACE_PROCESSES").fetchone()
    assert db.execute("SELECT * FROM TARGET_INFO_CUDA_DEVICE").fetchall() == [(0, 0, pid, uuid_text(0), 132)]
    # The columns in nsys's order (its schema reference), every one of them.
    assert list(rows[0]) == list(expected_row(0))
    # cutrace info says what the device numbers of the trace mean.
    text = run_tool("info", trace).stdout
    section = text.split("\nGPUs (1):\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert section[0].split() == ["PID", "Device", "Name", "CC", "SMs", "Memory", "UUID"]
    assert section[1].split()[1:] == ["0", "Simulated", "CUDA", "Device", "0", "9.0", "132", "16.00", "GiB",
                                      uuid_text(0)]


def test_two_devices_are_two_rows(tmp_path):
    _, trace = profile(tmp_path, [app("sim_vector_add"), "2"], env=sim_env(SIMCUDA_DEVICE_COUNT=2))
    assert gpu_rows(trace, tmp_path / "two.sqlite") == [expected_row(0), expected_row(1)]


def test_without_gpu_activity_the_table_is_empty(tmp_path):
    _, trace = profile(tmp_path, [app("sim_vector_add"), "2"], options=["--gpu-activity", "false"])
    assert gpu_rows(trace, tmp_path / "none.sqlite") == []
    assert "\nGPUs (" not in run_tool("info", trace).stdout


def test_each_process_maps_its_device_numbers_to_the_gpus(tmp_path):
    # Two processes on a two-GPU machine: one sees only GPU 1 (CUDA_VISIBLE_DEVICES=1), as its device 0;
    # the other sees both. TARGET_INFO_GPU numbers the GPUs as the process that saw the most did, and
    # TARGET_INFO_CUDA_DEVICE gives each process's device numbers, so a kernel's (pid, deviceId) names
    # its GPU, as tools reading nsys's export join them.
    vector_add = app("sim_vector_add")
    _, trace = profile(tmp_path, ["sh", "-c", f"CUDA_VISIBLE_DEVICES=1 {vector_add} 2 && {vector_add} 2"],
                       env=sim_env(SIMCUDA_DEVICE_COUNT=2))
    out = tmp_path / "mapped.sqlite"
    assert gpu_rows(trace, out) == [expected_row(0), expected_row(1)]
    db = sqlite3.connect(out)
    (narrowed, both) = [pid for (pid,) in db.execute(
        "SELECT pid FROM CUTRACE_PROCESSES WHERE executable LIKE '%sim_vector_add' ORDER BY rowid")]
    assert db.execute("SELECT * FROM TARGET_INFO_CUDA_DEVICE ORDER BY pid = ?, cudaId", (both,)).fetchall() == [
        (1, 0, narrowed, uuid_text(1), 132), (0, 0, both, uuid_text(0), 132), (1, 1, both, uuid_text(1), 132)]
    kernels_by_gpu = db.execute("""
        SELECT k.globalPid / 16777216 % 16777216, k.deviceId, g.name, count(*)
        FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
        JOIN TARGET_INFO_CUDA_DEVICE AS c ON c.pid = k.globalPid / 16777216 % 16777216 AND c.cudaId = k.deviceId
        JOIN TARGET_INFO_GPU AS g ON g.id = c.gpuId
        GROUP BY 1, 2, 3 ORDER BY 1 = ?""", (both,)).fetchall()
    assert kernels_by_gpu == [(narrowed, 0, "Simulated CUDA Device 1", 4), (both, 0, "Simulated CUDA Device 0", 4)]
