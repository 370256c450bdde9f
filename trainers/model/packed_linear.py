"""Linear layers with their weights packed once for oneDNN, for float32 decoding on the CPU.

A decoder step is a few small matrix products ([hypotheses, d_model] x [d_model, n]),
the same weights every step. PyTorch's CPU `linear` sends them to MKL's sgemm, which
repacks the weight on every call and, on AMD processors, runs a generic code path;
oneDNN's inner product on a weight reordered once into its blocked layout runs
1.1-1.5x faster at these shapes (benchmarks/RESULTS.md); CTranslate2's
library carries the same oneDNN kernels. The results are the same products in another
summation order: equal to float32 rounding, not bit for bit.

The packing goes through `torch.ops.mkldnn`, the operators PyTorch's own compiler
emits for frozen CPU models. Where they are missing (a build without oneDNN) or fail,
the model is left as it is.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmtpipe.trainers.model.build import Seq2Seq


class PackedLinear(nn.Module):
    """`x @ weight.T + bias` on a copy of `weight` in oneDNN's layout, made once: the
    weights must not change afterwards. `activation` "relu" applies it in the same pass
    (oneDNN's post-op), as a feed-forward block's inner layer wants. A `weight` or
    `bias` given as a parameter stays one (a state dict sees what it saw in the
    `nn.Linear`); a plain tensor (a table borrowed from another layer) is not registered."""

    def __init__(self, weight: Tensor, bias: Tensor | None, activation: str = "none") -> None:
        super().__init__()
        self.weight, self.bias, self.activation = weight, bias, activation
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach())

    def forward(self, x: Tensor) -> Tensor:
        return torch.ops.mkldnn._linear_pointwise(
            x, self.packed, self.bias, self.activation, [], ""
        )


def _packable(model: Seq2Seq) -> bool:
    first = next(model.parameters(), None)
    return (
        first is not None
        and first.device.type == "cpu"
        and first.dtype == torch.float32
        and not model.training
        and torch.backends.mkldnn.is_available()
    )


def pack_linears(model: Seq2Seq) -> bool:
    """Replace, in place, every `nn.Linear` of an eval-mode float32 CPU model by a
    `PackedLinear` (a feed-forward block's inner layer with its ReLU), and give a model
    whose output projection is tied to its target embeddings (`output` None) a packed
    copy of that table as its `output`; its state dict stays the same. Whether it did:
    False leaves the model untouched (not on the CPU, not float32, training, or no
    working oneDNN)."""
    if not _packable(model):
        return False
    try:
        probed, probe = _probe(model)
    except (AttributeError, RuntimeError):
        return False
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is not nn.Linear:
                continue
            if name == "inner" and isinstance(getattr(parent, "activation", None), nn.ReLU):
                setattr(parent, name, PackedLinear(child.weight, child.bias, "relu"))
                parent.activation = nn.Identity()
            else:
                packed = probe if child is probed else PackedLinear(child.weight, child.bias)
                setattr(parent, name, packed)
    if model.output is None:
        model.output = PackedLinear(model.tgt_embed.weight.detach(), None)
    return True


def _probe(model: Seq2Seq) -> tuple[nn.Linear | None, PackedLinear | None]:
    """One of the model's layers and its packed copy, once the operators are seen to
    exist and agree with `F.linear` on it (RuntimeError if they disagree); two Nones for
    a model without linear layers."""
    layer = next((m for m in model.modules() if type(m) is nn.Linear), None)
    if layer is None:
        return None, None
    x = torch.randn(3, layer.in_features, generator=torch.Generator().manual_seed(0))
    packed = PackedLinear(layer.weight, layer.bias)
    with torch.no_grad():
        want, got = layer(x), packed(x)
    if not torch.allclose(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max()) + 1e-6):
        raise RuntimeError("oneDNN's linear disagrees with torch's")
    return layer, packed
