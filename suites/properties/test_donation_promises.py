"""What each runtime promises about a donated buffer, held exactly by the donation invariant.

JAX deletes a donated array in the donating call, except a donation XLA declines, which it
reports with the warning "Some donated buffers were not usable" and then leaves alive (0.10.2
does so for an output smaller than the donated input). The JAX adapter reports that warning, so
the invariant accepts a live buffer exactly when JAX said it declined the donation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.adapters.jax import JaxAdapter


class _Shrinking:
    """``jax`` as the adapter sees it, but its donating program returns a smaller array: a
    donation XLA cannot use."""

    def __init__(self, jax: Any) -> None:
        self._jax = jax

    def __getattr__(self, name: str) -> Any:
        return getattr(self._jax, name)

    def jit(self, fn: Any, **kwargs: Any) -> Any:
        return self._jax.jit(lambda x: fn(x)[:1], **kwargs)


def test_an_accepted_donation_deletes_and_is_not_called_declined() -> None:
    rt = JaxAdapter()
    t = rt.tensor(np.arange(4, dtype=np.float32))
    rt.donate(t)
    assert t.is_deleted() and not rt.donation_declined()


def test_a_declined_donation_is_reported_and_the_buffer_keeps_its_input(monkeypatch: pytest.MonkeyPatch) -> None:
    rt = JaxAdapter()
    monkeypatch.setattr(rt, "jax", _Shrinking(rt.jax))
    t = rt.tensor(np.arange(4, dtype=np.float32))
    rt.donate(t)
    assert rt.donation_declined(), "JAX's warning for a declined donation was not seen"
    if not t.is_deleted():  # the release left it alive, as it may after saying so
        assert np.array_equal(rt.read_grabbed(rt.grab(t)), np.arange(4, dtype=np.float32))
