"""Section 6 of the hardening issue, "bad input: every call answers clearly": the rows of the probes list
(/work/shared/reference/probes-2026-11-29.md) for load_game, the policies and noises, collect,
apex_epsilons, sequence_form_lp and the command line's game names, each with the call as the probes
typed it and the fragment of the pbmarl error that now names the value and what is accepted."""

from __future__ import annotations

import functools
import math
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pbmarl as pb
from pbmarl.config import MAX_LAYERS, MAX_WIDTH, check_int, check_real, check_widths
from pbmarl.policies import DeterministicPolicy, GaussianPolicy
from pbmarl.policies.base import ActionOutput

NAN, INF = math.nan, math.inf
N_ = pb.policies.noise


@functools.cache
def pend() -> Any:
    return pb.load_game("gym:Pendulum-v1")


def spread(*name_or_kwargs: str, **kw: Any) -> Any:
    return pb.load_game(*(name_or_kwargs or ("pettingzoo:simple_spread_v3",)), **kw)


class _ActsOutside(DeterministicPolicy):
    """A Box policy that answers `value` whatever it sees (the probes' OutOfBox and NaNAct)."""

    value = 5.0

    def act(self, obs: Any, legal_mask: Any = None, rng: Any = None, keys: Any = None, **kw: Any) -> ActionOutput:
        return ActionOutput(np.full((len(obs), 1), self.value, np.float32), np.zeros(len(obs)))


class _ActsNaN(_ActsOutside):
    value = NAN


def oob_collect(cls: type, game: Callable[[], Any]) -> Any:
    """The probes' collect of one seat played by a policy acting outside its Box."""
    return pb.RolloutPool(game()).collect(0, cls(game()), [None], 50, seed=0)


def _ou_env_ids(ids: list[int]) -> Any:
    pi = DeterministicPolicy(pend(), noise=pb.policies.noise.OrnsteinUhlenbeck())
    return pi.act(np.zeros((1, 3), np.float32), None, rng=0, env_ids=ids)


