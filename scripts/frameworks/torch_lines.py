"""torch.cuda.is_available() and device_count() from named functions, for scripts/check-frameworks.sh:
their CUDA runtime calls' stacks must hold this script's lines ("# LINE: <name>"), with or without a
GPU."""
import torch


def probe():
    return torch.cuda.is_available()  # LINE: probe


def count():
    return torch.cuda.device_count()  # LINE: count


print(probe(), count())
