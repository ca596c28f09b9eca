"""A short PyTorch training loop for scripts/gpu-check.sh: an MLP and a convolution, NVTX ranges per
step, a loss read back every step (a synchronising copy), on the GPU. Profiled with backtraces, Python
frames, CPU samples and context switches, it shows what each of those gives on a real device.

usage: train_step.py [steps=50]"""
import sys

import torch
import torch.nn.functional as F


def make_model():
    mlp = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
    conv = torch.nn.Conv2d(3, 32, 3).cuda()
    return mlp, conv


def train_step(mlp, conv, opt, x, images, target):
    with torch.cuda.nvtx.range("train_step"):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(mlp(x), target) + conv(images).square().mean()
        loss.backward()
        opt.step()
        return loss.item()  # the copy back waits for the step


def main(steps):
    torch.manual_seed(0)
    mlp, conv = make_model()
    opt = torch.optim.SGD(list(mlp.parameters()) + list(conv.parameters()), lr=0.01)
    x = torch.randn(512, 1024, device="cuda")
    images = torch.randn(64, 3, 128, 128, device="cuda")
    target = torch.randint(0, 10, (512,), device="cuda")
    for _ in range(steps):
        loss = train_step(mlp, conv, opt, x, images, target)
    print("loss", round(loss, 3))


main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
