"""What happens to the GPU activity cutrace collects when the program starts PyTorch's own profiler
(Kineto) in the middle: three phases of N in-place operations on one tensor, each phase with its own
kernel (fill_ before the profiler, mul_ under it, add_ after it), so the kernel instances in a trace
say which phases it kept. Prints what Kineto saw of the middle phase.

usage: kineto_handover.py [N=200]"""
import json
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
x = torch.empty(4096, device="cuda")  # no kernel: the fill phase launches the first
torch.cuda.synchronize()
for _ in range(n):
    x.fill_(1.0)
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(n):
        x.mul_(1.0001)
    torch.cuda.synchronize()
kineto_kernels = sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)
for _ in range(n):
    x.add_(1.0)
torch.cuda.synchronize()
print(json.dumps({"ops_per_phase": n, "kineto_gpu_events": kineto_kernels, "value": round(float(x[0]), 3)}))
