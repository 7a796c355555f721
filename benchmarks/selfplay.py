"""The IIG benchmark's comparison (Rudolph et al., ICLR 2026) on liar's dice, Kuhn and Leduc poker, run in slices.

Each (method, seed) trains for ``--steps`` env steps (liar's dice: the paper's 10M) and records the last iterate's
exact exploitability every ``--eval-every`` env steps (the paper: 250k); ``--game kuhn_poker`` and
``--game leduc_poker`` default to 1M and 50k, and the largest game the exact engine holds here, ``--game
"liars_dice(numdice=2,dice_sides=4)"`` (`LARGE`), to 1M and 100k (`BUDGETS`). The paper plays none of these, so
no setting was tuned on them: every method takes its tuned liar's dice setting unchanged (below), one protocol,
with PSRO's best-response budget converted from episodes to the game's own decisions (`psro_budget`). Every
measurement is appended
to ``--results`` (default ``benchmarks/results/selfplay.csv``) with the date, commit, machine and command, so
slices run on different days add up to the full table. Tabular MMD and CFR+ are exact reference lines (their x
axis is iterations, written in the ``env_steps`` column as 0).

    python benchmarks/selfplay.py --only ppo --seeds 0 --steps 20000 --eval-every 10000   # one short slice
    python benchmarks/selfplay.py --only ppo --only deep_mmd --seeds 0-4                  # 10M steps x 5 seeds
    python benchmarks/selfplay.py --game leduc_poker                                      # 1M steps, every method

**Slices.** A 10M-step run takes longer than a work session here (2 cores: PPO about 25 min a seed, NFSP 1.5-6 h,
PSRO about 2 h), and a session's end kills what it runs. So every neural run (``ppo``, ``deep_mmd``, ``nfsp``,
``psro``) saves itself after each measurement into ``--state`` (default ``benchmarks/state/selfplay/``, not in
git), one folder per (game, method, seed, steps): ``run/`` is the run folder (`run.save`, one atomic commit) and
``slice.json`` says where it stands, its next measurement (``next_eval``) and the date, commit and command it
started under. The same command run again loads each save with `pb.load_run` and continues exactly where it
stopped: the rows, measurement points and random streams are those of one run straight through (the records'
``wall_time`` is the run's own, so it continues across slices), a row already in the CSV is not written again,
and a finished run is skipped with a line saying so. ``--stop-at HH:MM`` (UTC) or ``--hours H`` ends the slice
cleanly after the first save past that time, printing where each run stands. Each session, start a slice in the
background that ends before the session does, and run the same line again next session until every run says
it is finished::

    nohup python benchmarks/selfplay.py --only psro --seeds 0-4 --stop-at 15:00 > /tmp/psro.log 2>&1 &

A slice killed anyway loses only the work since its run's last save (at most one ``--eval-every``). A save
belongs to its ``--eval-every`` (another value is refused); a run with other ``--steps`` is another run.
The tabular methods take seconds and are not saved.

Methods: ``ppo`` (`pb.PPOSelfPlay`, preset ``iig_liars_dice``), ``deep_mmd`` (`pb.DeepMMD`, preset
``iig_liars_dice``: the reference's ``mmd/liars_dice`` yaml, its kl_coef 0.025 as ``stepsize=1/0.025``),
``mmd`` (tabular, alpha 0.002, magnet moved every 10 iterations), ``cfr+`` (`CFRPlus` average), ``nfsp`` (`pb.NFSP`, its average policies measured) and ``psro`` (`pb.PSRO` with
a DQN oracle and the Nash meta-solver, its meta-strategy mixture measured). Every neural method counts env steps
as decisions of all seats, stops at the first measurement at or past ``--steps`` and reports the wall time of
its training alone (the exact measurements are not in it).

``nfsp``: the IIG benchmark's ``best_hyperparameters/min_final_expl_hparams/nfsp/liars_dice/best_hparams.yaml``
(nathanlct/IIG-RL-Benchmark at 591d35d; their ``algorithms/nfsp``, OpenSpiel's PyTorch NFSP) mapped to
`NFSPConfig` (`NFSP_LIARS_DICE`):

- ``hidden_layers_sizes [512, 512, 512]`` -> ``hidden=(512, 512, 512)`` (both networks, as theirs);
- ``optimizer_str adam`` -> ``optimizer="adam"`` (both networks);
- ``inner_rl_agent.learning_rate 0.00125`` -> ``rl_lr``; their top-level ``rl_learning_rate 0.01`` never reaches
  the DQN (their run_nfsp.py passes the inner agent's options), so it is not used; ``sl_learning_rate 0.00125``
  -> ``sl_lr``;
- ``anticipatory_param 0.316`` -> ``anticipatory``;
- ``epsilon_start 0.03``, ``epsilon_end 0.001``, ``epsilon_decay_duration 40M`` (linear over the DQN's own
  steps, which it takes only in best-response episodes: about 1.6M per player in 10M env steps, so epsilon
  ends near 0.029) -> ``epsilon_start=0.03``, ``epsilon_decay_episodes=10**8``: pbmarl's schedule is
  ``epsilon_start / sqrt(1 + episodes / decay)`` (no linear schedule, no end value), about 0.0296 after the
  3M episodes of 10M steps;
- ``replay_buffer_capacity 500k`` -> ``replay_capacity``; ``reservoir_buffer_capacity 500k`` ->
  ``reservoir_capacity``;
- ``inner_rl_agent.batch_size 32`` -> ``batch_size=32``; their average-policy ``batch_size 16`` has no option
  (pbmarl draws one minibatch size for both networks);
- update cadence: theirs learns the average policy every 128 NFSP steps (``learn_every``) and the DQN every 10
  of its own steps in best-response episodes plus once every 128 steps in average-policy episodes, about once
  per 27 decisions of a player; pbmarl updates both networks together every ``learn_every`` decisions of a
  player, so ``learn_every=27, updates_per_learn=1`` keeps their DQN's rate (the average policy then gets
  about 4.7x more updates than theirs);
- ``update_target_network_every 4000`` (DQN steps) -> ``target_update_every=468`` (pbmarl counts updates:
  400 updates in the 4000 best-response steps, plus about 68 taken in the average-policy steps between);
- ``min_buffer_size_to_learn 125`` -> ``min_buffer=125`` (also the DQN's, whose own 1,000 default has no option);
- ``discount_factor 1.0`` -> ``gamma=1.0``; ``loss_str mse``: pbmarl's TD loss is the mean squared error.

``psro``: ``.../psro/liars_dice/best_hparams.yaml`` mapped to `pb.PSRO` and a `pb.DQN` oracle (`PSRO_DQN`):

- ``meta_strategy_method nash`` -> ``solver="nash"``; ``training_strategy_selector probabilistic``,
  ``number_policies_selected 1``, ``rectifier ''``: each iteration trains one best response per player
  against the meta-strategy mixture (pbmarl's default targets);
- ``sims_per_entry 250`` -> ``evaluator="rollout", eval_episodes=250``: the payoff table is sampled and its
  episodes count as env steps, as theirs count ``num_meta_game_steps``;
- ``number_training_episodes 4000`` per best response -> ``budget=6_700`` learner steps on liar's dice (pbmarl's
  budget counts the learning seat's decisions: 4000 episodes x 3.36 decisions, the exact mean under uniform play, / 2
  seats); `psro_budget` makes the same conversion for other games (Kuhn 4,500, Leduc 8,100);
- ``hidden_layer_size 512, n_hidden_layers 3`` -> ``hidden=(512, 512, 512)``; ``learning_rate 0.08``
  (Adam) -> ``lr``; ``batch_size 8``; ``replay_buffer_capacity 25000`` -> ``buffer_size``;
- ``learn_every 10`` -> ``updates_per_round=16`` after every ``steps_per_round=160`` learner steps
  (``num_envs=16`` so a round is not forced to 256 episodes); ``update_target_network_every 250`` (steps)
  -> ``target_update_interval=25`` (updates);
- ``epsilon_start 0.48, epsilon_end 0.002, epsilon_decay_duration 80M``: each of their best responses is a
  fresh DQN, so epsilon falls by under 0.001 within one -> ``epsilon_start=epsilon_end=0.48``;
- their DQN (OpenSpiel's) is not double and does not clip gradients -> ``double=False``,
  ``max_grad_norm=1e9``; its ``min_buffer_size_to_learn`` default 1000 -> ``learning_starts=1000``;
  ``loss_str mse`` -> ``loss="mse"``; ``discount_factor 1.0`` -> ``gamma=1.0``;
- ``sigma 0``, ``self_play_proportion 0``, fresh weights per best response -> pbmarl's defaults
  (``warm_start=False``); their exported policy is the greedy argmax of Q, pbmarl's ``softmax(Q / 0.001)``;
- their first population member is an untrained DQN's greedy policy; pbmarl's is uniform random (no option).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pbmarl as pb
from pbmarl.io import read_json, write_json

RESULTS = Path(__file__).with_name("results") / "selfplay.csv"
#: where each neural run's save lives between slices (ignored by git)
STATE = Path(__file__).with_name("state") / "selfplay"
METHODS = ("ppo", "deep_mmd", "mmd", "cfr+", "nfsp", "psro")
#: the IIG benchmark's tuned liar's dice NFSP as `NFSPConfig` options (the mapping is in the module doc)
NFSP_LIARS_DICE: dict[str, object] = dict(
    hidden=(512, 512, 512), optimizer="adam", rl_lr=0.00125, sl_lr=0.00125, anticipatory=0.31622776601683794,
    epsilon_start=0.03, epsilon_decay_episodes=10**8, replay_capacity=500_000, reservoir_capacity=500_000,
    batch_size=32, learn_every=27, updates_per_learn=1, target_update_every=468, min_buffer=125, gamma=1.0,
    episodes_per_step=1_000, measure=False)
#: the IIG benchmark's tuned liar's dice PSRO oracle as `DQNConfig` options (the mapping is in the module doc)
PSRO_DQN: dict[str, object] = dict(
    hidden=(512, 512, 512), lr=0.08, batch_size=8, buffer_size=25_000, num_envs=16, steps_per_round=160,
    updates_per_round=16, target_update_interval=25, epsilon_start=0.48, epsilon_end=0.48, double=False,
    max_grad_norm=1e9, learning_starts=1_000, loss="mse", gamma=1.0)
#: sampled episodes per payoff-table cell (their ``sims_per_entry``)
PSRO_SIMS_PER_ENTRY = 250
#: their ``number_training_episodes`` per best response, which `PSRO_DQN`'s ``budget`` turns into learner steps
PSRO_EPISODES = 4_000
#: the largest game here whose tree the exact engine holds on this machine, as a reader would name it
LARGE = "liars_dice(numdice=2,dice_sides=4)"
#: (env steps, env steps between measurements, tabular iterations) per game: the paper's 10M and 250k on liar's
#: dice; Kuhn and Leduc poker, which the paper does not play, 1M and 50k, so that 5 seeds of every method fit on
#: 2 cores in an afternoon; `LARGE` (33.6M histories, 327,680 information sets a player, a 4.4 GB tree that takes
#: 2 minutes to walk once and 2.5 s to load from the disk cache after; one exact measurement of a network 4 s, one
#: CFR+ iteration 1.2 s) 1M and 100k, and 200 tabular iterations. Another game needs ``--steps``, ``--eval-every``
#: (and ``--iterations``).
BUDGETS: dict[str, tuple[int, int, int]] = {
    "liars_dice": (10_000_000, 250_000, 1_000), "kuhn_poker": (1_000_000, 50_000, 1_000),
    "leduc_poker": (1_000_000, 50_000, 1_000), LARGE: (1_000_000, 100_000, 200)}


def slug(game: str) -> str:
    """`game` as a folder name: ``liars_dice(numdice=2,dice_sides=4)`` -> ``liars_dice_numdice=2_dice_sides=4``."""
    return re.sub(r"[^A-Za-z0-9_=.-]+", "_", game).strip("_")


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class Writer:
    """Appends measurements to the results CSV (`results`), one row each, with the date, commit, machine, command."""

    def __init__(self, results: Path = RESULTS) -> None:
        self.results = Path(results)
        self.stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        self.commit = _commit()
        self.machine = f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus"
        self.command = "python benchmarks/selfplay.py " + " ".join(sys.argv[1:])

    def written(self, game: str, method: str, seed: int, iteration: int, env_steps: int, since: str) -> bool:
        """Whether the CSV already holds this measurement from a slice dated `since` or later (a slice killed
        between writing its row and saving its run measures that iteration again when the next slice resumes)."""
        if not self.results.exists():
            return False
        key = (game, method, str(seed), str(iteration), str(env_steps))
        with open(self.results, newline="") as fh:
            return any((r["game"], r["method"], r["seed"], r["iteration"], r["env_steps"]) == key
                       and r["date"] >= since for r in csv.DictReader(fh))

    def row(self, game: str, method: str, seed: int, iteration: int, env_steps: int, wall: float,
            exploitability: float, *, since: str | None = None) -> None:
        line = (f"{game:<14} {method:<9} seed {seed}  it {iteration:>6}  env {env_steps:>10,}  {wall:8.1f} s  "
                f"exploitability {exploitability:.5f}")
        if since is not None and self.written(game, method, seed, iteration, env_steps, since):
            print(line + "  (already in the CSV)", flush=True)
            return
        print(line, flush=True)
        new = not self.results.exists()
        self.results.parent.mkdir(parents=True, exist_ok=True)
        with open(self.results, "a", newline="") as fh:
            writer = csv.writer(fh)
            if new:
                writer.writerow(["date", "commit", "machine", "command", "game", "method", "seed", "iteration",
                                 "env_steps", "wall_time", "exploitability"])
            writer.writerow([self.stamp, self.commit, self.machine, self.command, game, method, seed, iteration,
                             env_steps, f"{wall:.2f}", f"{exploitability:.6g}"])


class Slices:
    """Where each (game, method, seed, steps) run keeps its save (`root`; None: no saves), and when this slice
    ends (`deadline`, an aware UTC datetime; None: never)."""

    def __init__(self, root: Path | None = STATE, deadline: datetime.datetime | None = None) -> None:
        self.root = None if root is None else Path(root)
        self.deadline = deadline
        self.stopped = False

    def folder(self, game: str, method: str, seed: int, steps: int) -> Path | None:
        return None if self.root is None else self.root / slug(game) / method / f"seed{seed}-steps{steps}"

    @property
    def over(self) -> bool:
        return self.deadline is not None and datetime.datetime.now(datetime.timezone.utc) >= self.deadline

    def standing(self, game: str, method: str, seed: int, steps: int) -> str:
        """Where the run stands, as its ``slice.json`` says."""
        folder = self.folder(game, method, seed, steps)
        if folder is None or not (folder / "slice.json").exists():
            return f"{method:<9} seed {seed}: not started"
        info = read_json(folder / "slice.json")
        where = "finished" if info["finished"] else "saved"
        return (f"{method:<9} seed {seed}: {where} at iteration {info['iteration']}, env {info['env_steps']:,} of "
                f"{steps:,} ({folder})")


def _next_eval(env_steps: list[int], every: int, *, once: bool) -> int:
    """The next measurement's env steps after the records `env_steps`, by the loops' own rule: past each record at
    or beyond it, ``neural`` adds `every` once (`once`), ``nfsp`` and ``psro`` until it is beyond the record."""
    nxt = every
    for steps in env_steps:
        if steps >= nxt:
            nxt += every
            while not once and nxt <= steps:
                nxt += every
    return nxt


class Slice:
    """One (game, method, seed, steps) run's bookkeeping across slices: its save ``<folder>/run`` (the run folder,
    written with `run.save` after every measurement) and ``<folder>/slice.json`` (where it stands, ``next_eval``, and
    the date, commit and command it started under)."""

    def __init__(self, out: Writer, slices: Slices, game: str, method: str, seed: int, steps: int, every: int,
                 *, once: bool = False) -> None:
        self.out, self.slices, self.once = out, slices, once
        self.game, self.method, self.seed, self.steps, self.every = game, method, seed, steps, every
        self.folder = slices.folder(game, method, seed, steps)
        self.info: dict[str, Any] = {
            "game": game, "method": method, "seed": seed, "steps": steps, "eval_every": every,
            "started": out.stamp, "commit": out.commit, "command": out.command, "next_eval": every,
            "iteration": 0, "env_steps": 0, "wall_time": 0.0, "finished": False}
        if self.folder is not None and (self.folder / "slice.json").exists():
            self.info = read_json(self.folder / "slice.json")
            if self.info.get("eval_every") != every:
                raise ValueError(f"{self.folder} was started with --eval-every {self.info.get('eval_every')}, got "
                                 f"{every}: continue it with the same value, or give another --state folder")

    def start(self, build: Callable[[], Any]) -> tuple[Any, int] | None:
        """The run and its ``next_eval``: loaded from its save if it has one, else built fresh; None if finished."""
        if self.info["finished"]:
            print(f"{self.game:<14} {self.method:<9} seed {self.seed}  finished earlier at env "
                  f"{self.info['env_steps']:,} ({self.folder}); skipped", flush=True)
            return None
        if self.folder is not None and (self.folder / "run" / "run.json").exists():
            run = pb.load_run(self.folder / "run")
            if run.records[-1].env_steps >= self.steps:  # killed between its last save and slice.json
                self.info.update(iteration=int(run.iteration), env_steps=int(run.records[-1].env_steps),
                                 wall_time=float(run.records[-1].wall_time), finished=True)
                write_json(self.folder / "slice.json", self.info)
                run.close()
                return self.start(build)
            nxt = _next_eval([int(r.env_steps) for r in run.records], self.every, once=self.once)
            if self.info["iteration"] == run.iteration and self.info["next_eval"] != nxt:
                raise RuntimeError(f"{self.folder}: slice.json says next_eval {self.info['next_eval']}, the saved "
                                   f"records say {nxt}")
            note = "" if self.info["commit"] == self.out.commit else \
                f"; started under commit {self.info['commit']}, continues under {self.out.commit}"
            print(f"{self.game:<14} {self.method:<9} seed {self.seed}  resumes at iteration {run.iteration}, env "
                  f"{run.records[-1].env_steps:,}, wall {run.records[-1].wall_time:.1f} s{note}", flush=True)
            return run, nxt
        if self.folder is not None:  # before any training, so a slice killed before its first save keeps `started`
            write_json(self.folder / "slice.json", self.info)
        return build(), self.every

    def measured(self, run: Any, record: Any, exploitability: float, next_eval: int, last: bool) -> bool:
        """Write the measurement's row (unless already in the CSV), save the run, and say whether to stop here."""
        self.out.row(self.game, self.method, self.seed, record.iteration, record.env_steps, record.wall_time,
                     exploitability, since=self.info["started"])
        if self.folder is not None:
            run.save(self.folder / "run")
            self.info.update(next_eval=next_eval, iteration=int(record.iteration), env_steps=int(record.env_steps),
                             wall_time=float(record.wall_time), finished=bool(last))
            write_json(self.folder / "slice.json", self.info)
        if not last and self.slices.over:
            self.slices.stopped = True
            return True
        return False


