"""Optimizers whose updates are in-place ops on parameters, recorded into the step's graph.

Every per-step quantity (Adam's step count and bias corrections included) lives on the device, so
the recorded graph is the same every step and the steady state compiles nothing new. State
buffers (momentum, Adam's moments) are created with their parameter's layout for the same reason.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.runtime import transfers
from harness.runtime.autograd import no_grad
from harness.runtime.tensor import Tensor, zeros


def zeros_like_layout(p: Tensor) -> Tensor:
    """Zeros of ``p``'s shape laid out as ``p`` is, for optimizer state.

    State created replicated next to a sharded parameter would take the parameter's layout only
    after the first step (XLA propagates it), so step 2 would see new input shardings and
    compile again. A parameter holding device data gives its layout to the zeros at once, and
    its requested output sharding becomes the state's, so every step has the same layout. That
    holds for a replicated parameter too: replicated over a user's mesh (FSDPv2's layout for a
    dimension the mesh does not divide) is another input layout than the default replicated one,
    and state left there made every such training loop compile twice.
    """
    buf = zeros(p.shape)
    src, dst = p.rt_storage, buf.rt_storage
    data = src.node.data
    if data is not None and data.sharding is not None and data.sharding != dst.node.data.sharding:
        dst.materialize(transfers.reshard(dst.node.data, data.sharding))
    dst.sharding = src.sharding
    return buf


class Optimizer:
    def __init__(self, params: Iterable[Tensor], lr: float) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        if lr <= 0:
            raise ValueError(f"learning rate must be positive, got {lr}")
        self.lr = lr

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def step(self) -> None:
        raise NotImplementedError

    def state_tensors(self) -> list[Tensor]:
        """The device tensors the optimizer keeps between steps (momentum, moments): what it
        holds besides the parameters, as torch's ``optimizer.state`` holds it."""
        return []


class SGD(Optimizer):
    def __init__(self, params: Iterable[Tensor], lr: float, momentum: float = 0.0, weight_decay: float = 0.0) -> None:
        super().__init__(params, lr)
        self.momentum, self.weight_decay = momentum, weight_decay
        # created up front, not at the first step: a buffer created inside step 1 would be newer
        # than that step's other values, and the next step's graph would list its roots in
        # another order (one more compile)
        self._buffers: dict[int, Tensor] = {id(p): zeros_like_layout(p) for p in self.params} if momentum else {}

    def state_tensors(self) -> list[Tensor]:
        return list(self._buffers.values())

    def step(self) -> None:
        for p in self.params:
            if p.grad is None:
                continue
            g = p.grad + p.detach() * self.weight_decay if self.weight_decay else p.grad
            if self.momentum:
                buf = self._buffers.get(id(p))
                if buf is None:
                    buf = self._buffers[id(p)] = zeros_like_layout(p)
                buf.mul_(self.momentum).add_(g)
                g = buf
            with no_grad():  # the update is no part of the graph autograd differentiates
                p.sub_(g * self.lr)


class Adam(Optimizer):
    def __init__(
        self, params: Iterable[Tensor], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ) -> None:
        super().__init__(params, lr)
        self.b1, self.b2 = betas
        self.eps = eps
        self._m = [zeros_like_layout(p) for p in self.params]
        self._v = [zeros_like_layout(p) for p in self.params]
        # each parameter's step count, on the host, as torch keeps it (``state[p]["step"]``, a
        # CPU value read with ``.item()``): a parameter without a gradient skips a step and its
        # count stays behind; the bias corrections ``1 - beta ** t`` are Python floats in double
        # precision, a scalar input of the graph (never baked into the plan). The semantics
        # oracle found both: one count for all parameters, and corrections computed in float32
        # on the device, where ``1 - 0.999 ** 1`` cancels to 0.00099998713
        self._steps = [0] * len(self.params)

    def state_tensors(self) -> list[Tensor]:
        return [*self._m, *self._v]

    def step(self) -> None:
        for i, (p, m, v) in enumerate(zip(self.params, self._m, self._v, strict=True)):
            if p.grad is None:
                continue
            self._steps[i] += 1
            c1 = 1.0 - self.b1 ** self._steps[i]
            c2 = 1.0 - self.b2 ** self._steps[i]
            g = p.grad
            m.mul_(self.b1).add_(g * (1.0 - self.b1))
            v.mul_(self.b2).add_(g * g * (1.0 - self.b2))
            with no_grad():
                p.sub_((m / c1) * self.lr / ((v / c2).sqrt() + self.eps))
