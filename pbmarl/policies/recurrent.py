"""Recurrent Q-policies: a GRU agent network that keeps a hidden state per environment instance.

``RecurrentQNet`` is QMIX's agent network for partial observability (Rashid et al.
2018, Sec. 6 / App. C: a fully connected layer, a GRU cell of 64 units, a fully
connected head), ``h_t = GRU(relu(W o_t), h_{t-1})``, ``Q(., o_{<=t}) = W' h_t``.

``RecurrentQPolicy`` acts epsilon-greedily on it while the rollout layer steps
episodes: the parallel engine calls `reset_state(ids)` when an instance starts an
episode (and ``reset_state(None)`` at the start of each call), and
`step_probabilities(obs, mask, ids)` once per step, so each (instance, agent) carries
its own hidden state through the episode. ``action_probabilities`` without ids reads
each row as the first step of an episode (zero hidden state): exact for one-step games.

Example:
    >>> import numpy as np, pbmarl as pb
    >>> game = pb.MatrixGame([[1, 0], [0, 1]])
    >>> pi = RecurrentQPolicy(game, rnn_hidden=8, seed=0)
    >>> pi.reset_state(None)
    >>> pi.step_probabilities(np.zeros((2, 2), np.float32), np.ones((2, 2), bool), np.array([0, 1])).shape
    (2, 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from pbmarl.config import MAX_WIDTH, check_int, check_widths
from pbmarl.games.base import Game
from pbmarl.policies.neural import network_from_state, seeded_torch
from pbmarl.policies.stateful import StatefulPolicy


class RecurrentQNet(nn.Module):
    """``fc -> relu -> GRUCell -> fc``: Q-values of every action from an observation and a hidden state."""

    def __init__(self, in_dim: int, num_actions: int, rnn_hidden: int = 64) -> None:
        super().__init__()
        self.in_dim, self.num_actions, self.rnn_hidden = int(in_dim), int(num_actions), int(rnn_hidden)
        self.fc_in = nn.Linear(self.in_dim, self.rnn_hidden)
        self.gru = nn.GRUCell(self.rnn_hidden, self.rnn_hidden)
        self.fc_out = nn.Linear(self.rnn_hidden, self.num_actions)

    def initial(self, batch: int) -> torch.Tensor:
        return torch.zeros(batch, self.rnn_hidden)

    def forward(self, obs: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(q [B, A], h' [B, H])`` from ``obs [B, d]`` and ``hidden [B, H]``."""
        h = self.gru(torch.relu(self.fc_in(obs)), hidden)
        return self.fc_out(h), h

    def unroll(self, obs: torch.Tensor) -> torch.Tensor:
        """``q [T, B, A]`` over sequences ``obs [T, B, d]`` that all start an episode at t = 0."""
        h = self.initial(obs.shape[1])
        out = []
        for t in range(obs.shape[0]):
            q, h = self(obs[t], h)
            out.append(q)
        return torch.stack(out)


