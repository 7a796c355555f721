"""MAPPO and IPPO: PPO for a group of agents, with a shared actor and a centralised value.

One round (`pb.MARL` collects it with `behaviour()`):

1. the critic values every row: MAPPO from the global state (``game.has_global_state``)
   or the group's observations concatenated, plus the agent's one-hot id; IPPO from
   the agent's own observation;
2. GAE advantages per agent (`pbmarl.rl.multistep.gae`), bootstrapping from the
   next state's value where an episode was truncated (``max_cycles``);
3. value targets are normalised by running statistics (the MAPPO paper's ValueNorm);
4. ``epochs`` passes in ``minibatches``: clipped surrogate, Huber value loss, entropy bonus.

Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games"
(NeurIPS Datasets and Benchmarks): the defaults below are their MPE settings (Tables 8-9).

Example:
    >>> marl = pb.MARL(game, learners={"shared": pb.MAPPO(seed=0)}, mapping=pb.AgentMapping.shared(game))  # doctest: +SKIP
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from pbmarl.config import FLAG, NON_NEGATIVE, POSITIVE, POSITIVE_INT, UNIT, Rule, is_int
from pbmarl.distributed.options import ParallelOptions
from pbmarl.learners.common.config import DeviceOption
from pbmarl.learners.common.nets import build_mlp, masked_logits, to_tensor
from pbmarl.learners.multiagent.episode_batch import sequence_grid, unroll
from pbmarl.learners.multiagent.group import (
    HIDDEN,
    GroupLearner,
    agent_onehot,
    as_widths,
    central_input,
    central_source,
    check_discrete,
    joint_steps,
)
from pbmarl.policies.base import Policy
from pbmarl.policies.neural import ACTIVATIONS, MLPPolicy, orthogonal_init_
from pbmarl.policies.recurrent import RecurrentNet, RecurrentPolicy
from pbmarl.rl.multistep import gae
from pbmarl.rl.policy_gradients import clipped_surrogate_loss
from pbmarl.rl.schedules import linear_schedule
from pbmarl.rollout.mapping import GroupGame
from pbmarl.rollout.trajectories import Trajectories
from pbmarl.torchutil import clip_grad_norm


@dataclass(frozen=True)
class MAPPOConfig(ParallelOptions, DeviceOption):
    """MAPPO options; defaults are the MAPPO paper's MPE values (Yu et al. 2022, Tables 8-9).

    With ``workers > 1`` (`ParallelOptions`) `pb.MARL` trains it on a parameter server: a worker collects
    its own ``steps_per_round`` env steps and each of its jobs is the gradient of one of that batch's
    ``epochs * minibatches`` minibatches (`pbmarl.algorithms.teams.rounds`).
    """

    hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of actor and critic (paper: 64)."""
    lr: float = 7e-4
    """Adam learning rate of actor and critic (paper: 7e-4)."""
    gamma: float = 0.99
    """Discount (paper: 0.99)."""
    gae_lambda: float = 0.95
    """GAE lambda (paper: 0.95)."""
    clip_coef: float = 0.2
    """PPO ratio clip (paper: 0.2)."""
    norm_adv: bool = True
    """Normalise the advantages within each minibatch (the paper's code). With ``workers > 1`` each worker
    normalises its own shard of a minibatch; False makes BSP exactly the update on the union of the shards."""
    epochs: int = 15
    """PPO epochs per round (paper, MPE: 15)."""
    minibatches: int = 1
    """Minibatches per epoch (paper, MPE: 1)."""
    ent_coef: float = 0.01
    """Entropy bonus (paper: 0.01)."""
    vf_coef: float = 1.0
    """Weight of the value loss (the paper optimises actor and critic separately, i.e. weight 1)."""
    huber_delta: float = 10.0
    """Huber loss delta of the value loss (paper: 10)."""
    max_grad_norm: float = 10.0
    """Gradient-norm clip (paper: 10)."""
    value_norm: bool = True
    """Normalise value targets by running mean and variance (paper: ValueNorm on)."""
    central: str = "auto"
    """Critic input: 'auto' (global state if the game has one, else concatenated observations), 'state',
    'concat', or 'local' (the agent's own observation: IPPO)."""
    steps_per_round: int = 3200
    """Env steps per round (paper, MPE: 128 threads x 25 steps)."""
    layer_norm: bool = True
    """LayerNorm on the input and after every hidden layer, in actor and critic (the paper's code:
    ``use_feature_normalization`` and its MLP's LayerNorm). On simple_spread, seed 0, it scored -161.2
    against -166.8 without, at 2M env steps."""
    activation: str = "relu"
    """Hidden-layer activation of actor and critic, ``"relu"`` or ``"tanh"``. The MAPPO authors' simple_spread
    run (on-policy's ``train_mpe_spread.sh``) passes ``--use_ReLU``, a ``store_false`` flag of their config, so
    it ran tanh (with orthogonal gain 5/3). On simple_spread, seed 0, at 1M / 2M env steps: tanh -163.9 /
    -156.8 in the paper's convention, ReLU -170.5 / -164.0."""
    orthogonal_init: bool = True
    """Orthogonal weights (the activation's gain on hidden layers: sqrt(2) ReLU, 5/3 tanh; 0.01 on the actor's
    head, 1 on the value head) and zero biases (the paper's code: ``use_orthogonal``, ``gain 0.01``)."""
    team_reward: bool = False
    """Train every agent on the group's summed reward at each step instead of its own. The MAPPO paper's
    MPE does this (its ``shared_reward``: each agent receives the sum of all agents' rewards), so the
    agents optimise the team return the paper reports; PettingZoo's ``simple_spread`` otherwise gives
    each agent a mix of the shared coverage term and its own collisions (``local_ratio``). On simple_spread,
    seed 0, it scored -174.7 / -162.8 in the paper's convention at 1M / 2M env steps, against -171.7 / -164.5
    with each agent's own reward: no difference at that budget."""
    bootstrap_truncated: bool = True
    """Where an episode was cut by its time limit (``max_cycles``), bootstrap from ``V(s')``. False treats the
    limit as the episode's end, as the MAPPO paper's code does (its MPE reports ``done`` at
    ``episode_length``): the value targets are then the finite-horizon returns the evaluation measures. On
    simple_spread, seed 0, it scored -185.5 in the paper's convention at 1M env steps against -171.7 with
    the bootstrap (the critic does not see the time left), so the default keeps it."""
    value_clip: bool = False
    """Clip each value prediction's change within a round to ``clip_coef`` (in the critic's normalised units
    where ``value_norm``) and take the larger of the clipped and unclipped Huber losses, as the MAPPO
    authors' code does (``use_clipped_value_loss``, on by default there)."""
    recurrent: bool = False
    """rMAPPO: a GRU after the MLP in actor and critic (`pbmarl.policies.recurrent.RecurrentNet`, as wide as the
    last hidden layer, a LayerNorm on its output), its hidden state carried through each episode in play. The
    MAPPO authors' simple_spread script (on-policy's ``train_mpe_spread.sh``) runs ``algo="rmappo"``. Their code
    trains on 10-step chunks started from hidden states stored in play; pbmarl unrolls each agent's whole episode
    from a zero state in every epoch, so the states the gradient sees are the current networks' own."""
    clip_apart: bool = False
    """Clip the actor's and the critic's gradient norms each to ``max_grad_norm``, as the MAPPO authors' code
    does (one optimiser and one clip per network), instead of clipping their joint norm: a large value error
    then no longer scales the policy step down."""
    lr_decay_steps: int | None = None
    """Decay the learning rate linearly to 0 over this many env steps, as the MAPPO authors' code does with
    ``use_linear_lr_decay`` (over ``num_env_steps``; off in their MPE scripts): a round that ends at ``E`` env
    steps trains at ``lr * (1 - (E - steps_per_round) / lr_decay_steps)``, and at 0 past the end. None (the
    default) keeps ``lr``. Single-process rounds only (``workers=1``)."""
    checks: ClassVar[dict[str, Rule]] = {
        "hidden": HIDDEN, "lr": POSITIVE, "clip_coef": POSITIVE, "huber_delta": POSITIVE, "max_grad_norm": POSITIVE,
        "gamma": UNIT, "gae_lambda": UNIT, "ent_coef": NON_NEGATIVE, "vf_coef": NON_NEGATIVE,
        "epochs": POSITIVE_INT, "minibatches": POSITIVE_INT, "steps_per_round": POSITIVE_INT,
        "layer_norm": FLAG, "orthogonal_init": FLAG, "team_reward": FLAG, "bootstrap_truncated": FLAG,
        "value_norm": FLAG, "value_clip": FLAG, "norm_adv": FLAG, "clip_apart": FLAG, "recurrent": FLAG,
        "central": (lambda v: v in ("auto", "state", "concat", "local"), "'auto', 'state', 'concat' or 'local'"),
        "activation": (lambda v: v in ACTIVATIONS, f"one of {sorted(ACTIVATIONS)}"),
        "lr_decay_steps": (lambda v: v is None or (is_int(v) and v >= 1), "a positive int (env steps) or None"),
    }

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", as_widths(self.hidden))
        super().__post_init__()
        if self.lr_decay_steps is not None and self.workers > 1:
            raise ValueError(f"lr_decay_steps={self.lr_decay_steps} decays the single-process update's "
                             f"learning rate; with workers={self.workers} the server's optimiser steps: drop one")


