"""`Population`: per player, an ordered list of named policies with metadata."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from pbmarl.games.base import Game
from pbmarl.games.registry import as_game, game_from_spec, game_spec
from pbmarl.io import _json_default, inside, read_json, read_npz, write_json, write_npz
from pbmarl.policies.base import Policy, check_policy, new_policy_from_state
from pbmarl.policies.mixture import Mixture, check_distribution


@dataclass(frozen=True)
class Member:
    """One population member: its id (``"p0/3"``), name, policy and free-form metadata."""

    id: str
    player: int
    index: int
    name: str
    policy: Policy
    meta: dict[str, Any] = field(default_factory=dict)


def member_id(player: int, index: int) -> str:
    return f"p{player}/{index}"


class Population:
    """Per player, an ordered list of policies.

    Example:
        >>> pop = Population(game)
        >>> pop.add(0, pb.RandomPolicy(game), name="random", iteration=0)
        'p0/0'
        >>> pop[0], pop.sizes, pop.mixture(sigma)  # doctest: +SKIP
    """

    def __init__(self, game: Game | str) -> None:
        game = as_game(game)
        self.game = game
        self.num_players = game.num_players
        self._members: list[list[Member]] = [[] for _ in range(game.num_players)]
        self._by_id: dict[str, Member] = {}
        self._saved_versions: dict[str, int] = {}

    # -- growing -----------------------------------------------------------
    def add(self, player: int, policy: Policy, name: str | None = None, **meta: Any) -> str:
        """Append `policy` to `player`'s list; returns its id, e.g. ``"p0/3"``.

        Keyword arguments are stored as the member's metadata (iteration, origin, stats).
        The policy is checked against the game first; a bad policy changes nothing.
        """
        player = self.game.check_player(player)
        check_policy(policy, self.game)
        index = len(self._members[player])
        pid = member_id(player, index)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a string, got {name!r}")
        for key, value in meta.items():  # metadata is saved as JSON: refuse what could not be, now
            try:
                json.dumps(value, default=_json_default)
            except (TypeError, ValueError):
                raise TypeError(f"metadata {key}={value!r} cannot be saved: use numbers, strings, lists or dicts "
                                "of them") from None
        member = Member(pid, player, index, name or f"{type(policy).__name__}#{index}", policy, dict(meta))
        self._members[player].append(member)
        self._by_id[pid] = member
        return pid

    def snapshot(self) -> tuple[tuple[int, ...], dict[str, int]]:
        """The sizes (and save bookkeeping) that `restore` returns to; members are append-only."""
        return self.sizes, dict(self._saved_versions)

    def restore(self, state: object) -> None:
        """Drop the members added since `snapshot()` returned `state`."""
        sizes, saved = cast("tuple[tuple[int, ...], dict[str, int]]", state)
        for p, n in enumerate(sizes):
            for m in self._members[p][n:]:
                del self._by_id[m.id]
            del self._members[p][n:]
        self._saved_versions = dict(saved)

    # -- reading -------------------------------------------------------------
    def __getitem__(self, player: int) -> list[Policy]:
        player = self.game.check_player(player)
        return [m.policy for m in self._members[player]]

    def __iter__(self) -> Iterator[list[Policy]]:
        return (self[p] for p in range(self.num_players))

    def __len__(self) -> int:
        return self.num_players

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(len(ms) for ms in self._members)

    def ids(self, player: int) -> list[str]:
        player = self.game.check_player(player)
        return [m.id for m in self._members[player]]

    @property
    def all_ids(self) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(m.id for m in ms) for ms in self._members)

    def member(self, pid: str) -> Member:
        try:
            return self._by_id[pid]
        except KeyError:
            raise KeyError(f"no member {pid!r}; ids are {[i for ids in self.all_ids for i in ids]}") from None

    def members(self, player: int) -> list[Member]:
        return list(self._members[self.game.check_player(player)])

    def mixture(self, sigma: Any) -> list[Mixture]:
        """One `Mixture` per player from a meta-strategy (a MetaStrategy or one distribution per player)."""
        return [Mixture(self[p], w) for p, w in enumerate(as_distributions(sigma, self.sizes))]

    def to_frame(self) -> pd.DataFrame:
        """One row per member: id, player, index, name, policy kind and metadata columns."""
        rows = [
            {"id": m.id, "player": m.player, "index": m.index, "name": m.name, "policy": type(m.policy).__name__, **m.meta}
            for ms in self._members
            for m in ms
        ]
        return pd.DataFrame(rows).set_index("id") if rows else pd.DataFrame(columns=["player", "index", "name", "policy"])

    def _repr_html_(self) -> str:
        return str(self.to_frame()._repr_html_())

    def __repr__(self) -> str:
        return f"Population({self.game.name!r}, sizes={self.sizes})"

    # -- files -----------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the population to folder `path` (one `.npz` per member, then `population.json`).

        Member files are written only when new or changed, and the JSON index last, so
        an interrupted save leaves the previous index valid.
        """
        folder = Path(path)
        (folder / "policies").mkdir(parents=True, exist_ok=True)
        index = []
        for ms in self._members:
            for m in ms:
                filename = f"policies/{m.id.replace('/', '_')}.npz"
                key = f"{folder.resolve()}::{m.id}"
                if self._saved_versions.get(key) != m.policy.version or not (folder / filename).exists():
                    write_npz(folder / filename, m.policy.arrays())
                    self._saved_versions[key] = m.policy.version
                index.append({"id": m.id, "player": m.player, "name": m.name, "meta": m.meta,
                              "policy": m.policy.meta(), "file": filename})
        write_json(folder / "population.json", {"game": game_spec(self.game), "members": index})
        return folder

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], game: Game | None = None, *, sizes: Sequence[int] | None = None
    ) -> Population:
        """Read a population written by `save`; policies are rebuilt without executing code.

        `sizes` keeps only the first ``sizes[p]`` members of each player (a run resuming
        from its last completed iteration ignores members saved after it).
        """
        folder = Path(path)
        if not (folder / "population.json").exists():
            raise FileNotFoundError(f"no population.json in {str(folder)!r}")
        data = read_json(folder / "population.json")
        where = f"population.json in {str(folder)!r}"
        if not isinstance(data, dict) or not isinstance(data.get("game"), dict) or "name" not in data["game"] \
                or not isinstance(data.get("members"), list):
            raise ValueError(f"{where} must hold 'game' (with a 'name') and a list of 'members'")
        if game is None:
            game = game_from_spec(data["game"])
        elif game_spec(game)["name"] != data["game"]["name"]:
            raise ValueError(f"population in {str(folder)!r} is for game {data['game']['name']!r}, not {game.name!r}")
        pop = cls(game)
        for i, entry in enumerate(data["members"]):
            try:
                player, index = int(entry["player"]), int(entry["id"].split("/")[1])
                if not 0 <= player < game.num_players:
                    raise ValueError(f"player {player} out of range")
                file, name, meta, policy_meta = entry["file"], entry["name"], dict(entry["meta"]), entry["policy"]
                if not isinstance(policy_meta, dict):
                    raise TypeError("'policy' must be an object")
            except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
                raise ValueError(f"{where}: members[{i}] is malformed ({type(exc).__name__}: {exc})") from None
            if sizes is not None and index >= sizes[player]:
                continue
            path = inside(folder, file, entry=f"{where} members[{i}] 'file'")
            policy = new_policy_from_state(game, read_npz(path), policy_meta)
            pid = pop.add(player, policy, name=name, **meta)
            if pid != entry["id"]:
                raise ValueError(f"population file {str(folder)!r} is out of order: expected {entry['id']!r}, got {pid!r}")
            pop._saved_versions[f"{folder.resolve()}::{pid}"] = policy.version
        if sizes is not None and tuple(pop.sizes) != tuple(sizes):
            raise ValueError(f"population in {str(folder)!r} has sizes {pop.sizes}, fewer than the {tuple(sizes)} asked for")
        return pop


def as_distributions(sigma: Any, sizes: Sequence[int]) -> list[np.ndarray]:
    """Validate one distribution per player against population `sizes`."""
    if len(sigma) != len(sizes):
        raise ValueError(f"expected {len(sizes)} distributions (one per player), got {len(sigma)}")
    return [check_distribution(sigma[p], n, what=f"player {p}'s distribution") for p, n in enumerate(sizes)]
