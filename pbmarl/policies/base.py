"""The batched `Policy` protocol and the helpers every implementation shares."""

from __future__ import annotations

import abc
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pbmarl.games.base import Game
from pbmarl.games.state import as_rng

#: kind name -> Policy subclass, filled by `Policy.__init_subclass__`; used to load policies back.
POLICY_KINDS: dict[str, type[Policy]] = {}


@dataclass(frozen=True)
class ActionOutput:
    """What `Policy.act` returns for a batch of B rows.

    Attributes:
        action: ``[B]`` int64 for `Discrete` spaces, ``[B, d]`` float32 for `Box` spaces
            (already within the Box bounds).
        log_prob: ``[B]`` float64, the log-density (Box) or log-probability (Discrete)
            of each action under the policy that drew it.
    """

    action: np.ndarray
    log_prob: np.ndarray

    def __len__(self) -> int:
        return len(self.action)


class Policy(abc.ABC):
    """Maps a batch of observations and legal masks to action probabilities.

    ``action_probabilities(obs [B, ...], legal_mask [B, A], keys=None) -> [B, A]``;
    rows sum to one and put no mass on illegal actions. ``keys`` are the
    information-state strings of the rows (tabular policies need them, others ignore
    them). A policy serialises to ``(arrays, meta)``: a dict of ndarrays and a
    JSON-able dict, loaded back by `policy_from_state` without executing code.

    `version` counts parameter changes, so workers can cache a policy by (id, version).
    """

    kind: ClassVar[str] = "policy"
    #: whether `action_probabilities` needs the info-state keys
    needs_keys: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            POLICY_KINDS[cls.kind] = cls

    def __init__(self, game: Game) -> None:
        self.game_name = game.name
        self.num_actions = game.num_actions
        self.observation_shape = tuple(game.observation_shape)
        self.version = 0

    @property
    def discrete(self) -> bool:
        """False for policies on Box spaces: they `act` but have no `action_probabilities`."""
        return True

    @abc.abstractmethod
    def _probs(self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None) -> np.ndarray:
        """Unchecked probabilities; `action_probabilities` masks and validates them."""

    def action_probabilities(
        self, obs: np.ndarray, legal_mask: np.ndarray, keys: Sequence[str] | None = None
    ) -> np.ndarray:
        """Action probabilities ``[B, A]`` for a batch; illegal actions get exactly zero."""
        legal_mask = np.asarray(legal_mask, dtype=bool)
        if legal_mask.ndim != 2 or legal_mask.shape[1] != self.num_actions:
            raise ValueError(
                f"legal_mask must have shape [batch, {self.num_actions}] for {self.game_name!r}, "
                f"got {legal_mask.shape}"
            )
        probs = np.asarray(self._probs(obs, legal_mask, keys), dtype=float)
        if probs.shape != legal_mask.shape:
            raise ValueError(
                f"{type(self).__name__} returned probabilities of shape {probs.shape}; "
                f"expected {legal_mask.shape} (batch, num_actions) for {self.game_name!r}"
            )
        if not np.all(np.isfinite(probs)):
            bad = int((~np.isfinite(probs)).any(axis=1).sum())
            raise ValueError(f"{self!r} returned non-finite probabilities in {bad} of {len(probs)} rows")
        return masked_normalize(probs, legal_mask)

    def act(
        self,
        obs: np.ndarray,
        legal_mask: np.ndarray | None,
        rng: int | np.random.Generator | None = None,
        keys: Sequence[str] | None = None,
        *,
        deterministic: bool = False,
    ) -> ActionOutput:
        """One action per row: sampled with `rng`, or the most likely legal one if `deterministic`.

        A `legal_mask` of None means every action is legal.

        Returns an `ActionOutput`: ``.action`` ``[B]`` int64 and ``.log_prob`` ``[B]``, the
        log-probability of that action under `action_probabilities`. Policies on `Box`
        spaces override this and return ``[B, d]`` float actions.
        """
        if legal_mask is None:  # every action legal, as in Gymnasium games
            legal_mask = np.ones((len(obs), self.num_actions), dtype=bool)
        probs = self.action_probabilities(obs, legal_mask, keys)
        if deterministic:
            actions = np.argmax(probs, axis=1).astype(np.int64)
        else:
            actions = sample_actions(probs, as_rng(rng))
        chosen = probs[np.arange(len(actions)), actions]
        with np.errstate(divide="ignore"):
            return ActionOutput(actions, np.log(chosen))

    # -- serialisation ---------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        """The policy's parameters as named ndarrays."""
        return {}

    def meta(self) -> dict[str, Any]:
        """JSON-able description: kind, game, and whatever the constructor needs."""
        return {"kind": self.kind, "game": self.game_name, "version": self.version}

    @classmethod
    def from_state(cls, game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Policy:
        """Rebuild from `arrays()` and `meta()`; the default suits policies without parameters."""
        policy = cls(game)
        policy.version = int(meta.get("version", 0))
        return policy

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.game_name!r})"


