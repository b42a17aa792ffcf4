"""Small models the scenarios train: a linear model, an MLP, a tiny ViT.

The ViT follows timm's layout where it matters for the catalog: the patch embedding returns a
*view* (``proj(x).transpose``), so sharding its output goes through a view update; attention runs
through the kernel-lowering path (``kernels.flash_attention``), as PyTorch/XLA's flash attention
does through Pallas.
"""

from __future__ import annotations

import numpy as np

from harness.runtime import kernels, nn
from harness.runtime.tensor import Tensor, cat


class LinearModel(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x)


class MLP(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, out_features)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.fc1(x).relu())


class ScaledMLP(MLP):
    """An MLP with a learnable 0-d output scale (the parameter shape of issue #8522)."""

    def __init__(self, in_features: int, hidden: int, out_features: int) -> None:
        super().__init__(in_features, hidden, out_features)
        self.scale = nn.Parameter(np.float32(1.0))

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x) * self.scale


class PatchEmbed(nn.Module):
    def __init__(self, image: int, patch: int, channels: int, dim: int) -> None:
        super().__init__()
        if image % patch:
            raise ValueError(f"image size {image} is not a multiple of patch size {patch}")
        self.patch, self.grid = patch, image // patch
        fan_in = channels * patch * patch
        bound = 1.0 / np.sqrt(fan_in)
        self.weight = nn.Parameter(nn.rng().uniform(-bound, bound, (dim, fan_in)).astype(np.float32))
        self.bias = nn.Parameter(np.zeros((dim, 1), np.float32))

    def forward(self, images: Tensor) -> Tensor:
        b, c, _, _ = images.shape
        g, p = self.grid, self.patch
        patches = images.view(b, c, g, p, g, p).permute(0, 2, 4, 1, 3, 5).reshape(b, g * g, c * p * p)
        projected = self.weight @ patches.transpose(1, 2) + self.bias  # (batch, dim, patches)
        return projected.transpose(1, 2)  # a view, as timm's flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, use_kernel: bool = True) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by {heads} heads")
        self.heads, self.use_kernel = heads, use_kernel
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        h = self.heads
        qkv = self.qkv(x).reshape(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        if self.use_kernel:
            out = kernels.flash_attention(q, k, v)
        else:
            scores = (q @ k.transpose(-2, -1)) * float(1.0 / np.sqrt(d // h))
            out = scores.softmax(-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: int = 2, use_kernel: bool = True) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, use_kernel)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, dim * mlp_ratio)
        self.fc2 = nn.Linear(dim * mlp_ratio, dim)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(self.fc1(self.norm2(x)).gelu())


class TinyViT(nn.Module):
    def __init__(
        self,
        image: int = 8,
        patch: int = 4,
        channels: int = 3,
        dim: int = 16,
        depth: int = 2,
        heads: int = 2,
        classes: int = 10,
        use_kernel: bool = True,
    ) -> None:
        super().__init__()
        self.patch_embed = PatchEmbed(image, patch, channels, dim)
        tokens = (image // patch) ** 2 + 1
        self.cls_token = nn.Parameter(np.zeros((1, 1, dim), np.float32))
        self.pos_embed = nn.Parameter((0.02 * nn.rng().standard_normal((1, tokens, dim))).astype(np.float32))
        self.blocks = nn.Sequential(*(Block(dim, heads, use_kernel=use_kernel) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, images: Tensor) -> Tensor:
        x = self.patch_embed(images)
        b, _, d = x.shape
        x = cat([self.cls_token.expand(b, 1, d), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])
