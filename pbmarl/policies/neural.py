"""Neural policies (torch). The only policies module that imports torch."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from pbmarl.config import check_seed, check_widths
from pbmarl.games.base import Game
from pbmarl.games.registry import as_game
from pbmarl.policies.base import Policy


class FullPrecisionLinear(nn.Linear):
    """A Linear layer that stays float32 under autocast (otherwise a plain `nn.Linear`, same state dict).

    `build_mlp` makes its input and output layers of this kind, so a learner's
    ``matmul_precision="bfloat16"`` (autocast) lowers only the hidden-to-hidden products, where
    nearly all the arithmetic is: observations go in, and values, logits and means come out, at full
    precision.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return outside_autocast(super().forward, x)


#: oneDNN's float32 matmul precisions saved by the open `bfloat16_products` contexts (innermost last)
_SAVED_PRECISIONS: list[str] = []
#: torch's oneDNN backend; its ``matmul.fp32_precision`` is set at import and not in torch's stubs
_ONEDNN: Any = torch.backends.mkldnn


@contextlib.contextmanager
def bfloat16_products() -> Iterator[None]:
    """Inside: float32 matrix products on the CPU read their inputs rounded to bfloat16 and accumulate in
    float32 (oneDNN's bf16 math mode: ``torch.backends.mkldnn.matmul.fp32_precision = "bf16"``, what torch's
    ``set_float32_matmul_precision("medium")`` sets on the CPU). Tensors, activations, gradients and
    parameters stay float32; the forwards of `FullPrecisionLinear` layers (first layers and heads) and of
    `outside_autocast` calls run at full precision. Where oneDNN does not lower (CPUs without bfloat16
    instructions, and an AMD EPYC with AVX512-BF16 under torch 2.13's oneDNN 3.12) it computes in float32
    and nothing changes. The setting is the process's: it is restored on leaving."""
    matmul = _ONEDNN.matmul
    _SAVED_PRECISIONS.append(matmul.fp32_precision)
    matmul.fp32_precision = "bf16"
    try:
        yield
    finally:
        matmul.fp32_precision = _SAVED_PRECISIONS.pop()


def lowered() -> bool:
    """Whether float32 products are lowered here: inside `bfloat16_products` and not suspended by `outside_autocast`."""
    return bool(_SAVED_PRECISIONS) and _ONEDNN.matmul.fp32_precision == "bf16"


def outside_autocast(fn: Callable[..., torch.Tensor], *tensors: torch.Tensor) -> torch.Tensor:
    """``fn(*tensors)`` at full float32 precision: where autocast is on, with it off and the tensors cast to
    float32 first; inside `bfloat16_products`, with the bfloat16 math mode suspended for the call (its
    backward, run later, is not)."""
    device = tensors[0].device.type
    if torch.is_autocast_enabled(device):
        with torch.autocast(device, enabled=False):
            return fn(*(t.float() for t in tensors))
    if lowered():
        matmul = _ONEDNN.matmul
        matmul.fp32_precision = "ieee"
        try:
            return fn(*tensors)
        finally:
            matmul.fp32_precision = "bf16"
    return fn(*tensors)


