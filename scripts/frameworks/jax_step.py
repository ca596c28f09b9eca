"""A short JAX start-up and jitted step. Without a driver the CUDA plugin fails to initialise and JAX
falls back to the CPU, as it says on stderr."""
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
print("sum", float(w.sum()), "on", jax.default_backend())
