"""numpyrt: a sharded-array runtime over numpy alone, and its plugin for xharness.

It is the example of a runtime that is not built on JAX: nothing in this package imports JAX,
and the runtime learns how many devices the cell gives it from ``harness.api.cell_shape()``
(read by the adapter), never from ``jax.devices()``. Its one fault switch,
``transposed-placement``, puts blocks on the wrong devices when a spec names the mesh's axes in
another order than the mesh; the plugin's scenario and invariant catch it (``pyproject.toml``
registers them).
"""

__version__ = "0.1.0"
