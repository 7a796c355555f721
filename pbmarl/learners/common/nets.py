"""Networks the RL learners share: seeded MLPs, masked Q maths, the epsilon-greedy behaviour.

Every network is a plain `build_mlp` (the same builder `MLPPolicy` uses), so a
learner's actor or Q-network can become an `MLPPolicy` by copying a state dict.
Illegal actions are handled here once: `masked_logits` for policies,
`masked_argmax` (and `pbmarl.rl.value_learning.masked_max_q`) for values (never bootstrap from an illegal action).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn
from torch.optim import optimizer as _torch_optimizer

from pbmarl.games.base import Game
from pbmarl.policies.base import Policy
from pbmarl.policies.neural import (
    FullPrecisionLinear,
    MLPPolicy,
    build_mlp,
    lowered,
    masked_logits,
    outside_autocast,
)
from pbmarl.torchutil import device_of

__all__ = [
    "EpsilonGreedy", "adam", "build_mlp", "tempered_policy", "masked_argmax", "masked_logits",
    "obs_dim", "seeded", "to_tensor",
    "NoisyLinear", "RainbowNet", "frozen", "LeanAdam", "TensorBatch",
]

M = TypeVar("M")
B = TypeVar("B", bound="TensorBatch")


class TensorBatch:
    """Mixin for a frozen dataclass of a round's tensors, one row per sample, that an update cuts into
    minibatches (PPO's `RolloutBatch`, the self-play runs' `SelfPlayBatch`). A field may be None (no legal
    mask, say): it stays None in every minibatch."""

    obs: torch.Tensor
    action: torch.Tensor

    def __len__(self) -> int:
        return len(self.action)

    def take(self: B, index: np.ndarray) -> B:
        """Rows `index` of every field, as a batch of the same type (indexed on the tensors' device)."""
        i = torch.as_tensor(index, device=self.obs.device)
        return type(self)(**{name: None if t is None else t[i] for name, t in vars(self).items()})


def obs_dim(game: Game) -> int:
    """Length of the flattened observation."""
    return int(np.prod(game.observation_shape))


def seeded(seed: int, build: Callable[[], M]) -> M:
    """Call `build` (which creates torch modules) under a scoped torch seed.

    `torch.random.fork_rng` restores the global torch RNG afterwards, so the
    library never seeds globally and two learners never share random state.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return build()


def adam(params: Iterator[nn.Parameter] | list[nn.Parameter], *, lr: float, eps: float = 1e-8) -> torch.optim.Adam:
    """Adam with the fused CPU kernel: the same algorithm, several times faster on these small networks
    (a `LeanAdam`, which also skips torch's per-step regrouping of the tensors)."""
    return LeanAdam(params, lr=lr, eps=eps)


_torch_adam_step: Callable[..., Any] | None = None


def _hooked_adam_step(optimizer: torch.optim.Adam, closure: Any) -> Any:
    """torch's own `Adam.step`, with its step hooks and profiler range (whether or not torch has wrapped it yet)."""
    global _torch_adam_step
    if _torch_adam_step is None:
        _torch_adam_step = torch.optim.Optimizer.profile_hook_step(inspect.unwrap(torch.optim.Adam.step))
    return _torch_adam_step(optimizer, closure)


class LeanAdam(torch.optim.Adam):
    """torch's fused Adam (``fused=True``): the same arithmetic, state and state dict, stepped more cheaply.

    On every call `torch.optim.Adam.step` gathers parameters, gradients and moments into lists, groups
    them by device and dtype and opens a profiler range: about 0.1 ms of Python, as much as the fused
    kernel itself takes on a 256x256 network, paid by every one of a learner's thousands of updates.
    Here the lists are kept from step to step and the kernel is called directly. The first step (which
    creates the state), several parameter groups, a parameter without a gradient, options plain Adam
    lacks (amsgrad, weight decay, maximize, tensor learning rates), registered step hooks or a closure
    all take torch's own step, so the result is always torch's.
    """

    def __init__(self, params: Iterator[nn.Parameter] | list[nn.Parameter], lr: float = 1e-3, **options: Any) -> None:
        # torch.optim.Adam's options (a parameter server rebuilds the optimiser from its ``defaults``); always fused
        super().__init__(params, lr=lr, **{**options, "fused": True})
        self._lists: tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]] | None = None

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._lists = None
        super().load_state_dict(state_dict)

    def zero_grad(self, set_to_none: bool = True) -> None:
        if not set_to_none or len(self.param_groups) != 1:
            super().zero_grad(set_to_none)
            return
        for p in self.param_groups[0]["params"]:
            p.grad = None

    def _lean(self) -> tuple[list[torch.Tensor], ...] | None:
        """(params, grads, exp_avgs, exp_avg_sqs, steps) when the direct kernel call applies, else None."""
        if (len(self.param_groups) != 1 or self._optimizer_step_pre_hooks or self._optimizer_step_post_hooks
                or getattr(_torch_optimizer, "_global_optimizer_pre_hooks", None)
                or getattr(_torch_optimizer, "_global_optimizer_post_hooks", None)):
            return None
        group = self.param_groups[0]
        if (group["amsgrad"] or group["weight_decay"] or group["maximize"] or group.get("capturable")
                or group.get("differentiable") or group.get("decoupled_weight_decay")
                or not isinstance(group["lr"], float) or not all(isinstance(b, float) for b in group["betas"])):
            return None
        params: list[torch.Tensor] = group["params"]
        grads = [p.grad for p in params]
        if any(g is None for g in grads):
            return None
        cached = self._lists
        if cached is None or cached[0] is not params or any(
                self.state.get(p, {}).get("exp_avg") is not m for p, m in zip(params, cached[1])):
            if not all(p in self.state for p in params):
                return None  # the first step: torch's creates the state
            cached = self._lists = (params, [self.state[p]["exp_avg"] for p in params],
                                    [self.state[p]["exp_avg_sq"] for p in params], [self.state[p]["step"] for p in params])
        return cached[0], grads, cached[1], cached[2], cached[3]  # type: ignore[return-value]

    def step(self, closure: Any = None) -> Any:
        lean = self._lean() if closure is None else None
        if lean is None:
            return _hooked_adam_step(self, closure)
        params, grads, exp_avgs, exp_avg_sqs, steps = lean
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        with torch.no_grad():
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False, lr=group["lr"],
                               beta1=beta1, beta2=beta2, weight_decay=0.0, eps=group["eps"], maximize=False,
                               grad_scale=None, found_inf=None)
        return None

    step.hooked = True  # type: ignore[attr-defined]  # torch wraps a class's step in its hook runner unless marked