SPREAD = "pettingzoo:simple_spread_v3"
WIDTHS = r"hidden must be layer widths, a tuple of at most \d+ ints in \[1, 16,384\] such as \(64, 64\), got "
#: (probe row, call, error type, fragment of the message)
ROWS: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    # load_game
    ("spread N=0", lambda: spread(N=0).agents, ValueError, r"N must be an int in \[1, 256\], got 0 \(game '" + SPREAD),
    ("spread N=-1", lambda: spread(N=-1).agents, ValueError, r"N must be an int in \[1, 256\], got -1"),
    ("spread N=True", lambda: spread(N=True).agents, ValueError, r"N must be an int in \[1, 256\], got True"),
    ("spread N=4000 (bounded before building)", lambda: spread(N=4000), ValueError, r"N must be .* got 4000"),
    ("spread max_cycles=0", lambda: spread(max_cycles=0).name, ValueError,
     r"max_cycles must be an int in \[1, 1,000,000,000\], got 0"),
    ("spread max_cycles=-3", lambda: spread(max_cycles=-3).name, ValueError, r"max_cycles must be .* got -3"),
    ("spread continuous_actions='yes'", lambda: spread(continuous_actions="yes"), ValueError,
     r"continuous_actions must be True or False, got 'yes'"),
    ("spread local_ratio=nan", lambda: spread(local_ratio=NAN).name, ValueError,
     r"local_ratio=nan is not accepted: game parameters must be finite numbers"),
    ("spread local_ratio=5", lambda: spread(local_ratio=5).name, ValueError,
     r"local_ratio must be a finite number >= 0 and <= 1, got 5"),
    ("Pendulum g=nan", lambda: pb.load_game("gym:Pendulum-v1", g=NAN), ValueError,
     r"g=nan is not accepted: game parameters must be finite numbers \(a NaN or an infinity"),
    ("CartPole max_episode_steps=True", lambda: pb.load_game("gym:CartPole-v1", max_episode_steps=True), ValueError,
     r"max_episode_steps must be an int in \[1, .*\], got True \(game 'gym:CartPole-v1'\)"),
    ("CartPole render_mode='bogus'", lambda: pb.load_game("gym:CartPole-v1", render_mode="bogus").name, ValueError,
     r"render_mode must be None or one of \['human', 'rgb_array'\], got 'bogus'"),
    # the command line's --game, read by load_game's name parser
    ("CLI simple_spread_v3(N=0)", lambda: pb.load_game(SPREAD + "(N=0)"), ValueError, r"N must be an int in \[1, 256\], got 0"),
    ("CLI simple_spread_v3(max_cycles=0)", lambda: pb.load_game(SPREAD + "(max_cycles=0)"), ValueError,
     r"max_cycles must be an int in \[1, .*\], got 0"),
    ("CLI Pendulum-v1(g=nan)", lambda: pb.load_game("gym:Pendulum-v1(g=nan)"), ValueError,
     r"cannot use g=nan in 'Pendulum-v1\(g=nan\)': nan is not accepted, as game parameters must be finite numbers"),
    # GaussianPolicy / DeterministicPolicy
    ("GaussianPolicy hidden=(-4,)", lambda: GaussianPolicy(pend(), hidden=(-4,)), ValueError, WIDTHS + r"\(-4,\)"),
    ("GaussianPolicy hidden=(0,)", lambda: GaussianPolicy(pend(), hidden=(0,)), ValueError, WIDTHS + r"\(0,\)"),
    ("GaussianPolicy hidden='64'", lambda: GaussianPolicy(pend(), hidden="64"), ValueError, WIDTHS + "'64'"),
    ("GaussianPolicy hidden=(2.5,)", lambda: GaussianPolicy(pend(), hidden=(2.5,)), ValueError, WIDTHS + r"\(2.5,\)"),
    ("GaussianPolicy hidden=[64,'a']", lambda: GaussianPolicy(pend(), hidden=[64, "a"]), ValueError,
     WIDTHS + r"\[64, 'a'\]"),
    ("GaussianPolicy seed=-1", lambda: GaussianPolicy(pend(), seed=-1), ValueError,
     r"seed must be an int in \[0, 2\*\*63\), got -1"),
    ("GaussianPolicy seed=1.5", lambda: GaussianPolicy(pend(), seed=1.5), ValueError,
     r"seed must be an int in \[0, 2\*\*63\), got 1.5"),
    ("GaussianPolicy log_std_init=nan",
     lambda: GaussianPolicy(pend(), log_std_init=NAN, state_dependent_std=False), ValueError,
     r"log_std_init must be a finite number, got nan"),
    ("GaussianPolicy.act rng='x'", lambda: GaussianPolicy(pend()).act(np.zeros((1, 3), np.float32), rng="x"),
     ValueError, r"rng must be a non-negative int seed, a numpy Generator or None, got 'x'"),
    ("GaussianPolicy.act obs with NaN", lambda: GaussianPolicy(pend()).act(np.full((1, 3), NAN, np.float32), rng=0),
     ValueError, r"GaussianPolicy for 'gym:Pendulum-v1' got observations with NaN or inf in rows \[0\]"),
    ("DeterministicPolicy+OU act env_ids=[10**9]", lambda: _ou_env_ids([10**9]), ValueError,
     r"env_ids must be distinct ints in \[0, 1,048,576\) \(one environment instance per row\), got \[1000000000\]"),
    ("DeterministicPolicy+OU act env_ids=[-3]", lambda: _ou_env_ids([-3]), ValueError,
     r"env_ids must be distinct ints in \[0, 1,048,576\) .*got \[-3\]"),
    # pb.policies.noise
    ("noise.Normal(sigma=None)", lambda: N_.Normal(sigma=None), ValueError, r"sigma must be a finite number >= 0, got None"),
    ("noise.Normal(sigma='abc')", lambda: N_.Normal(sigma="abc"), ValueError, r"sigma must be a finite number >= 0, got 'abc'"),
    ("noise.Uniform(low='a')", lambda: N_.Uniform(low="a"), ValueError, r"low must be a finite number, got 'a'"),
    ("noise.OrnsteinUhlenbeck(theta=0)", lambda: N_.OrnsteinUhlenbeck(theta=0).stationary_variance, ValueError,
     r"theta must be a finite number > 0, got 0"),
    ("noise.OrnsteinUhlenbeck(mu=nan)", lambda: N_.OrnsteinUhlenbeck(mu=NAN), ValueError, r"mu must be a finite number, got nan"),
    ("noise.OrnsteinUhlenbeck(mu=inf)", lambda: N_.OrnsteinUhlenbeck(mu=INF), ValueError, r"mu must be a finite number, got inf"),
    ("OU.sample indices=[10**9]",
     lambda: N_.OrnsteinUhlenbeck().sample(np.random.default_rng(0), (1, 1), indices=[10**9]), ValueError,
     r"indices must be distinct ints in \[0, 1,048,576\)"),
    ("OU.sample shape=(-1, 1)", lambda: N_.OrnsteinUhlenbeck().sample(np.random.default_rng(0), (-1, 1)), ValueError,
     r"shape\[0\] \(rows\) must be a non-negative int, got -1"),
    ("noise.AdaptiveParameterNoise(adoption_coefficient=inf)",
     lambda: N_.AdaptiveParameterNoise(adoption_coefficient=INF), ValueError,
     r"adoption_coefficient must be a finite number > 1, got inf"),
    # collect, apex_epsilons, sequence_form_lp
    ("collect Pendulum policy acts 5.0", lambda: oob_collect(_ActsOutside, pend), ValueError,
     r"returned action \[5.0\], outside Box\(-2.0, 2.0, \(1,\), float32\): accepted are low \[-2.0\] to high \[2.0\]"),
    ("collect Pendulum policy acts NaN", lambda: oob_collect(_ActsNaN, pend), ValueError,
     r"returned action \[nan\], outside Box\(-2.0, 2.0"),
    ("apex_epsilons(3, eps=2)", lambda: pb.learners.apex_epsilons(3, eps=2.0), ValueError,
     r"eps \(an exploration probability\) must be a finite number >= 0 and <= 1, got 2.0"),
    ("sequence_form_lp max_nodes=0", lambda: pb.sequence_form_lp("kuhn_poker", max_nodes=0), ValueError,
     r"max_nodes must be a positive int, got 0"),
    ("sequence_form_lp max_nodes=-5", lambda: pb.sequence_form_lp("kuhn_poker", max_nodes=-5), ValueError,
     r"max_nodes must be a positive int, got -5"),
    # AgentMapping, and a parameter server's size
    ("AgentMapping game=None", lambda: pb.AgentMapping(None, {"a": "b"}), TypeError,
     r"game must be a pbmarl Game or a game name \(see pb.load_game\), got NoneType: None"),
    ("AgentMapping bogus kw", lambda: pb.AgentMapping(spread(), {"agent_0": "a", "agent_1": "a"}, bogus=1), TypeError,
     r"unknown option 'bogus' for AgentMapping Accepted options: agent_id, pad"),
    ("AgentMapping.from_spec(garbage)", lambda: pb.AgentMapping.from_spec(spread(), {"garbage": 1}), ValueError,
     r"a mapping spec holds exactly the keys \['assignment', 'agent_id', 'pad'\].*got \['garbage'\]"),
    ("AgentMapping agent_id='no'", lambda: pb.AgentMapping.shared(spread(), agent_id="no"), ValueError,
     r"agent_id must be True or False, got 'no'"),
    ("AgentMapping pad=2", lambda: pb.AgentMapping.shared(spread(), pad=2), ValueError,
     r"pad must be True or False, got 2"),
    ("PPO workers=10**6", lambda: pb.PPO("gym:CartPole-v1", workers=10**6, backend="local"), ValueError,
     r"workers must be an int in \[1, 256\], got 1000000"),
]