def full_precision_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` in float32 even under autocast (gSDE's noise and std, which are not hidden layers)."""
    return outside_autocast(torch.matmul, a, b)


@contextlib.contextmanager
def seeded_torch(seed: int | None) -> Iterator[None]:
    """Inside: torch's CPU generator seeded with `seed` (None: left as it is), restored on leaving, so
    building a policy's weights never moves the global stream. A seed that is not an int in [0, 2**63)
    raises ValueError naming it (a bool, -1 and 1.5 included)."""
    seed = None if seed is None else check_seed(seed)
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        yield


def network_from_state(cls: Any, game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any], *,
                       layer_norm: bool) -> Any:
    """A network policy of class `cls` rebuilt from its `arrays` and `meta` (``hidden``, ``layer_norm``,
    ``activation``, ``version``); `layer_norm` is the class's default, for a save that does not say."""
    policy = cls(game, hidden=meta["hidden"], seed=None, layer_norm=bool(meta.get("layer_norm", layer_norm)),
                 activation=str(meta.get("activation", "relu")))
    policy.net.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in arrays.items()})
    policy.version = int(meta.get("version", 0))
    return policy

def build_mlp(in_dim: int, hidden: Sequence[int], out_dim: int, *, activation: type[nn.Module] = nn.ReLU,
              layer_norm: bool = False) -> nn.Sequential:
    """A plain MLP: Linear-activation blocks, then a Linear head.

    ReLU works in place on its Linear's fresh output (which nothing else holds): the same values and
    gradients, one buffer and one pass over it less per layer. ``layer_norm=True`` puts a LayerNorm on the
    input and after every hidden block (the MAPPO code's feature normalisation and layer norm). The first and
    the last Linear are `FullPrecisionLinear`: under bfloat16 autocast only hidden-to-hidden products lower."""
    layers: list[nn.Module] = [nn.LayerNorm(in_dim)] if layer_norm else []
    last = in_dim
    for i, width in enumerate(hidden):
        linear = FullPrecisionLinear if i == 0 else nn.Linear
        layers += [linear(last, int(width)), nn.ReLU(inplace=True) if activation is nn.ReLU else activation()]
        if layer_norm:
            layers.append(nn.LayerNorm(int(width)))
        last = int(width)
    layers.append(FullPrecisionLinear(last, out_dim))
    return nn.Sequential(*layers)


#: hidden-layer activations by name, and their orthogonal-init gains (``torch.nn.init.calculate_gain``)
ACTIVATIONS: dict[str, tuple[type[nn.Module], float]] = {"relu": (nn.ReLU, math.sqrt(2.0)), "tanh": (nn.Tanh, 5.0 / 3.0)}


def activation_named(name: str, owner: str) -> type[nn.Module]:
    """The activation module called `name` (a key of `ACTIVATIONS`); a clear error for anything else."""
    if not isinstance(name, str) or name not in ACTIVATIONS:
        raise ValueError(f"{owner} activation must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name][0]


def orthogonal_init_(net: nn.Sequential, head_gain: float, activation: str = "relu") -> nn.Sequential:
    """Orthogonal weights and zero biases in place (the MAPPO and PPO codes' init): the activation's gain
    (sqrt(2) for ReLU, 5/3 for tanh) on the hidden Linears, `head_gain` on the last one (0.01 for an actor:
    near-uniform first policies)."""
    gain = ACTIVATIONS[activation][1]
    linears = [m for m in net if isinstance(m, nn.Linear)]
    for i, layer in enumerate(linears):
        nn.init.orthogonal_(layer.weight, gain=head_gain if i == len(linears) - 1 else gain)
        nn.init.zeros_(layer.bias)
    return net


def masked_logits(logits: torch.Tensor, legal_mask: torch.Tensor) -> torch.Tensor:
    """Logits with illegal actions pushed to the dtype's minimum (so softmax gives them 0)."""
    return logits.masked_fill(~legal_mask, torch.finfo(logits.dtype).min)


class MLPPolicy(Policy):
    """Softmax over an MLP's logits, masked to the legal actions.

    Example:
        >>> pi = MLPPolicy(game, hidden=(128, 128), seed=0)
        >>> probs = pi.action_probabilities(obs, mask)  # doctest: +SKIP
    """

    kind = "mlp"

    def __init__(self, game: Game | str, hidden: Sequence[int] = (128, 128), *, seed: int | None = 0,
                 layer_norm: bool = False, activation: str = "relu") -> None:
        game = as_game(game)
        super().__init__(game)
        act = activation_named(activation, "MLPPolicy")
        if game.num_actions < 1:
            raise ValueError(
                f"MLPPolicy needs discrete actions; {game.name!r} acts in {game.action_space(0)} "
                "(use pb.policies.GaussianPolicy or pb.policies.DeterministicPolicy)"
            )
        self.hidden = check_widths("hidden", hidden)
        self.layer_norm = bool(layer_norm)
        self.activation = activation
        self.in_dim = int(np.prod(game.observation_shape))
        with seeded_torch(seed):
            self.net = build_mlp(self.in_dim, self.hidden, game.num_actions, activation=act,
                                 layer_norm=self.layer_norm)

    def logits(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.reshape(obs.shape[0], -1))

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        with torch.no_grad():  # on the network's device (a learner's ``device=``); the probabilities come back
            device = next(self.net.parameters()).device
            x = torch.as_tensor(np.asarray(obs, dtype=np.float32), device=device)
            logits = masked_logits(self.logits(x), torch.as_tensor(legal_mask, device=device))
            return torch.softmax(logits, dim=-1).double().cpu().numpy()

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy() for k, v in self.net.state_dict().items()}

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), "hidden": list(self.hidden), **({"layer_norm": True} if self.layer_norm else {}),
                **({"activation": self.activation} if self.activation != "relu" else {})}

    @classmethod
    def from_state(cls, game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> MLPPolicy:
        return network_from_state(cls, game, arrays, meta, layer_norm=False)

    def __repr__(self) -> str:
        return f"MLPPolicy({self.game_name!r}, hidden={self.hidden})"
