"""Slow synchronising calls from PyTorch, for the real-GPU test of Python frames read without the GIL:
torch.cuda.synchronize() and .item() both wait for a long matrix product, and PyTorch releases the GIL
around both. The lines of the two calls end with "# SLOW: <name>", by which the test finds them.

usage: python_lines.py"""
import torch


def product(a, b, rounds):
    for _ in range(rounds):
        a = a @ b
    return a


def wait_all(a):
    torch.cuda.synchronize()  # SLOW: synchronize


def read_back(a):
    return a.sum().item()  # SLOW: item


def main():
    a = torch.randn(4096, 4096, device="cuda") / 64
    b = torch.eye(4096, device="cuda")
    wait_all(product(a, b, 50))
    print("sum", round(read_back(product(a, b, 50)), 1))


main()