def to_tensor(array: np.ndarray, dtype: torch.dtype | None = torch.float32, *,
              device: str | torch.device | None = None) -> torch.Tensor:
    """A tensor of a numpy batch (sharing its memory where the dtype already matches and the batch is writable;
    a read-only batch, as Ray hands to an actor, is copied so no tensor aliases memory it may not write).
    ``dtype=None`` keeps the batch's own dtype (masks, action indices); `device` (None or "cpu": the CPU)
    copies the batch there, once."""
    array = np.ascontiguousarray(array)
    t = torch.as_tensor(array if array.flags.writeable else array.copy())
    t = t.to(dtype) if dtype is not None and t.dtype != dtype else t
    return t if device is None or device == "cpu" else t.to(device)


def masked_argmax(q: torch.Tensor, legal_mask: torch.Tensor) -> torch.Tensor:
    """Index of the best legal action per row (rows without legal actions give 0)."""
    return masked_logits(q, legal_mask).argmax(dim=-1)


def tempered_policy(net: nn.Sequential, game: Game, hidden: Sequence[int], *, temperature: float) -> MLPPolicy:
    """An `MLPPolicy` playing ``softmax(net(obs) / temperature)`` over the legal actions.

    The network's weights are copied and its last layer divided by `temperature`:
    a Q-network at a small temperature gives the greedy policy (mixing only
    near-ties); an actor at temperature 1 is itself, below 1 it is sharpened
    towards its most likely action.
    """
    policy = MLPPolicy(game, hidden=hidden, seed=None)  # on the CPU, whatever device `net` trains on
    state = {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
    last = len(net) - 1
    state[f"{last}.weight"] = state[f"{last}.weight"] / temperature
    state[f"{last}.bias"] = state[f"{last}.bias"] / temperature
    policy.net.load_state_dict(state)
    return policy


class EpsilonGreedy(Policy):
    """Behaviour policy of DQN: greedy in Q with probability ``1 - epsilon``, else uniform (legal).

    It holds the learner's live Q-network (not a copy). The learner bumps `version`
    whenever the network or `epsilon` changes, so rollout workers that cache
    policy tables by version see every update.
    """

    kind = "epsilon_greedy_q"

    def __init__(self, game: Game, q_net: nn.Module | None = None, *, hidden: Sequence[int] = (128, 128),
                 epsilon: float = 0.1) -> None:
        super().__init__(game)
        self.hidden = tuple(int(h) for h in hidden)
        self.q_net = q_net if q_net is not None else build_mlp(obs_dim(game), self.hidden, game.num_actions)
        self.epsilon = float(epsilon)

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        with torch.no_grad():
            device = device_of(self.q_net)  # the learner's device: the batch goes there, the actions come back
            q = self.q_net(to_tensor(obs, device=device).reshape(len(obs), -1))
            best = masked_argmax(q, to_tensor(legal_mask, None, device=device)).cpu().numpy()
        legal = legal_mask.astype(float)
        probs = self.epsilon * legal / np.maximum(legal.sum(axis=1, keepdims=True), 1.0)
        probs[np.arange(len(best)), best] += 1.0 - self.epsilon
        return probs

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy() for k, v in self.q_net.state_dict().items()}

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), "hidden": list(self.hidden), "epsilon": self.epsilon}

    @classmethod
    def from_state(cls, game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> EpsilonGreedy:
        policy = cls(game, hidden=meta["hidden"], epsilon=meta["epsilon"])
        policy.q_net.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in arrays.items()})
        policy.version = int(meta.get("version", 0))
        return policy

    def __repr__(self) -> str:
        return f"EpsilonGreedy({self.game_name!r}, epsilon={self.epsilon:.3g})"