def value_loss(v: torch.Tensor, target: torch.Tensor, delta: float, old: torch.Tensor | None = None,
               clip: float = 0.2) -> torch.Tensor:
    """Mean Huber loss of predictions `v`; given the round's `old` predictions, PPO's clipped value loss.

    The clipped form (the MAPPO authors' ``use_clipped_value_loss``) takes, per sample, the larger of the
    losses of `v` and of ``old + clamp(v - old, -clip, clip)``: a prediction that has already moved more
    than `clip` towards its target gets no further gradient this round, one moving away still does.
    """
    huber = torch.nn.functional.huber_loss
    if old is None:
        return huber(v, target, delta=delta)
    clipped = old + (v - old).clamp(-clip, clip)
    return torch.max(huber(v, target, reduction="none", delta=delta),
                     huber(clipped, target, reduction="none", delta=delta)).mean()


class ValueNorm(torch.nn.Module):
    """Running mean and variance of value targets (debiased EMA, beta = 0.99999 as in the MAPPO code)."""

    def __init__(self, beta: float = 0.99999) -> None:
        super().__init__()
        self.beta = beta
        self.mean: torch.Tensor
        self.mean_sq: torch.Tensor
        self.debias: torch.Tensor
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean_sq", torch.zeros((), dtype=torch.float64))
        self.register_buffer("debias", torch.zeros((), dtype=torch.float64))

    def update(self, x: torch.Tensor) -> None:
        x = x.double()
        self.update_moments(float(x.mean()), float((x**2).mean()))

    def update_moments(self, mean: float, mean_sq: float) -> None:
        """One EMA step towards a batch with this mean and mean square."""
        self.mean.mul_(self.beta).add_(mean * (1 - self.beta))
        self.mean_sq.mul_(self.beta).add_(mean_sq * (1 - self.beta))
        self.debias.mul_(self.beta).add_(1 - self.beta)

    def stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        d = self.debias.clamp(min=1e-5)
        mean, mean_sq = self.mean / d, self.mean_sq / d
        return mean.float(), (mean_sq - mean**2).clamp(min=1e-2).sqrt().float()

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = self.stats()
        return (x - mean) / std

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = self.stats()
        return x * std + mean


