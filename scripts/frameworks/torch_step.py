"""A short PyTorch start-up and training step, as a user's script would make it. On a machine without
a driver PyTorch finds no GPU after asking the CUDA runtime; the step then runs on the CPU."""
import torch

print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
available = torch.cuda.is_available()
print("cuda available", available, "devices", torch.cuda.device_count())
device = "cuda" if available else "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(8 * 30 * 30, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 3, 32, 32, device=device)
y = torch.randint(0, 10, (16,), device=device)
for _ in range(3):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
if available:
    torch.cuda.synchronize()
print("loss", round(float(loss), 4), "on", device)
