"""Rainbow: DQN with six switchable parts (Hessel et al. 2018), for Discrete actions.

Each part is one config flag, so an ablation is one config change:

- ``double``: the online network picks the next action, the target network values it;
- ``dueling``: ``Q = V + A - mean A`` heads (`RainbowNet`);
- ``n_step``: n-step returns ``sum_{k<n} gamma^k r_{t+k} + gamma^n Q(s_{t+n})`` (`nstep_targets`);
- ``prioritized``: proportional prioritised replay, ``beta`` annealed to 1 over the budget;
- ``noisy``: noisy linear heads explore instead of epsilon-greedy (`NoisyLinear`);
- ``distributional``: C51, a categorical return distribution on ``atoms`` points of
  ``[v_min, v_max]`` trained by cross-entropy to the projected target (`c51_projection`).

With every flag off (and ``n_step=1``) it is DQN with a target network. The target
network follows the online one every ``target_update_interval`` updates (Polyak
with ``tau``; the default 1 is a hard copy).

Example:
    >>> learner = pb.Rainbow("gym:CartPole-v1", seed=0, v_max=100.0)
    >>> records = learner.run()                # to the budget  # doctest: +SKIP
    >>> ablation = pb.Rainbow("gym:CartPole-v1", seed=0, noisy=False, distributional=False)
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from pbmarl.config import FLAG, POSITIVE, POSITIVE_INT, UNIT, Rule
from pbmarl.config import is_real as _is_real
from pbmarl.games.base import Game
from pbmarl.learners.common.buffers import Batch
from pbmarl.learners.common.nets import RainbowNet, adam, seeded, to_tensor
from pbmarl.learners.control.base import ControlConfig, ControlLearner, ControlRecord, PrioritizedOptions
from pbmarl.policies.base import Policy
from pbmarl.rl.multistep import nstep_targets
from pbmarl.rl.polyak import soft_update
from pbmarl.rl.schedules import linear_schedule
from pbmarl.rl.value_learning import c51_projection
from pbmarl.torchutil import clip_grad_norm


@dataclass(frozen=True)
class RainbowConfig(ControlConfig, PrioritizedOptions):
    """Rainbow options (plus the shared ones of `ControlConfig`)."""

    lr: float = 6.25e-4
    """Adam learning rate."""
    batch_size: int = 64
    """Transitions per gradient step."""
    learning_starts: int = 1_000
    """Environment steps of random actions before the first update."""
    tau: float = 1.0
    """Polyak rate of each target sync (1: a hard copy)."""
    target_update_interval: int = 500
    """Updates between target syncs."""
    double: bool = True
    """Double Q-learning targets."""
    dueling: bool = True
    """Dueling value/advantage heads."""
    n_step: int = 3
    """Steps of the multi-step return (1: one-step TD)."""
    prioritized: bool = True
    """Proportional prioritised replay (off: uniform, Machin's ``DQN``; on: ``DQNPer``)."""
    priority_alpha: float = 0.5
    """How strongly priorities shape sampling (0: uniform)."""
    priority_beta: float = 0.4
    """Importance-weight correction at the start; annealed linearly to 1 over the budget."""
    noisy: bool = True
    """Noisy linear heads for exploration (epsilon-greedy when off)."""
    noisy_sigma: float = 0.5
    """Initial noise scale sigma_0 of the noisy layers."""
    distributional: bool = True
    """C51 categorical returns (scalar Q when off)."""
    atoms: int = 51
    """Atoms of the return distribution."""
    v_min: float = -10.0
    """Smallest return the distribution can represent."""
    v_max: float = 10.0
    """Largest return the distribution can represent."""
    epsilon_start: float = 1.0
    """Exploration rate at the start (only without noisy nets)."""
    epsilon_end: float = 0.05
    """Exploration rate once the schedule has run out."""
    exploration_fraction: float = 0.1
    """Fraction of the budget over which epsilon falls."""
    max_grad_norm: float = 10.0
    """Gradient-norm clip per update."""

    checks: ClassVar[dict[str, Rule]] = {
        "target_update_interval": POSITIVE_INT, "double": FLAG, "dueling": FLAG, "n_step": POSITIVE_INT,
        "noisy": FLAG, "noisy_sigma": POSITIVE,
        "distributional": FLAG, "atoms": (lambda v: isinstance(v, int) and v >= 2, "an int >= 2"),
        "v_min": (_is_real, "a finite number"), "v_max": (_is_real, "a finite number"),
        "epsilon_start": UNIT, "epsilon_end": UNIT, "exploration_fraction": UNIT, "max_grad_norm": POSITIVE,
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.v_min < self.v_max:
            raise ValueError(f"v_min must be below v_max, got v_min={self.v_min!r}, v_max={self.v_max!r}")


@dataclass(frozen=True)
class RainbowRecord(ControlRecord):
    """One Rainbow round: ``loss/td`` (`loss`: the TD loss, or C51's cross-entropy), then ``q_mean`` and ``epsilon``."""

    q_mean: float
    """Mean Q of the replayed actions."""
    epsilon: float
    """Exploration rate (0 with noisy nets)."""

    loss_name: ClassVar[str] = "td"


class Rainbow(ControlLearner):
    """Rainbow DQN for Discrete actions; see the module doc.

    Args:
        game: a one-player game with Discrete actions (or its name).
        config: a `RainbowConfig`; keyword options override its fields.
        seed: seeds networks, noise, replay sampling and episode resets.
    """

    name = "rainbow"
    config_class = RainbowConfig
    record_class: ClassVar[type[ControlRecord]] = RainbowRecord
    spaces = ("discrete",)
    config: RainbowConfig

    def _build(self) -> None:
        cfg = self.config
        atoms = cfg.atoms if cfg.distributional else 1
        self.net = seeded(self._seeded(), lambda: RainbowNet(self.obs_dim, cfg.hidden, self.num_actions, atoms=atoms,
                                                             dueling=cfg.dueling, noisy=cfg.noisy,
                                                             sigma0=cfg.noisy_sigma))
        self.target = copy.deepcopy(self.net)
        self.params = list(self.net.parameters())  # walked once, not on every update's clip
        self._rows = torch.arange(cfg.batch_size)
        #: the weights `_numpy_q` acts with: (the parameters' versions, torso, advantage head, value head)
        self._acting: tuple[list[int], list[tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray],
                            tuple[np.ndarray, np.ndarray] | None] | None = None
        self.optimizer = adam(self.params, lr=cfg.lr)
        self.support = torch.linspace(cfg.v_min, cfg.v_max, cfg.atoms)
        self.discount = np.zeros(cfg.buffer_size)
        self._window: list[tuple[np.ndarray, int, float]] = []
        self.net.reset_noise(self.gen)
        self.target.reset_noise(self.gen)

    def _make_buffer(self) -> Any:
        replay = super()._make_buffer()
        replay.columns["discount"] = self.discount  # a round undone puts back the discounts it overwrote too
        return replay

    # -- acting ----------------------------------------------------------------------------
    def q_values(self, out: torch.Tensor) -> torch.Tensor:
        """Q ``[B, A]`` from the network's output ``[B, A, atoms]`` (the mean of the distribution for C51)."""
        if not self.config.distributional:
            return out[..., 0]
        return (torch.softmax(out, -1) * self.support).sum(-1)

    def epsilon(self) -> float:
        cfg = self.config
        if cfg.noisy:
            return 0.0
        return linear_schedule(cfg.epsilon_start, cfg.epsilon_end, cfg.exploration_fraction,
                               self.env_steps / cfg.budget)

    def _act(self, obs: torch.Tensor, *, deterministic: bool) -> int:
        if deterministic:
            self.net.eval()  # noisy layers use their means
            action = int(self.q_values(self.net(obs))[0].argmax())
            self.net.train()
            return action
        if self.rng.random() < self.epsilon():
            return int(self.rng.integers(self.num_actions))
        if self.config.noisy:
            self.net.reset_noise(self.gen)
        return int(self.q_values(self.net(obs))[0].argmax())

    def _explore(self, obs: np.ndarray) -> int:
        """Epsilon-greedy on one observation. Without noisy nets the greedy action comes from a numpy copy of
        the network's weights, taken again whenever they change: a batch-of-one forward costs a fifth of
        torch's call. A change is a new optimiser step count (the fused Adam kernel writes the weights in
        place without bumping their tensor versions) or a new tensor version (loads, a parameter server's
        copies). Its Q-values equal torch's to float rounding only, so a near-tie may pick the other action."""
        if self.config.noisy:
            return int(super()._explore(obs))
        if self.rng.random() < self.epsilon():
            return int(self.rng.integers(self.num_actions))
        return int(self._numpy_q(obs).argmax())

    def _numpy_q(self, obs: np.ndarray) -> np.ndarray:
        """Q ``[A]`` of one observation by `RainbowNet.forward`'s arithmetic in numpy (float32; no noisy layers)."""
        net = self.net
        state = self.optimizer.state.get(self.params[0])
        key = [p._version for p in self.params] + [int(state["step"]) if state else 0]
        if self._acting is None or self._acting[0] != key:
            def wb(m: torch.nn.Module) -> tuple[np.ndarray, np.ndarray]:
                return m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy()  # type: ignore[operator]
            torso = [wb(m) for m in net.torso if isinstance(m, torch.nn.Linear)]
            self._acting = (key, torso, wb(net.advantage), wb(net.value) if net.value is not None else None)
        _, torso, (wa, ba), value = self._acting
        h = np.asarray(obs, np.float32).reshape(1, -1)
        for w, b in torso:
            h = np.maximum(h @ w + b, 0.0)
        out = (h @ wa + ba).reshape(net.num_actions, net.atoms)
        if value is not None:
            out = (h @ value[0] + value[1]).reshape(1, net.atoms) + out - out.mean(axis=0, keepdims=True)
        if not self.config.distributional:
            return out[:, 0]
        e = np.exp(out - out.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)) @ self.support.numpy()

    def _store(self, obs: np.ndarray, action: Any, reward: float, terminated: bool, next_obs: np.ndarray,
               episode_end: bool) -> None:
        """Hold transitions until their n-step return is known, then put them in the buffer."""
        cfg = self.config
        if cfg.n_step == 1:  # the one-step target needs no window (what nstep_targets gives for n=1)
            slot = self.replay.append(obs, int(action), reward, terminated, next_obs)
            self.discount[slot] = 0.0 if terminated else cfg.gamma
            return
        self._window.append((obs, int(action), reward))
        if not episode_end and len(self._window) < cfg.n_step:
            return
        rewards = np.array([r for _, _, r in self._window])
        done = np.zeros(len(rewards), bool)
        done[-1] = terminated
        end = np.zeros(len(rewards), bool)
        end[-1] = True  # the window stops at the newest transition
        ret, disc, _ = nstep_targets(rewards, done, n=cfg.n_step, gamma=cfg.gamma, end=end)
        emit = range(len(self._window)) if episode_end else range(1)
        for i in emit:
            o, a, _ = self._window[i]
            slot = self.replay.append(o, a, ret[i], disc[i] == 0.0 and terminated, next_obs)
            self.discount[slot] = disc[i]
        self._window = [] if episode_end else self._window[1:]

    # -- learning --------------------------------------------------------------------------
    def _sample(self) -> Batch:
        cfg = self.config
        if cfg.prioritized:  # beta anneals to full correction over the budget
            self.replay.beta = linear_schedule(cfg.priority_beta, 1.0, 1.0, self.env_steps / cfg.budget)  # type: ignore[attr-defined]
        return super()._sample()

    def _update(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        if cfg.noisy:
            self.net.reset_noise(self.gen)
            self.target.reset_noise(self.gen)
        obs, next_obs = to_tensor(batch.obs), to_tensor(batch.next_obs)
        action = to_tensor(batch.action, dtype=None)
        out = self.net(obs)[torch.arange(len(action)), action]  # [B, atoms]
        target = self._td_target(next_obs, to_tensor(batch.reward), to_tensor(self.discount[batch.index]))
        return self._learn(out, target, batch)

    @torch.no_grad()
    def _td_target(self, next_obs: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor) -> torch.Tensor:
        """The TD target ``[B]`` (C51: the projected distribution ``[B, atoms]``) of the transitions."""
        cfg = self.config
        target_out = self.target(next_obs)
        pick = self.q_values(self.net(next_obs) if cfg.double else target_out).argmax(-1)
        chosen = target_out[torch.arange(len(pick)), pick]
        if cfg.distributional:
            return c51_projection(self.support, torch.softmax(chosen, -1), reward, discount)
        return reward + discount * chosen[:, 0]

    def _burst(self, n: int, losses: dict[str, list[float]]) -> None:
        """`n` updates; where no update changes the targets of the next (no double Q, noisy nets or
        priorities), their minibatches are drawn at once and the target network values all of them in one
        pass per target sync, then the updates run one by one. The same numbers as `n` single updates,
        up to float rounding in the larger matmul."""
        cfg = self.config
        if cfg.double or cfg.noisy or cfg.prioritized or n < 2:
            super()._burst(n, losses)
            return
        B, interval = cfg.batch_size, cfg.target_update_interval
        index = self.rng.integers(self.replay.size, size=(n, B))  # what `n` calls of `_sample` draw, in order
        done = 0
        while done < n:
            k = min(n - done, interval - self.updates % interval)  # the updates before the next target sync
            slots = index[done:done + k].reshape(-1)
            obs, next_obs = torch.from_numpy(self.replay.obs[slots]), torch.from_numpy(self.replay.next_obs[slots])
            action = torch.from_numpy(self.replay.action[slots])
            with self._precision():
                target = self._td_target(next_obs, to_tensor(self.replay.reward[slots]),
                                         to_tensor(self.discount[slots]))
                for j in range(k):
                    rows = slice(j * B, (j + 1) * B)
                    out = self.net(obs[rows])[self._rows, action[rows]]
                    for key, v in self._learn(out, target[rows], None).items():
                        losses.setdefault(key, []).append(v)
                    self.updates += 1
            done += k

    def _learn(self, out: torch.Tensor, target: torch.Tensor, batch: Batch | None) -> dict[str, float]:
        """One gradient step from the replayed actions' outputs `out` ``[B, atoms]`` towards `target`
        (`batch`: its importance weights and slots, for prioritised replay)."""
        cfg = self.config
        if cfg.distributional:
            per_sample = -(target * torch.log_softmax(out, -1)).sum(-1)
            priority = per_sample.detach()
            q = (torch.softmax(out.detach(), -1) * self.support).sum(-1)
        else:
            q = out[:, 0]
            per_sample = F.smooth_l1_loss(q, target, reduction="none")
            priority = (target - q).detach()
        # uniform replay's importance weights are all 1: the plain mean is the same loss
        weighted = cfg.prioritized and batch is not None
        loss = (to_tensor(batch.weight) * per_sample).mean() if weighted else per_sample.mean()  # type: ignore[union-attr]
        self.optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(self.params, cfg.max_grad_norm)
        self.optimizer.step()
        if weighted:
            self.replay.update_priorities(batch.index, priority.numpy())  # type: ignore[union-attr]
        self._after_update()
        return {"loss": float(loss.detach()), "q_mean": float(q.detach().mean()), "epsilon": self.epsilon()}

    def _after_update(self) -> None:
        if (self.updates + 1) % self.config.target_update_interval == 0:
            soft_update(self.target, self.net, self.config.tau)

    # -- state -----------------------------------------------------------------------------
    def _modules(self) -> dict[str, Any]:
        return {"net": self.net, "target": self.target, "optimizer": self.optimizer}

    def _snapshot_extra(self) -> Any:
        return list(self._window)  # (the discounts are replay columns: the replay's journal keeps them)

    def _restore_extra(self, extra: Any) -> None:
        self._window = list(extra)

    def _extra_names(self) -> tuple[str, ...]:
        return ("discount",)

    def _extra_arrays(self) -> dict[str, np.ndarray]:
        return {"discount": self.discount[: len(self.replay)].copy()}

    def _load_extra_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.discount[: len(arrays["discount"])] = arrays["discount"]

    def _policy(self) -> GreedyQPolicy:
        """The greedy policy of a copy of the network (noise off): a `GreedyQPolicy`."""
        cfg = self.config
        policy = GreedyQPolicy(self.game, hidden=cfg.hidden, atoms=cfg.atoms if cfg.distributional else 1,
                               dueling=cfg.dueling, noisy=cfg.noisy, v_min=cfg.v_min, v_max=cfg.v_max)
        policy.net.load_state_dict(self.net.state_dict())
        policy.version = self.updates
        return policy


class GreedyQPolicy(Policy):
    """Plays the legal action of highest Q under a `RainbowNet` (evaluation mode: noisy layers use their means).

    Saves as ``(arrays, meta)`` like every policy, so it joins a `Population` and a run folder.
    """

    kind = "greedy_q"

    def __init__(self, game: Game, *, hidden: Sequence[int], atoms: int = 1, dueling: bool = True,
                 noisy: bool = False, v_min: float = -10.0, v_max: float = 10.0) -> None:
        super().__init__(game)
        self.options = {"hidden": [int(h) for h in hidden], "atoms": int(atoms), "dueling": bool(dueling),
                        "noisy": bool(noisy), "v_min": float(v_min), "v_max": float(v_max)}
        in_dim = int(np.prod(game.observation_shape))
        self.net = RainbowNet(in_dim, hidden, game.num_actions, atoms=atoms, dueling=dueling, noisy=noisy).eval()
        self.support = torch.linspace(v_min, v_max, atoms) if atoms > 1 else None

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """Q ``[B, A]`` (the mean of each action's return distribution for C51)."""
        with torch.no_grad():
            out = self.net(to_tensor(np.asarray(obs, np.float32)).reshape(len(obs), -1))
            q = out[..., 0] if self.support is None else (torch.softmax(out, -1) * self.support).sum(-1)
        return q.double().numpy()

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        q = np.where(legal_mask, self.q_values(obs), -np.inf)
        probs = np.zeros(legal_mask.shape)
        probs[np.arange(len(q)), q.argmax(axis=1)] = 1.0
        return probs

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy() for k, v in self.net.state_dict().items()}

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), **self.options}

    @classmethod
    def from_state(cls, game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> GreedyQPolicy:
        options = {k: meta[k] for k in ("hidden", "atoms", "dueling", "noisy", "v_min", "v_max")}
        policy = cls(game, **options)
        policy.net.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in arrays.items()})
        policy.version = int(meta.get("version", 0))
        return policy