@dataclass(frozen=True)
class RoundData:
    """A round's rows as MAPPO's minibatches read them (`MAPPO.round_data`): tensors ``[T, ...]`` fixed at the
    weights that collected them (a parameter-server worker keeps one while it takes its minibatches' gradients)."""

    obs: torch.Tensor
    mask: torch.Tensor
    action: torch.Tensor
    old_logp: torch.Tensor
    adv: torch.Tensor
    ret: torch.Tensor
    """Value targets in the reward's units."""
    x: torch.Tensor
    """The critic's inputs."""
    raw: torch.Tensor
    """The critic's outputs when the round began (``value_clip``)."""
    seqs: tuple[np.ndarray, np.ndarray] | None
    """`sequence_grid` of the rows (recurrent MAPPO), else None."""
    lr: float

    @property
    def units(self) -> int:
        """What minibatches split: rows, or whole sequences for the GRU."""
        return len(self.seqs[0]) if self.seqs is not None else len(self.obs)


class MAPPO(GroupLearner):
    """MAPPO for one group; see the module doc. ``pb.MAPPO(game=None, *, seed=0, config=None, **options)``."""

    name = "mappo"
    config_class = MAPPOConfig
    config: MAPPOConfig
    one_gradient = {"epochs": 1, "minibatches": 1}

    def _cpu_only(self) -> str | None:
        if self.config.recurrent:
            return "the recurrent actor (recurrent=True) acts on the CPU"
        return super()._cpu_only()

    def _build(self, view: GroupGame) -> None:
        cfg = self.config
        who = f"{type(self).__name__} (group {view.group!r})"
        check_discrete(view, who)
        self.source = "local" if cfg.central == "local" else central_source(view.base, cfg.central, who)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            width = self._critic_width(view)
            self.actor: MLPPolicy | RecurrentPolicy
            self.critic: torch.nn.Module
            if cfg.recurrent:
                self.actor = RecurrentPolicy(view, hidden=cfg.hidden, seed=self.seed, layer_norm=cfg.layer_norm,
                                             activation=cfg.activation)
                self.critic = RecurrentNet(width, cfg.hidden, 1, activation=cfg.activation, layer_norm=cfg.layer_norm)
                if cfg.orthogonal_init:
                    self.actor.net.orthogonal_(0.01, cfg.activation)
                    self.critic.orthogonal_(1.0, cfg.activation)
            else:
                self.actor = MLPPolicy(view, hidden=cfg.hidden, seed=self.seed, layer_norm=cfg.layer_norm,
                                       activation=cfg.activation)
                self.critic = build_mlp(width, cfg.hidden, 1, activation=ACTIVATIONS[cfg.activation][0],  # checked by the config
                                        layer_norm=cfg.layer_norm)
                if cfg.orthogonal_init:
                    orthogonal_init_(self.actor.net, 0.01, cfg.activation)
                    orthogonal_init_(self.critic, 1.0, cfg.activation)
        self.critic_width = width
        self.value_norm = ValueNorm()
        for module in (self.actor.net, self.critic, self.value_norm):  # built on the CPU from the seed, then moved
            module.to(cfg.device)
        self._moments: dict[str, float] = {}
        self.optimizer = torch.optim.Adam(list(self.actor.net.parameters()) + list(self.critic.parameters()),
                                          lr=cfg.lr, eps=1e-5)

    def _critic_width(self, view: GroupGame) -> int:
        n = self.n_agents
        if self.source == "local":
            return int(view.observation_shape[0])
        if self.source == "state":
            return int(np.prod(view.base.global_state_shape)) + n
        return n * int(view.observation_shape[0]) + n

    def critic_inputs(self, rows: Trajectories) -> tuple[np.ndarray, np.ndarray]:
        """``(x, next_x)`` ``[T, W]``: what the critic reads for each row and for the row's next step."""
        if self.source == "local":
            return rows.obs.reshape(len(rows), -1), rows.next_obs.reshape(len(rows), -1)
        steps = joint_steps(rows, self.seats)
        S, n = len(steps), self.n_agents
        ids = agent_onehot(S, n)
        out = []
        for nxt in (False, True):
            c = central_input(steps, self.source, nxt=nxt)
            per = np.concatenate([np.broadcast_to(c[:, None, :], (S, n, c.shape[1])), ids], axis=2)
            x = np.zeros((len(rows), per.shape[2]), np.float32)
            x[steps.index.ravel()] = per.reshape(S * n, -1)
            out.append(x)
        return out[0], out[1]

    def team_rewards(self, rows: Trajectories) -> np.ndarray:
        """``[T]``: each row's reward replaced by the sum of the group's rewards at the same step."""
        steps = joint_steps(rows, self.seats)
        out = np.zeros_like(rows.reward)
        out[steps.index] = steps.reward.sum(axis=1, keepdims=True)
        return out

    def behaviour(self) -> Policy:
        return self.actor

    def policy(self) -> Policy:
        policy = copy.deepcopy(self.actor)
        policy.net.to("cpu")  # a trained policy plays and is saved on the CPU, whatever device trains it
        return policy

    def _critic_outputs(self, x: np.ndarray, next_x: np.ndarray,
                        seqs: tuple[np.ndarray, np.ndarray] | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The critic's own outputs ``[T]`` (normalised units where ``value_norm``) for each row's input and next
        input. With `seqs` (``sequence_grid``) the recurrent critic runs along each sequence, and the next output is
        one more GRU step, on the row's next input, from the state after the row."""
        with torch.no_grad():
            if seqs is None:
                device = self.device
                return (self.critic(to_tensor(x, device=device)).squeeze(-1),
                        self.critic(to_tensor(next_x, device=device)).squeeze(-1))
            assert isinstance(self.critic, RecurrentNet)
            out, states, k = unroll(self.critic, to_tensor(x), *seqs)
            nxt, _ = self.critic.step(to_tensor(next_x[k]), states)
            raw, raw_next, rows_k = torch.zeros(len(x)), torch.zeros(len(x)), torch.as_tensor(k)
            raw[rows_k], raw_next[rows_k] = out[:, 0], nxt[:, 0]
            return raw, raw_next

    def _in_return_units(self, raw: torch.Tensor) -> np.ndarray:
        """Critic outputs as values in the reward's units (denormalised where ``value_norm``)."""
        with torch.no_grad():
            return (self.value_norm.denormalize(raw) if self.config.value_norm else raw).double().cpu().numpy()

    def train(self, rows: Trajectories, env_steps: int) -> dict[str, float]:
        cfg = self.config
        data = self.round_data(rows, env_steps)
        sums = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "approx_kl": 0.0}
        n = 0
        for _ in range(cfg.epochs):
            for part in self.epoch_parts(data, self.rng):
                for name, val in self.minibatch_step(data, part).items():
                    sums[name] += val
                n += 1
        self.actor.version += 1  # rollout workers cache policies by version
        means = {k: v / max(n, 1) for k, v in sums.items()}
        return means if cfg.lr_decay_steps is None else {**means, "lr": data.lr}

    def round_data(self, rows: Trajectories, env_steps: int) -> RoundData:
        """What a round's minibatches share, fixed at the current weights: the learning rate, the critic's outputs,
        GAE advantages and returns (the ValueNorm takes its step on these returns here)."""
        cfg = self.config
        self.env_steps = int(env_steps)
        lr = self.scheduled_lr()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        x, next_x = self.critic_inputs(rows)
        seqs = sequence_grid(rows) if cfg.recurrent else None
        raw, raw_next = self._critic_outputs(x, next_x, seqs)
        value, next_value = self._in_return_units(raw), self._in_return_units(raw_next)
        assert rows.terminated is not None and rows.truncated is not None
        reward = self.team_rewards(rows) if cfg.team_reward else rows.reward
        if cfg.bootstrap_truncated:  # a truncated row bootstraps from V(s'); its recursion still stops there
            reward = reward + cfg.gamma * rows.truncated * next_value
        adv, ret = gae(reward, rows.done, value, next_value, gamma=cfg.gamma, lam=cfg.gae_lambda)
        device = self.device  # the round's rows go to the device once; each minibatch indexes them there
        ret_t = to_tensor(ret, device=device)
        self._moments = {"ret_mean": float(np.mean(ret)), "ret_mean_sq": float(np.mean(ret**2))}
        if cfg.value_norm:
            self.value_norm.update(ret_t)
        assert rows.log_prob is not None
        return RoundData(obs=to_tensor(rows.obs.reshape(len(rows), -1), device=device),
                         mask=to_tensor(rows.legal_mask, None, device=device),
                         action=to_tensor(rows.action, None, device=device),
                         old_logp=to_tensor(rows.log_prob, device=device), adv=to_tensor(adv, device=device),
                         ret=ret_t, x=to_tensor(x, device=device), raw=raw, seqs=seqs, lr=lr)

    def epoch_parts(self, data: RoundData, rng: np.random.Generator) -> list[np.ndarray]:
        """One epoch's minibatches: a shuffled split of the rows (of whole sequences for the GRU) in ``minibatches``."""
        units = data.units
        return np.array_split(rng.permutation(units), min(self.config.minibatches, units))

    def minibatch_step(self, data: RoundData, part: np.ndarray) -> dict[str, float]:
        """One optimiser step on minibatch `part` of `data` (row or sequence indices) at the current weights:
        clipped surrogate, value loss, entropy bonus, the gradient-norm clip. Returns the minibatch's statistics."""
        cfg = self.config
        actor_params, critic_params = list(self.actor.net.parameters()), list(self.critic.parameters())
        if data.seqs is not None:
            assert isinstance(self.actor, RecurrentPolicy) and isinstance(self.critic, RecurrentNet)
            grid, valid = data.seqs[0][part], data.seqs[1][part]
            out, _, rows_k = unroll(self.actor.net, data.obs, grid, valid)
            v, _, _ = unroll(self.critic, data.x, grid, valid)
            idx = torch.as_tensor(rows_k)
        else:
            assert isinstance(self.actor, MLPPolicy)
            idx = torch.as_tensor(part, device=data.obs.device)
            out, v = self.actor.logits(data.obs[idx]), self.critic(data.x[idx])
        v = v.squeeze(-1)
        logits = masked_logits(out, data.mask[idx])
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(1, data.action[idx][:, None]).squeeze(1)
        p = logp_all.exp()
        entropy = -torch.where(data.mask[idx], p * logp_all, torch.zeros_like(p)).sum(-1).mean()
        a = data.adv[idx]
        if cfg.norm_adv:
            a = (a - a.mean()) / (a.std() + 1e-8) if len(a) > 1 else a
        log_ratio = logp - data.old_logp[idx]
        ratio = log_ratio.exp()
        pg = clipped_surrogate_loss(a, ratio, cfg.clip_coef)
        target = self.value_norm.normalize(data.ret[idx]) if cfg.value_norm else data.ret[idx]
        v_loss = value_loss(v, target, cfg.huber_delta, data.raw[idx] if cfg.value_clip else None, cfg.clip_coef)
        loss = pg + cfg.vf_coef * v_loss - cfg.ent_coef * entropy
        self.optimizer.zero_grad()
        loss.backward()
        if cfg.clip_apart:
            clip_grad_norm(actor_params, cfg.max_grad_norm)
            clip_grad_norm(critic_params, cfg.max_grad_norm)
        else:
            clip_grad_norm(actor_params + critic_params, cfg.max_grad_norm)
        self.optimizer.step()
        with torch.no_grad():
            kl = float(((ratio - 1) - log_ratio).mean())
        return {"policy_loss": pg.item(), "value_loss": v_loss.item(), "entropy": entropy.item(), "approx_kl": kl}

    def scheduled_lr(self) -> float:
        """The learning rate of a round that ends at ``env_steps``: ``lr``, or its linear decay (``lr_decay_steps``)."""
        cfg = self.config
        if cfg.lr_decay_steps is None:
            return float(cfg.lr)
        return linear_schedule(float(cfg.lr), 0.0, float(cfg.lr_decay_steps), float(self.env_steps - cfg.steps_per_round))

    def _update_report(self) -> dict[str, float]:
        """The mean and mean square of the value targets `train` normalised by (the server's ValueNorm follows)."""
        return dict(self._moments)

    def _after_update(self, reports: Sequence[tuple[dict[str, float], int]]) -> None:
        """On the server: the ValueNorm takes the step the workers' `train` took, on their pooled moments."""
        rows = [(r, c) for r, c in reports if "ret_mean" in r]
        if self.config.value_norm and rows:
            w = np.array([c for _, c in rows], dtype=float)
            w /= w.sum()
            self.value_norm.update_moments(float(np.dot(w, [r["ret_mean"] for r, _ in rows])),
                                           float(np.dot(w, [r["ret_mean_sq"] for r, _ in rows])))

    def _weights_loaded(self) -> None:
        self.actor.version += 1

    def modules(self) -> dict[str, Any]:
        return {"actor": self.actor.net, "critic": self.critic, "optimizer": self.optimizer,
                "value_norm": self.value_norm}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.actor.version += 1


class IPPO(MAPPO):
    """Independent PPO: MAPPO with each agent's critic reading only its own observation."""

    name = "ippo"
    defaults = {"central": "local"}


class RMAPPO(MAPPO):
    """rMAPPO, the MAPPO authors' name for MAPPO with a GRU in actor and critic: `MAPPO` with ``recurrent=True``."""

    name = "rmappo"
    defaults = {"recurrent": True}
