"""Saving and resuming a `League` run folder.

Layout: ``population/`` (the snapshots, append-only), ``state-NNNN/`` (agents' current
policies, learners, win-rate counts, the snapshots' payoff table after round NNNN) and
``run.json`` (written last, atomically, naming its state folder), so a league killed at
any instant resumes from its last completed round.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pbmarl.algorithms import driver_io as io
from pbmarl.algorithms.league_records import LeagueRecord
from pbmarl.algorithms.league_rules import Member
from pbmarl.algorithms.win_rates import WinRateTable
from pbmarl.games.registry import game_from_spec, game_spec
from pbmarl.io import ensure_writable_folder, read_npz, write_npz
from pbmarl.payoffs import PayoffTable
from pbmarl.population import Population

if TYPE_CHECKING:  # pragma: no cover
    from pbmarl.algorithms.league import League


def save_league(league: League, folder: Path) -> Path:
    ensure_writable_folder(folder, what="run folder")
    league.population.save(folder / "population")
    state = f"state-{league.iteration:04d}"
    sdir = folder / state
    if sdir.exists():
        shutil.rmtree(sdir)
    sdir.mkdir(parents=True)
    agents = []  # a list: JSON objects may come back with their keys sorted
    for name, member in league.members.items():
        entry: dict[str, Any] = {"member": asdict(member)}
        if not member.historical:
            entry["policies"] = io.save_policies(sdir, name, league.policies[name])
            entry["learner"] = io.save_learner(league.learners[name], sdir / f"learner-{name}")
        agents.append(entry)
    meta, arrays = league.win_rates.state()
    write_npz(sdir / "win_rates.npz", arrays)
    league.table.save(sdir / "table.npz")
    io.write_run_json(folder, {
        "kind": "League", "game": game_spec(league.game), "config": io.config_json(league.config),
        "counts": league.counts, "seed": league.seed, "measure": league.measure, "state": state,
        "members": agents, "win_rates": meta, "sizes": list(league.population.sizes),
        "rng": io.rng_state(league.rng), "wall_time": league._wall, "env_steps": league._env_steps,
        "resets": league._resets, "records": [r.to_json() for r in league.records],
    })
    io.remove_stale(folder, ("state-*",), keep=(state,))
    return folder


def load_league(cls: type[League], folder: Path, *, learner: Any, evaluator: Any, save_dir: Any) -> League:
    from pbmarl.algorithms.league_rules import LeagueConfig, Matchmaker

    data = io.read_run_json(folder, "League")
    game = game_from_spec(data["game"])
    league = cls.__new__(cls)
    counts = data["counts"]
    # a fresh league of the same shape supplies learners, evaluator and defaults; then its state is replaced
    fresh = cls(game, learner, evaluator, main_agents=counts["main"], main_exploiters=counts["main_exploiter"],
                league_exploiters=counts["league_exploiter"], config=LeagueConfig(**_config(data["config"])),
                seed=data["seed"], measure=data["measure"], save_dir=None)
    league.__dict__.update(fresh.__dict__)
    sdir = folder / data["state"]
    league.win_rates = WinRateTable.from_state(data["win_rates"], read_npz(sdir / "win_rates.npz"))
    league.members = {}
    for entry in data["members"]:
        member = Member(**entry["member"])
        name = member.name
        league.members[name] = member
        if not member.historical:
            league.policies[name] = io.load_policies(game, sdir, entry["policies"])
            io.load_learner(league.learners[name], sdir, entry["learner"])
    league.matchmaker = Matchmaker(league.config, league.win_rates, league.members)
    league.population = Population.load(folder / "population", game, sizes=data["sizes"])
    league.table = PayoffTable.load(sdir / "table.npz", league.population)
    league.policies.update({m.name: [league.population[p][i] for p in range(2)]
                            for i, m in enumerate(league.population.members(0))})
    league.records = [LeagueRecord.from_json(r) for r in data["records"]]
    league.rng = io.rng_from_state(data["rng"])
    league._wall, league._env_steps, league._resets = data["wall_time"], data["env_steps"], data["resets"]
    league.save_dir = Path(save_dir) if save_dir is not None else folder
    return league


def _config(data: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