@pytest.mark.parametrize(("call", "error", "fragment"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS])
def test_bad_input_answers_clearly(call: Callable[[], Any], error: type[Exception], fragment: str) -> None:
    with pytest.raises(error, match=fragment):
        call()


def test_good_input_still_works() -> None:
    """The values next to the refused ones are taken: the checks refuse only what they name."""
    game = spread(N=2, max_cycles=10, local_ratio=1, continuous_actions=True, render_mode=None)
    assert game.agents == ["agent_0", "agent_1"] and game.continuous == (True, True)
    assert pb.load_game("gym:Pendulum-v1(g=9.5)").make_env().unwrapped.g == 9.5
    assert pb.load_game("gym:CartPole-v1", max_episode_steps=20).max_episode_steps == 20
    assert pb.load_game("gym:MountainCarContinuous-v0", goal_velocity=0).name.endswith("(goal_velocity=0)")
    pi = GaussianPolicy(pend(), hidden=[8], seed=np.int64(3), log_std_init=-1, state_dependent_std=False)
    assert pi.hidden == (8,) and np.isfinite(pi.act(np.zeros((2, 3), np.float32), rng=0).action).all()
    assert N_.OrnsteinUhlenbeck(theta=1e-3).stationary_variance > 0
    assert pb.learners.apex_epsilons(2, eps=1.0, alpha=0) == [1.0, 1.0]
    pool = pb.RolloutPool(pend())
    traj = pool.collect(0, DeterministicPolicy(pend(), hidden=(8,)), [None], 50, seed=0)
    assert traj.steps >= 50 and np.all(np.abs(traj.action) <= 2.0)