class RecurrentQPolicy(StatefulPolicy):
    """Epsilon-greedy on a `RecurrentQNet`, one hidden state per environment instance; see the module doc."""

    kind = "recurrent_q"

    def __init__(self, game: Game, rnn_hidden: int = 64, *, seed: int | None = 0, epsilon: float = 0.0) -> None:
        super().__init__(game)
        if game.num_actions < 1:
            raise ValueError(f"RecurrentQPolicy needs Discrete actions; {game.name!r} acts in {game.action_space(0)}")
        self.rnn_hidden = check_int("rnn_hidden", rnn_hidden, low=1, high=MAX_WIDTH)
        self.in_dim = int(np.prod(game.observation_shape))
        with seeded_torch(seed):
            self.net = RecurrentQNet(self.in_dim, game.num_actions, self.rnn_hidden)
        self.epsilon = float(epsilon)
        self._hidden: dict[int, torch.Tensor] = {}

    # -- the state the rollout layer drives ------------------------------------------------------
    def reset_state(self, ids: Sequence[int] | np.ndarray | None) -> None:
        """Forget the hidden states of instances `ids` (None: of every instance)."""
        if ids is None:
            self._hidden = {}
            return
        for i in np.asarray(ids, dtype=np.int64).tolist():
            self._hidden.pop(int(i), None)

    def step_probabilities(self, obs: np.ndarray, legal_mask: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Probabilities ``[B, A]`` of one step of instances `ids` (distinct), advancing their hidden states."""
        ids_list = np.asarray(ids, dtype=np.int64).tolist()
        zero = torch.zeros(self.rnn_hidden)
        h = torch.stack([self._hidden.get(i, zero) for i in ids_list]) if ids_list else self.net.initial(0)
        with torch.no_grad():
            q, h_new = self.net(torch.as_tensor(np.asarray(obs, np.float32)).reshape(len(ids_list), -1), h)
        for k, i in enumerate(ids_list):
            self._hidden[i] = h_new[k]
        return self._greedy(q, np.asarray(legal_mask, bool))

    def _greedy(self, q: torch.Tensor, legal_mask: np.ndarray) -> np.ndarray:
        qm = q.numpy().astype(float)
        qm[~legal_mask] = -np.inf
        best = qm.argmax(axis=1)
        legal = legal_mask.astype(float)
        probs = self.epsilon * legal / np.maximum(legal.sum(axis=1, keepdims=True), 1)
        probs[np.arange(len(best)), best] += 1.0 - self.epsilon
        return probs

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        x = torch.as_tensor(np.asarray(obs, np.float32)).reshape(len(obs), -1)
        with torch.no_grad():
            q, _ = self.net(x, self.net.initial(len(x)))
        return self._greedy(q, legal_mask)

    # -- files ---------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        return {k: v.detach().numpy().copy() for k, v in self.net.state_dict().items()}

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), "rnn_hidden": self.rnn_hidden, "epsilon": self.epsilon}

    @classmethod
    def from_state(cls, game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> RecurrentQPolicy:
        policy = cls(game, rnn_hidden=int(meta["rnn_hidden"]), seed=None, epsilon=float(meta.get("epsilon", 0.0)))
        policy.net.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in arrays.items()})
        policy.version = int(meta.get("version", 0))
        return policy

    def __repr__(self) -> str:
        return f"RecurrentQPolicy({self.game_name!r}, rnn_hidden={self.rnn_hidden}, epsilon={self.epsilon:g})"


class RecurrentNet(nn.Module):
    """``MLP -> GRU -> LayerNorm -> Linear``: rMAPPO's actor and critic (Yu et al. 2022, on-policy's ``R_Actor`` /
    ``R_Critic``: the MLP base, one GRU layer, a LayerNorm on its output, the head).

    The GRU is as wide as the MLP's last hidden layer. The hidden state it carries is the GRU's raw output; the
    head reads it through the LayerNorm (where ``layer_norm``), as the authors' ``RNNLayer`` does.
    """

    def __init__(self, in_dim: int, hidden: Sequence[int], out_dim: int, *, activation: str = "relu",
                 layer_norm: bool = True) -> None:
        super().__init__()
        from pbmarl.policies.neural import ACTIVATIONS, build_mlp

        if len(hidden) < 1:
            raise ValueError(f"RecurrentNet needs at least one hidden layer before its GRU, got hidden={tuple(hidden)!r}")
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.rnn_hidden = int(hidden[-1])
        mlp = build_mlp(self.in_dim, tuple(hidden), 1, activation=ACTIVATIONS[activation][0], layer_norm=layer_norm)
        self.base = nn.Sequential(*list(mlp)[:-1])  # the MLP without its head
        self.gru = nn.GRU(self.rnn_hidden, self.rnn_hidden, batch_first=True)
        self.norm: nn.Module = nn.LayerNorm(self.rnn_hidden) if layer_norm else nn.Identity()
        self.head = nn.Linear(self.rnn_hidden, self.out_dim)

    def initial(self, batch: int) -> torch.Tensor:
        return torch.zeros(batch, self.rnn_hidden)

    def orthogonal_(self, head_gain: float, activation: str) -> RecurrentNet:
        """The MAPPO code's init: orthogonal weights (the activation's gain in the MLP, `head_gain` on the head,
        1 in the GRU) and zero biases."""
        from pbmarl.policies.neural import orthogonal_init_

        orthogonal_init_(nn.Sequential(*self.base, self.head), head_gain, activation)
        for name, p in self.gru.named_parameters():
            if name.startswith("weight"):
                nn.init.orthogonal_(p)
            else:
                nn.init.zeros_(p)
        return self

    def forward(self, x: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(out [B, T, out], states [B, T, H])`` over sequences ``x [B, T, d]`` from ``hidden [B, H]``;
        ``states[:, t]`` is the hidden state after step t."""
        B, T = x.shape[:2]
        z = self.base(x.reshape(B * T, -1)).view(B, T, -1)
        states, _ = self.gru(z, hidden[None].contiguous())
        return self.head(self.norm(states)), states

    def step(self, x: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(out [B, out], h' [B, H])``: one step of each row from its own hidden state."""
        out, states = self(x[:, None], hidden)
        return out[:, 0], states[:, 0]


class RecurrentPolicy(StatefulPolicy):
    """Softmax over a `RecurrentNet`'s logits (rMAPPO's actor), one hidden state per environment instance.

    Like `RecurrentQPolicy`, the rollout layer drives it through `reset_state` and `step_probabilities`;
    ``action_probabilities`` without ids reads each row as an episode's first step.
    """

    kind = "recurrent"

    def __init__(self, game: Game, hidden: Sequence[int] = (64, 64), *, seed: int | None = 0, layer_norm: bool = True,
                 activation: str = "relu") -> None:
        super().__init__(game)
        from pbmarl.policies.neural import activation_named

        activation_named(activation, "RecurrentPolicy")
        if game.num_actions < 1:
            raise ValueError(f"RecurrentPolicy needs Discrete actions; {game.name!r} acts in {game.action_space(0)}")
        self.hidden = check_widths("hidden", hidden)
        self.layer_norm, self.activation = bool(layer_norm), activation
        self.in_dim = int(np.prod(game.observation_shape))
        with seeded_torch(seed):
            self.net = RecurrentNet(self.in_dim, self.hidden, game.num_actions, activation=activation,
                                    layer_norm=self.layer_norm)
        self._h = np.zeros((0, self.net.rnn_hidden), np.float32)  # row i: instance i's hidden state

    def reset_state(self, ids: Sequence[int] | np.ndarray | None) -> None:
        """Zero the hidden states of instances `ids` (None: of every instance)."""
        if ids is None:
            self._h = np.zeros((0, self.net.rnn_hidden), np.float32)
            return
        ids_arr = np.asarray(ids, dtype=np.int64)
        self._h[ids_arr[ids_arr < len(self._h)]] = 0.0

    def step_probabilities(self, obs: np.ndarray, legal_mask: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Probabilities ``[B, A]`` of one step of instances `ids` (distinct), advancing their hidden states."""
        from pbmarl.policies.neural import masked_logits

        ids_arr = np.asarray(ids, dtype=np.int64)
        if len(ids_arr) and ids_arr.max() >= len(self._h):
            grown = np.zeros((int(ids_arr.max()) + 1, self.net.rnn_hidden), np.float32)
            grown[: len(self._h)] = self._h
            self._h = grown
        with torch.no_grad():
            x = torch.as_tensor(np.asarray(obs, np.float32)).reshape(len(ids_arr), -1)
            logits, h = self.net.step(x, torch.from_numpy(self._h[ids_arr]))
            self._h[ids_arr] = h.numpy()
            return torch.softmax(masked_logits(logits, torch.as_tensor(np.asarray(legal_mask, bool))), -1).double().numpy()

    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        from pbmarl.policies.neural import masked_logits

        with torch.no_grad():
            x = torch.as_tensor(np.asarray(obs, np.float32)).reshape(len(obs), -1)
            logits, _ = self.net.step(x, self.net.initial(len(x)))
            return torch.softmax(masked_logits(logits, torch.as_tensor(np.asarray(legal_mask, bool))), -1).double().numpy()

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: v.detach().numpy().copy() for k, v in self.net.state_dict().items()}

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), "hidden": list(self.hidden), "layer_norm": self.layer_norm,
                "activation": self.activation}

    @classmethod
    def from_state(cls, game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> RecurrentPolicy:
        return network_from_state(cls, game, arrays, meta, layer_norm=True)

    def __repr__(self) -> str:
        return f"RecurrentPolicy({self.game_name!r}, hidden={self.hidden})"
