"""Modules in the style of ``torch.nn``: parameters are requires-grad leaf tensors.

``Module.to(device)`` matters for SPMD: upstream, without functionalization, it re-materialized
every parameter as a fresh replicated buffer and so dropped the shardings FSDPv2 had set
(issue #8607); the reference runtime keeps a parameter's layout unless the ``lost-sharding``
switch re-creates that bug.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from harness.runtime import config, faults, transfers
from harness.runtime.tensor import Tensor, tensor

_rng = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Seed parameter initialization (every initializer draws from one generator)."""
    global _rng
    _rng = np.random.default_rng(seed)


def rng() -> np.random.Generator:
    return _rng


def Parameter(data: Any) -> Tensor:  # noqa: N802 - mirrors torch.nn.Parameter
    """A leaf tensor that requires grad."""
    return tensor(np.asarray(data.numpy() if isinstance(data, Tensor) else data), requires_grad=True)


def _is_parameter(value: Any) -> bool:
    return isinstance(value, Tensor) and value.rt_storage.requires_grad and not value.rt_views


class Module:
    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        params, modules = self.__dict__.get("_parameters"), self.__dict__.get("_modules")
        if params is None:
            raise AttributeError("call Module.__init__() before assigning attributes")
        params.pop(name, None)
        modules.pop(name, None)
        if _is_parameter(value):
            params[name] = value
        elif isinstance(value, Module):
            modules[name] = value
        # also an instance attribute (replacing e.g. a ``bias = None`` set before), so reading it
        # in ``forward`` is a plain lookup, not a miss and a call of ``__getattr__``
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self.__dict__["_parameters"].pop(name, None)
        self.__dict__["_modules"].pop(name, None)
        object.__delattr__(self, name)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if name in d.get("_parameters", {}):
            return d["_parameters"][name]
        if name in d.get("_modules", {}):
            return d["_modules"][name]
        raise AttributeError(f"{type(self).__name__!r} has no attribute {name!r}")

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def children(self) -> Iterator[Module]:
        yield from self._modules.values()

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """Each direct submodule with the attribute name it is registered under (as torch's)."""
        yield from self._modules.items()

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        for mod_name, mod in self.named_modules(prefix):
            for name, p in mod._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mod_name}.{name}" if mod_name else name), p

    def parameters(self) -> Iterator[Tensor]:
        for _, p in self.named_parameters():
            yield p

    def state_dict(self) -> dict[str, Tensor]:
        return {name: p.detach() for name, p in self.named_parameters()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        own = dict(self.named_parameters())
        missing, unexpected = own.keys() - state.keys(), state.keys() - own.keys()
        if missing or unexpected:
            raise KeyError(f"state dict mismatch: missing {sorted(missing)}, unexpected {sorted(unexpected)}")
        for name, p in own.items():
            value = state[name]
            if tuple(np.shape(value.numpy() if isinstance(value, Tensor) else value)) != p.shape:
                raise ValueError(f"{name}: shape {np.shape(value)} does not match parameter shape {p.shape}")
            p.detach().copy_(value)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def train(self, mode: bool = True) -> Module:
        for _, m in self.named_modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def apply(self, fn: Callable[[Module], None]) -> Module:
        for _, m in self.named_modules():
            fn(m)
        return self

    def to(self, device: Any = None) -> Module:
        """Place parameters on the (one SPMD) device, keeping their shardings."""
        drop_layout = not config.options.functionalization and faults.active(faults.LOST_SHARDING)
        for p in self.parameters():
            storage = p.rt_storage
            if drop_layout:  # upstream: a fresh replicated buffer per parameter
                if storage.pending:
                    from harness.runtime import step

                    step.sync([p], wait=True, donate=False)
                storage.materialize(transfers.to_device(transfers.to_host(storage.node.data)))
                storage.sharding = None
        return self


class Linear(Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = Parameter(_rng.uniform(-bound, bound, (out_features, in_features)).astype(np.float32))
        self.bias = Parameter(_rng.uniform(-bound, bound, (out_features,)).astype(np.float32)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = x @ self.weight.T
        return y + self.bias if self.bias is not None else y


class LayerNorm(Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = Parameter(np.ones(dim, np.float32))
        self.bias = Parameter(np.zeros(dim, np.float32))

    def forward(self, x: Tensor) -> Tensor:
        mu = x.mean(-1, keepdim=True)
        centered = x - mu
        var = (centered * centered).mean(-1, keepdim=True)
        return centered * (var + self.eps).rsqrt() * self.weight + self.bias


class ReLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class GELU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.gelu()


class Sequential(Module):
    def __init__(self, *layers: Module) -> None:
        super().__init__()
        for i, layer in enumerate(layers):
            setattr(self, str(i), layer)

    def forward(self, x: Any) -> Any:
        for layer in self.children():
            x = layer(x)
        return x


def mse_loss(pred: Tensor, target: Any) -> Tensor:
    diff = pred - target
    return (diff * diff).mean()


def cross_entropy(logits: Tensor, labels_onehot: Tensor) -> Tensor:
    return -(logits.log_softmax(-1) * labels_onehot).sum(-1).mean()