# -- networks of the control learners (Rainbow, DDPG, TD3, SAC, HDDPG) ------------
@contextlib.contextmanager
def frozen(module: nn.Module | Sequence[nn.Parameter]) -> Iterator[None]:
    """Forward passes in the block record no gradients for `module`'s parameters (restored after).

    The actor's loss goes through the critics; their weight gradients would be computed and
    thrown away. The actor's own gradients are the same either way. A learner that freezes the same
    critics at every update passes their parameter list, taken once, instead of the module.
    """
    params = [p for p in (module.parameters() if isinstance(module, nn.Module) else module) if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


class NoisyLinear(nn.Module):
    """A linear layer with learned factorised Gaussian noise on its weights (Fortunato et al. 2018, eq. 10-11).

    ``y = (mu_w + sigma_w * eps_w) x + mu_b + sigma_b * eps_b`` with
    ``eps_w = f(eps_out) f(eps_in)^T``, ``f(x) = sign(x) sqrt|x|``. The noise is
    drawn by `reset_noise(generator)`; in evaluation mode (``.eval()``) the layer
    uses the means only, so it is deterministic.
    """

    eps_in: torch.Tensor
    eps_out: torch.Tensor

    def __init__(self, in_features: int, out_features: int, *, sigma0: float = 0.5) -> None:
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        bound = 1.0 / self.in_features ** 0.5
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), sigma0 * bound))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), sigma0 * bound))
        self.register_buffer("eps_in", torch.zeros(in_features))
        self.register_buffer("eps_out", torch.zeros(out_features))

    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        """Draw fresh noise (from `generator`, for reproducible runs)."""
        def f(n: int) -> torch.Tensor:
            x = torch.randn(n, generator=generator)
            return x.sign() * x.abs().sqrt()
        self.eps_in.copy_(f(self.in_features))
        self.eps_out.copy_(f(self.out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled(x.device.type) or lowered():  # a head: full precision, as `FullPrecisionLinear`
            return outside_autocast(self.forward, x)
        if not self.training:
            return nn.functional.linear(x, self.weight_mu, self.bias_mu)
        weight = self.weight_mu + self.weight_sigma * torch.outer(self.eps_out, self.eps_in)
        return nn.functional.linear(x, weight, self.bias_mu + self.bias_sigma * self.eps_out)


class RainbowNet(nn.Module):
    """Q-network with switchable parts: dueling heads, noisy head layers, C51 atoms.

    ``forward(obs [B, D]) -> [B, A, atoms]``: Q-values when ``atoms == 1``, else
    the logits of each action's return distribution over the support. The dueling
    form is ``Q = V + A - mean_a A`` (Wang et al. 2016, eq. 9), per atom.
    """

    def __init__(self, in_dim: int, hidden: Sequence[int], num_actions: int, *, atoms: int = 1,
                 dueling: bool = True, noisy: bool = False, sigma0: float = 0.5) -> None:
        super().__init__()
        self.num_actions, self.atoms, self.dueling = int(num_actions), int(atoms), bool(dueling)
        layers: list[nn.Module] = []
        last = in_dim
        for width in hidden:  # the first layer and the heads stay float32 under autocast, as in `build_mlp`
            layers += [(nn.Linear if layers else FullPrecisionLinear)(last, int(width)), nn.ReLU(inplace=True)]
            last = int(width)
        self.torso = nn.Sequential(*layers)

        def head(out: int) -> nn.Module:
            return NoisyLinear(last, out, sigma0=sigma0) if noisy else FullPrecisionLinear(last, out)

        self.advantage = head(self.num_actions * self.atoms)
        self.value = head(self.atoms) if dueling else None

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = self.torso(obs)
        adv = self.advantage(h).view(-1, self.num_actions, self.atoms)
        if self.value is None:
            return adv
        return self.value(h).view(-1, 1, self.atoms) + adv - adv.mean(dim=1, keepdim=True)

    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        for m in self.modules():
            if isinstance(m, NoisyLinear):
                m.reset_noise(generator)