def neural(out: Writer, game: str, method: str, seed: int, steps: int, every: int,
           slices: Slices | None = None, options: dict[str, Any] | None = None) -> None:
    run_slice = Slice(out, slices or Slices(None), game, method, seed, steps, every, once=True)
    kind = pb.PPOSelfPlay if method == "ppo" else pb.DeepMMD
    started = run_slice.start(lambda: kind(game, seed=seed, preset="iig_liars_dice", budget=steps, eval_every=0,
                                           **(options or {})))
    if started is None:
        return
    run, next_eval = started
    with run:
        while not run.done:
            record = run.step()
            if record.env_steps >= next_eval or run.done:
                nc = run._nash_conv()  # exact: the engine holds liar's dice
                next_eval += every
                if run_slice.measured(run, record, float(nc or 0) / 2, next_eval, run.done):
                    return


def make_nfsp(game: str, seed: int, options: dict[str, Any] | None = None) -> Any:
    """The comparison's NFSP run: `NFSP_LIARS_DICE`, with `options` replacing its values."""
    return pb.NFSP(game, seed=seed, **{**NFSP_LIARS_DICE, **(options or {})})


def make_psro(game: str, seed: int, options: dict[str, Any] | None = None, *, parallel: str | None = None) -> Any:
    """The comparison's PSRO run: PSRO-Nash over a sampled payoff table with the tuned DQN oracle (`PSRO_DQN`, its
    budget from `psro_budget`), with `options` replacing the oracle's values; `parallel` (``"local"`` or
    ``"ray"``): the oracle inside a `ParallelOracle` of that backend, one copy per player (not the comparison's)."""
    budget = (options or {}).get("budget") or psro_budget(game)
    learner = pb.DQN(game, seed=seed, **{**PSRO_DQN, "budget": budget, **(options or {})})
    if parallel is not None:
        from pbmarl.algorithms.psro.parallel_oracle import ParallelOracle

        learner = ParallelOracle(learner, backend=parallel)
    return pb.PSRO(game, solver="nash", learner=learner, evaluator="rollout", seed=seed,
                   eval_episodes=PSRO_SIMS_PER_ENTRY, measure=False, stop_exploitability=None)