def masked_normalize(probs: np.ndarray, legal_mask: np.ndarray) -> np.ndarray:
    """Zero illegal actions and renormalise; rows with no legal mass become uniform over legal."""
    probs = np.where(legal_mask, np.clip(probs, 0.0, None), 0.0)
    total = probs.sum(axis=1, keepdims=True)
    uniform = legal_mask / np.maximum(legal_mask.sum(axis=1, keepdims=True), 1)
    safe = np.where(total > 0, total, 1.0)
    return np.where(total > 0, probs / safe, uniform)


def sample_actions(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One categorical draw per row (inverse CDF, vectorised)."""
    cdf = np.cumsum(probs, axis=1)
    u = rng.random(len(probs))[:, None] * cdf[:, -1:]
    return np.minimum((u >= cdf).sum(axis=1), probs.shape[1] - 1).astype(np.int64)


def check_policy(policy: Any, game: Game) -> Policy:
    """Check that `policy` is a Policy for `game` and answers with the right shape.

    Raises TypeError/ValueError naming what is wrong; returns the policy.
    """
    if not isinstance(policy, Policy):
        raise TypeError(f"expected a pbmarl Policy, got {type(policy).__name__}: {policy!r}")
    if policy.game_name != game.name:
        raise ValueError(f"{policy!r} was made for game {policy.game_name!r}, not {game.name!r}")
    if policy.num_actions != game.num_actions:
        raise ValueError(
            f"{policy!r} has {policy.num_actions} actions but {game.name!r} has {game.num_actions}"
        )
    if not policy.discrete:
        out = policy.act(np.zeros((1,) + tuple(policy.observation_shape), np.float32), None, rng=0, deterministic=True)
        if not (np.all(np.isfinite(out.action)) and np.all(np.isfinite(out.log_prob))):
            raise ValueError(f"{policy!r} returned a non-finite action or log-probability: {out}")
        return policy
    state = game.new_initial_state()
    rng = np.random.default_rng(0)
    while state.is_chance_node():
        outcomes = state.chance_outcomes()
        state.apply_action(outcomes[int(rng.integers(len(outcomes)))][0])
    if not state.is_terminal():
        player = 0 if state.is_simultaneous_node() else state.current_player()
        obs = game.observation(state, player)[None]
        mask = game.legal_mask(state, player)[None]
        probs = policy.action_probabilities(obs, mask, [game.info_key(state, player)])
        if not np.allclose(probs.sum(axis=1), 1.0):
            raise ValueError(f"{policy!r} returned probabilities that do not sum to one: {probs}")
    return policy


def new_policy_from_state(game: Game, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Policy:
    """Load any policy saved with `arrays()`/`meta()`, dispatching on ``meta['kind']``."""
    kind = meta.get("kind")
    cls = POLICY_KINDS.get(str(kind))
    if cls is None:
        # torch-backed kinds register themselves when their module is imported
        module = {
            "mlp": "pbmarl.policies.neural",
            "epsilon_greedy_q": "pbmarl.learners.common.nets",
            "recurrent_q": "pbmarl.policies.recurrent",
            "recurrent": "pbmarl.policies.recurrent",
            "gaussian": "pbmarl.policies.continuous",
            "deterministic": "pbmarl.policies.continuous",
        }.get(str(kind))
        if module is not None:
            importlib.import_module(module)
            cls = POLICY_KINDS.get(str(kind))
        if cls is None:
            raise ValueError(f"unknown policy kind {kind!r}; known kinds: {sorted(POLICY_KINDS)}")
    if meta.get("game") not in (None, game.name):
        raise ValueError(f"policy was saved for game {meta.get('game')!r}, not {game.name!r}")
    return cls.from_state(game, arrays, meta)
