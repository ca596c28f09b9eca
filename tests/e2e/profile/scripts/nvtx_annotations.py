"""NVTX from Python with the `nvtx` package, as people annotate scripts: a decorator, a context manager
in a domain of its own with a category and a payload, push/pop, start/end and a mark. No CUDA at all.

usage: nvtx_annotations.py <iterations>
stdout: "done <iterations>"."""
import sys

import nvtx


@nvtx.annotate("py.step", color="blue")
def step(i):
    with nvtx.annotate("py.inner", domain="py_domain", category="phase", payload=i):
        pass


def main():
    iterations = int(sys.argv[1])
    nvtx.push_range("py.all")
    whole = nvtx.start_range("py.startend")
    for i in range(iterations):
        step(i)
    nvtx.mark("py.mark")
    nvtx.end_range(whole)
    nvtx.pop_range()
    print(f"done {iterations}")


if __name__ == "__main__":
    main()