def nfsp(out: Writer, game: str, seed: int, steps: int, every: int, slices: Slices | None = None,
         options: dict[str, Any] | None = None) -> None:
    """NFSP with the tuned liar's dice options; exact exploitability of the average policies."""
    from pbmarl.evaluation.exact import exploitability

    run_slice = Slice(out, slices or Slices(None), game, "nfsp", seed, steps, every)
    started = run_slice.start(lambda: make_nfsp(game, seed, options))
    if started is None:
        return
    run, next_eval = started
    _train(run, run_slice, next_eval, steps, every,
           lambda: float(exploitability(run.game, run.average_policies()).exploitability))


def psro(out: Writer, game: str, seed: int, steps: int, every: int, slices: Slices | None = None,
         options: dict[str, Any] | None = None) -> None:
    """PSRO-Nash with the tuned DQN oracle and a sampled payoff table; exact exploitability of the meta-strategy.

    An iteration can take more than ``every`` env steps (its payoff-table cells grow with the population): it
    is then measured once, and the run ends after the iteration that reaches ``steps`` (as theirs does).
    `options` replace the oracle's (`PSRO_DQN`).
    """
    run_slice = Slice(out, slices or Slices(None), game, "psro", seed, steps, every)
    started = run_slice.start(lambda: make_psro(game, seed, options))
    if started is None:
        return
    run, next_eval = started
    # keeps each member's realisation plan between measurements; only a cache, so a loaded run starts an empty one
    measurer = pb.ExactEvaluator(run.game)
    with run:
        _train(run, run_slice, next_eval, steps, every,
               lambda: float(measurer.exploitability(run.population, run.meta_strategy).exploitability))


