"""tinyjax: a tiny runtime over plain JAX, and its plugin for xharness.

The runtime lays tensors out over a device mesh with ``jax.device_put``. Its one fault switch,
``dropped-axis``, re-creates a layout bug of the kind distributed runtimes ship: the last sharded
dimension of a spec is dropped, so the tensor is replicated along it while the caller asked for it
to be split. The plugin registers the runtime, a scenario that reproduces the bug and an invariant
that catches it, through xharness' entry points (``pyproject.toml``).
"""

__version__ = "0.1.0"
