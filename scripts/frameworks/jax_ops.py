"""A JAX program whose every kernel XLA names by its op and module: a jitted step with its gradient run
three times, an FFT through cuFFT, and a three-layer step in named scopes, large enough for XLA to record
it as a command buffer (a CUDA graph) and replay it. Run on the simulated device by
tests/unit/simcuda/jax_test.py and on a GPU by the kit's test_real_gpu.py."""
import jax
import jax.numpy as jnp
print("jax", jax.__version__, "backend", jax.default_backend(), "devices", jax.devices())

@jax.jit
def step(w, x):
    return w - 0.01 * jax.grad(lambda w: jnp.mean((x @ w) ** 2))(w)

w = jnp.ones((64, 64))
x = jnp.ones((32, 64))
for _ in range(3):
    w = step(w, x)
w.block_until_ready()
print("step", w.shape, w.dtype, "on", list(w.devices())[0].platform)
spectrum = jax.jit(lambda v: jnp.fft.rfft(v, axis=-1))(x)
print("fft", spectrum.shape, spectrum.dtype)

# Enough ops for XLA to record the step into a command buffer (a CUDA graph) and replay it.
def mlp(params, x):
    for i, w in enumerate(params):
        with jax.named_scope(f"layer{i}"):
            x = jnp.tanh(x @ w)
    return jnp.mean(x ** 2)

@jax.jit
def deep_step(params, x):
    grads = jax.grad(mlp)(params, x)
    return [w - 0.01 * g for w, g in zip(params, grads)]

params = [jnp.ones((64, 64)) for _ in range(3)]
for _ in range(4):
    params = deep_step(params, x)
params[0].block_until_ready()
print("deep step", params[0].shape)