def decisions_per_episode(game: str) -> float:
    """Mean decisions (all seats) per episode of `game` under uniform random play, exactly, from its game tree:
    the sum over terminal histories of their probability times the decisions on the way there."""
    import numpy as np

    from pbmarl.evaluation.realization import realization_plans, terminal_reach

    tree = pb.load_game(game).tree()
    prob, count = tree.chance_reach.astype(float), np.zeros(tree.num_terminals)
    for player, infosets in enumerate(tree.infosets):
        uniform = infosets.legal / infosets.legal.sum(axis=1, keepdims=True)
        prob = prob * terminal_reach(realization_plans(uniform[None], infosets, tree.num_actions), tree, player)[0]
        last = tree.terminal_seq[player]  # the player's last sequence: 0 if it never moved, else 1 + I * A + a
        count += np.where(last > 0, infosets.depth[np.maximum(last - 1, 0) // tree.num_actions] + 1, 0)
    return float(prob @ count)


def psro_budget(game: str) -> int:
    """Learner steps of one best response: `PSRO_EPISODES` episodes of `game` (their unit) in the learning seat's
    decisions (pbmarl's), under uniform play, to the nearest 100: Kuhn 4,500 (2.25 decisions an episode), Leduc
    8,100 (4.0625), liar's dice 6,700 (3.3618) and with 2 dice of 4 sides 7,200 (3.5920)."""
    players = pb.load_game(game).num_players
    return int(round(PSRO_EPISODES * decisions_per_episode(game) / players, -2))


def _train(run: Any, run_slice: Slice, next_eval: int, steps: int, every: int, measure: Callable[[], float]) -> None:
    """Step `run` until its env steps reach `steps`, measuring at the first step at or past each `next_eval`
    (one measurement when a step passes several) and at the last; `run_slice` records and saves each measurement
    and may end the slice."""
    while True:
        record = run.step()
        last = record.env_steps >= steps
        if record.env_steps >= next_eval or last:
            value = measure()
            while next_eval <= record.env_steps:
                next_eval += every
            if run_slice.measured(run, record, value, next_eval, last):
                return
        if last:
            return


def tabular(out: Writer, game: str, method: str, iterations: int) -> None:
    start = time.perf_counter()
    if method == "mmd":
        # untuned; alpha 0.05 sits at a near-uniform QRE here. A sweep (alpha 0.002/0.01/0.05 x stepsize 0.1/1/10
        # x magnet_every 10/100, 300 iterations) found nothing below 0.256 (alpha 0.01, stepsize 10), and every
        # stepsize of 5 or more with alpha <= 0.01 underflowed to a zero probability before 1,000 iterations
        run = pb.MMD(game, alpha=0.002, magnet_every=10)
        for record in run.run(iterations, progress=False):
            if record.iteration % max(1, iterations // 10) == 0:
                out.row(game, method, 0, record.iteration, 0, record.wall_time, record.exploitability)
        return
    from pbmarl.evaluation.cfr import CFRPlus

    solver = CFRPlus(pb.load_game(game).tree())
    for i in range(1, iterations + 1):
        solver.step()
        if i % max(1, iterations // 10) == 0:
            out.row(game, method, 0, i, 0, time.perf_counter() - start, solver.nash_conv() / 2)


def _seeds(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",")]


def _deadline(stop_at: str | None, hours: float | None) -> datetime.datetime | None:
    """`--stop-at HH:MM` (UTC: its next occurrence, within 24 h) or `--hours H` from now, as an aware datetime."""
    now = datetime.datetime.now(datetime.timezone.utc)
    if stop_at is not None and hours is not None:
        raise ValueError("give --stop-at or --hours, not both")
    if hours is not None:
        if not hours >= 0:
            raise ValueError(f"--hours must be a non-negative number of hours, got {hours!r}")
        return now + datetime.timedelta(hours=hours)
    if stop_at is None:
        return None
    try:
        clock = datetime.datetime.strptime(stop_at, "%H:%M").time()
    except ValueError:
        raise ValueError(f"--stop-at must be a UTC time HH:MM such as 15:10, got {stop_at!r}") from None
    at = datetime.datetime.combine(now.date(), clock, tzinfo=datetime.timezone.utc)
    return at if at > now else at + datetime.timedelta(days=1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=METHODS, help="methods to run (default: all)")
    parser.add_argument("--seeds", default="0-4", help="'0-4' or '0,2' (neural methods)")
    parser.add_argument("--game", default="liars_dice", help="an OpenSpiel game the exact engine holds")
    parser.add_argument("--steps", type=int, help="env steps per neural run (default: the game's in BUDGETS)")
    parser.add_argument("--eval-every", type=int,
                        help="env steps between exact measurements (default: the game's in BUDGETS)")
    parser.add_argument("--iterations", type=int, help="iterations of the tabular methods (default: the game's)")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"the CSV rows are appended to ({RESULTS})")
    parser.add_argument("--state", type=Path, default=STATE,
                        help=f"folder of the neural runs' saves, one per (game, method, seed, steps) ({STATE})")
    parser.add_argument("--stop-at", metavar="HH:MM", help="UTC: stop after the first save past this time")
    parser.add_argument("--hours", type=float, help="stop after the first save past this many hours from now")
    args = parser.parse_args(argv)
    try:
        deadline = _deadline(args.stop_at, args.hours)
    except ValueError as exc:
        parser.error(str(exc))
    if args.steps is None or args.eval_every is None or args.iterations is None:
        if args.game not in BUDGETS:
            parser.error(f"no default budget for --game {args.game!r} (defaults exist for {', '.join(BUDGETS)}): "
                         "give --steps, --eval-every and --iterations")
        default_steps, default_every, default_iterations = BUDGETS[args.game]
        args.steps = default_steps if args.steps is None else args.steps
        args.eval_every = default_every if args.eval_every is None else args.eval_every
        args.iterations = default_iterations if args.iterations is None else args.iterations
    for flag, value, unit in (("--steps", args.steps, "env steps"), ("--eval-every", args.eval_every, "env steps"),
                              ("--iterations", args.iterations, "iterations")):
        if value < 1:
            parser.error(f"{flag} must be a positive number of {unit}, got {value}")
    out = Writer(args.results)
    slices = Slices(args.state, deadline)
    if deadline is not None:
        print(f"this slice stops after the first save past {deadline:%Y-%m-%d %H:%M} UTC", flush=True)
    methods = args.only or list(METHODS)
    neural_runs = [(m, seed) for m in methods if m not in ("mmd", "cfr+") for seed in _seeds(args.seeds)]
    for method in methods:
        if method in ("mmd", "cfr+"):
            tabular(out, args.game, method, args.iterations)
            continue
        for seed in _seeds(args.seeds):
            if method == "nfsp":
                nfsp(out, args.game, seed, args.steps, args.eval_every, slices)
            elif method == "psro":
                psro(out, args.game, seed, args.steps, args.eval_every, slices)
            else:
                neural(out, args.game, method, seed, args.steps, args.eval_every, slices)
            if slices.stopped:
                break
        if slices.stopped:
            break
    if slices.stopped:
        print(f"stopped: past {deadline:%H:%M} UTC. Where each run stands (the same command continues them):")
        for method, seed in neural_runs:
            print("  " + slices.standing(args.game, method, seed, args.steps), flush=True)


if __name__ == "__main__":
    main()