@pytest.mark.parametrize("name", ["nan", "-inf", "1e999"])
def test_non_finite_numbers_in_a_game_name_are_refused_with_the_reason(name: str) -> None:
    with pytest.raises(ValueError, match="must be finite numbers"):
        pb.load_game(f"gym:Pendulum-v1(g={name})")


def test_game_names_say_how_to_write_a_value() -> None:
    with pytest.raises(ValueError, match=r"write a string in quotes \('human'\)"):
        pb.load_game("gym:CartPole-v1(render_mode=human)")
    with pytest.raises(ValueError, match=r"write True \(Python's spelling\)"):
        pb.load_game("gym:CartPole-v1(sutton_barto_reward=true)")
    with pytest.raises(ValueError, match=r"unknown parameter 'gg' for game 'gym:Pendulum-v1'; did you mean 'g'\?"):
        pb.load_game("gym:Pendulum-v1", gg=9.0)


def test_the_command_line_reports_a_nan_game_parameter(tmp_path: Any) -> None:
    out = subprocess.run([sys.executable, "-c", "import sys; from pbmarl.cli import main; sys.exit(main())", "train",
                          "--game", "gym:Pendulum-v1(g=nan)", "--algo", "sac", "--out", str(tmp_path / "run"),
                          "--steps", "200", "--eval-episodes", "1", "--quiet"], capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "nan is not accepted, as game parameters must be finite numbers" in out.stderr


@pytest.mark.parametrize(("value", "ok"), [(3, True), (np.int64(3), True), (0, False), (True, False), (3.0, False),
                                           ("3", False), (None, False), (11, False)])
def test_check_int(value: Any, ok: bool) -> None:
    if ok:
        assert check_int("k", value, low=1, high=10) == 3
    else:
        with pytest.raises(ValueError, match=r"k must be an int in \[1, 10\], got "):
            check_int("k", value, low=1, high=10)


@pytest.mark.parametrize(("value", "ok"), [(0.5, True), (1, True), (np.float32(0.25), True), (0, False), (NAN, False),
                                           (INF, False), (True, False), ("0.5", False), (2, False)])
def test_check_real(value: Any, ok: bool) -> None:
    if ok:
        assert check_real("p", value, above=0, high=1) == float(value)
    else:
        with pytest.raises(ValueError, match=r"p must be a finite number > 0 and <= 1, got "):
            check_real("p", value, above=0, high=1)


@pytest.mark.parametrize(("value", "ok"), [((), True), ([64, 64], True), ((np.int64(8),), True), ("64", False),
                                           ((2.5,), False), ((0,), False), ((True,), False), (64, False),
                                           ((MAX_WIDTH + 1,), False), ((8,) * (MAX_LAYERS + 1), False)])
def test_check_widths(value: Any, ok: bool) -> None:
    if ok:
        assert check_widths("hidden", value) == tuple(int(w) for w in value)
    else:
        with pytest.raises(ValueError, match="hidden must be layer widths"):
            check_widths("hidden", value)
