"""Where built game trees are kept: on the game object, and in a disk cache so a notebook's second
run loads its tree in milliseconds. `game_tree` (what `Game.tree()` calls) asks the game, then the
disk, and only then walks (`pbmarl.games.tree.build_tree`).

An entry is one uncompressed `.npz` (written atomically, read without pickles) named by a
hash of the game string, the OpenSpiel version and the tree format. Its ``meta`` array
holds those three again plus a CRC-32 of every array; an entry that does not match
the game asking, or fails its checksums or shapes, is ignored (and rebuilt), never
trusted. The folder is ``$PBMARL_TREE_CACHE`` (``0`` or ``off`` switches the cache off),
by default ``~/.cache/pbmarl/trees``. Only games with a `Game.tree_identity` (OpenSpiel's) are cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pbmarl.games.recall import extend_key, first_key
from pbmarl.games.tree import GameTree, NotExact, build_tree, check_exact, make_infosets
from pbmarl.io import read_npz, write_npz

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.games.base import Game

#: bump when the arrays or their meaning change
FORMAT = 3
#: trees that take longer than this to walk are written to the disk cache
CACHE_AFTER_SECONDS = 1.0
_SEP = "\x1e"


def cache_folder() -> Path | None:
    """The cache folder, or None when switched off (``PBMARL_TREE_CACHE=0``)."""
    value = os.environ.get("PBMARL_TREE_CACHE", "")
    if value.lower() in ("0", "off", "false", "no"):
        return None
    return Path(value) if value else Path.home() / ".cache" / "pbmarl" / "trees"


def _identity(game: Game) -> dict[str, str | int] | None:
    ident = game.tree_identity()
    return None if ident is None else {**ident, "format": FORMAT}


def cache_path(game: Game) -> Path | None:
    """Where the tree of `game` is (or would be) cached; None when not cacheable."""
    folder, ident = cache_folder(), _identity(game)
    if folder is None or ident is None:
        return None
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]
    return folder / f"{digest}.npz"


def _own_strings(tree: GameTree, player: int) -> list[str]:
    """Recall keys repeat their parents' keys: keep only each decision's own string (rebuilt on load)."""
    infos = tree.infosets[player]
    if not tree.recall_keys:
        return infos.keys
    out = []
    for I, key in enumerate(infos.keys):
        seq = int(infos.parent_seq[I])
        if seq == 0:
            out.append(key[len(first_key(player, "")):])
        else:
            parent, action = divmod(seq - 1, tree.num_actions)
            out.append(key[len(extend_key(infos.keys[parent], action, "")):])
    return out


def _rebuild_keys(strings: list[str], parent_seq: np.ndarray, levels: list[np.ndarray], player: int,
                  num_actions: int) -> list[str]:
    keys = list(strings)
    for level in levels:  # parents lie at shallower levels, so their keys are rebuilt first
        for I in level.tolist():
            seq = int(parent_seq[I])
            if seq == 0:
                keys[I] = first_key(player, strings[I])
            else:
                parent, action = divmod(seq - 1, num_actions)
                keys[I] = extend_key(keys[parent], action, strings[I])
    return keys


def _arrays(tree: GameTree) -> dict[str, np.ndarray]:
    out = {"chance_reach": tree.chance_reach, "returns": tree.returns, "terminal_seq": tree.terminal_seq}
    for p, infos in enumerate(tree.infosets):
        out[f"keys{p}"] = np.frombuffer(_SEP.join(_own_strings(tree, p)).encode("utf-8"), dtype=np.uint8)
        out[f"obs{p}"], out[f"legal{p}"] = infos.obs, infos.legal
        out[f"parent{p}"], out[f"depth{p}"] = infos.parent_seq, infos.depth
    return out


def _crc(a: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(a).data)


def save_cached_tree(game: Game, tree: GameTree) -> Path | None:
    """Write `tree` to the cache; returns the path, or None (not cacheable, or the folder is not writable)."""
    path, ident = cache_path(game), _identity(game)
    if path is None or ident is None:
        return None
    arrays = _arrays(tree)
    meta = {**ident, "num_players": tree.num_players, "num_actions": tree.num_actions, "num_nodes": tree.num_nodes,
            "recall_keys": tree.recall_keys, "crc": {k: _crc(v) for k, v in arrays.items()}}
    arrays["meta"] = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)
    try:
        write_npz(path, arrays)
    except OSError:
        return None
    return path


def load_cached_tree(game: Game) -> GameTree | None:
    """The cached tree of `game` if a valid entry exists; None otherwise (missing, stale or damaged)."""
    path, ident = cache_path(game), _identity(game)
    if path is None or ident is None or not path.is_file():
        return None
    try:
        arrays = read_npz(path)
        meta = json.loads(arrays.pop("meta").tobytes().decode())
        if any(meta.get(k) != v for k, v in ident.items()) or set(meta["crc"]) != set(arrays):
            return None
        if any(_crc(v) != meta["crc"][k] for k, v in arrays.items()):
            return None
        P, A = int(meta["num_players"]), int(meta["num_actions"])
        if P != game.num_players or A != game.num_actions:
            return None
        infosets = []
        for p in range(P):
            text = arrays[f"keys{p}"].tobytes().decode("utf-8")
            keys = text.split(_SEP) if text else []
            if meta["recall_keys"]:
                depth = arrays[f"depth{p}"]
                levels = [np.flatnonzero(depth == d) for d in range(int(depth.max()) + 1)] if len(depth) else []
                keys = _rebuild_keys(keys, arrays[f"parent{p}"], levels, p, A)
            infos = make_infosets(keys, arrays[f"obs{p}"], arrays[f"legal{p}"].astype(bool), arrays[f"parent{p}"],
                                  arrays[f"depth{p}"])
            S = len(keys)
            if (len(infos.index) != S or infos.legal.shape != (S, A) or len(infos.obs) != S
                    or infos.parent_seq.shape != (S,) or (S and infos.parent_seq.max() > S * A)):
                return None
            infosets.append(infos)
        Z = len(arrays["chance_reach"])
        seq = arrays["terminal_seq"]
        if arrays["returns"].shape != (Z, P) or seq.shape != (P, Z):
            return None
        if Z and any(seq[p].max() > infosets[p].size * A or seq[p].min() < 0 for p in range(P)):
            return None
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return GameTree(num_players=P, num_actions=A, infosets=tuple(infosets), chance_reach=arrays["chance_reach"],
                    returns=arrays["returns"], terminal_seq=seq, num_nodes=int(meta["num_nodes"]),
                    recall_keys=bool(meta["recall_keys"]))


def game_tree(game: Game, *, max_nodes: int | None = None, memory: float | None = None,
              progress: bool | None = None) -> GameTree:
    """The tree of `game`, kept on the game object; loaded from the disk cache when a valid entry
    exists, else walked (`build_tree`, with its `memory` budget and `progress` bar) and cached when the
    walk took more than `CACHE_AFTER_SECONDS`."""
    tree: GameTree | None = game.__dict__.get("_tree_cache")
    if tree is None:
        check_exact(game)
        tree = load_cached_tree(game)
        if tree is None:
            start = time.perf_counter()
            tree = build_tree(game, max_nodes=max_nodes, memory=memory, progress=progress)
            if time.perf_counter() - start > CACHE_AFTER_SECONDS:
                save_cached_tree(game, tree)
        if tree.recall_keys:
            where = game.__dict__.get("_recall_reason", "its strings (the cached tree says so)")
            warnings.warn(
                f"{game.name!r}: information-state strings lack perfect recall ({where} is reached after different "
                "own histories or names another player's state too); information sets are keyed by each player's "
                "action-observation history instead (game.recall_keys = True)",
                stacklevel=3,
            )
        game.recall_keys = tree.recall_keys
        game.__dict__["_tree_cache"] = tree
    if max_nodes is not None and tree.num_nodes > max_nodes:
        raise NotExact(f"game {game.name!r} is too large for the exact engine: {tree.num_nodes:,} histories, more "
                       f"than max_nodes={max_nodes:,}; use a sampling evaluator (pb.RolloutPool) instead")
    return tree
