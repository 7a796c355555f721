"""Control learners (DDPG, TD3, HDDPG, SAC, Rainbow) on tiny budgets and MDPs with known optima."""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import gymnasium
import numpy as np
import pandas as pd
import pytest
import torch

import pbmarl as pb
from pbmarl.games.mdp import MDPGame
from pbmarl.learners.common import nets as common_nets
from pbmarl.learners.common.buffers import Batch
from pbmarl.learners.control import critics
from pbmarl.learners.control.base import ControlLearner
from pbmarl.learners.control.ddpg import DDPG
from pbmarl.learners.control.hddpg import HDDPG
from pbmarl.learners.control.rainbow import Rainbow
from pbmarl.learners.control.sac import SAC
from pbmarl.learners.control.td3 import TD3
from pbmarl.policies.base import new_policy_from_state
from pbmarl.protocols import Oracle
from pbmarl.torchutil import torch_threads

TINY = {"hidden": (32,), "batch_size": 32, "steps_per_round": 100, "learning_starts": 50, "gamma": 1.0,
        "buffer_size": 2_000}


class _BoxActions(gymnasium.ActionWrapper):  # type: ignore[misc]
    """Plays a1 where the Box action is positive, a0 otherwise."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def action(self, action: Any) -> int:
        return int(np.asarray(action).reshape(-1)[0] > 0)


class BoxDMDP(MDPGame):
    """MALib's two_round_dmdp seen through a Box(-1, 1) action: a > 0 is a1."""

    def __init__(self) -> None:
        super().__init__("two_round_dmdp")
        self.num_actions = 0

    def action_space(self, player: int) -> Any:
        self.check_player(player)
        return gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def make_env(self) -> Any:
        return _BoxActions(super().make_env())

    def __reduce__(self) -> tuple[Any, ...]:  # copies (parameter-server workers) stay Box games
        return (BoxDMDP, ())


def _learners() -> list[tuple[str, Any]]:
    # deterministic actors follow the critic's local slope: early on Q(start, a) rises with a (the better
    # state's reward is not learnt yet), and an actor that follows it fast saturates tanh at a > 0, where the
    # slope is flat for good (actor_lr 1e-3 stuck at 2.0 on seeds 1-3 of 4). A slower actor waits for the
    # critic: actor_lr 3e-4 over 1,500 steps reached 3.0 on seeds 0-3 of both DDPG and TD3
    det = {**TINY, "lr": 3e-3, "actor_lr": 3e-4, "budget": 1500, "noise_sigma": 0.5, "tau": 0.05,
           "learning_starts": 100}
    dmdp = "mdp:two_round_dmdp"
    return [
        *[(f"ddpg-seed{s}", lambda s=s: DDPG(BoxDMDP(), seed=s, **det)) for s in range(3)],
        *[(f"td3-seed{s}", lambda s=s: TD3(BoxDMDP(), seed=s, **det)) for s in range(3)],
        ("hddpg", lambda: HDDPG(BoxDMDP(), seed=0, **det)),
        ("sac-box", lambda: SAC(BoxDMDP(), seed=0, lr=3e-3, budget=400, **TINY)),
        # gSDE keeps one noise matrix per state for a rollout: it needs more steps here than per-step noise
        # (train_freq=2, log_std_init=-1, 800 steps reached 3.0 on seeds 0-9)
        ("sac-gsde", lambda: SAC(BoxDMDP(), seed=0, lr=3e-3, sde=True, train_freq=2, gradient_steps=2,
                                 log_std_init=-1.0, **{**TINY, "budget": 800})),
        ("sac-discrete", lambda: SAC(dmdp, seed=0, lr=3e-3, budget=400, **TINY)),
        # n-step returns are those of the exploring behaviour (no off-policy correction), which on this tiny
        # budget still mixes the second move: one-step targets here, n-step in the save/load test below
        ("rainbow", lambda: Rainbow(dmdp, seed=0, lr=3e-3, budget=400, v_min=0.0, v_max=4.0, atoms=21, n_step=1,
                                    target_update_interval=50, **TINY)),
        ("dqn-per", lambda: Rainbow(dmdp, seed=0, lr=3e-3, budget=400, dueling=False, n_step=1, noisy=False,
                                    distributional=False, double=False, target_update_interval=50, **TINY)),
        ("dqn", lambda: Rainbow(dmdp, seed=0, lr=3e-3, budget=400, dueling=False, n_step=1, noisy=False,
                                distributional=False, prioritized=False, target_update_interval=50, **TINY)),
        # bfloat16 hidden-to-hidden products: two hidden layers, so there is one to lower
        ("td3-bf16", lambda: TD3(BoxDMDP(), seed=0, matmul_precision="bfloat16", **{**det, "hidden": (32, 32)})),
        ("sac-bf16", lambda: SAC(BoxDMDP(), seed=0, lr=3e-3, budget=400, matmul_precision="bfloat16",
                                 **{**TINY, "hidden": (32, 32)})),
        # oneDNN's bfloat16 math mode for every product of the update (the forwards of the outer layers exact)
        ("td3-medium", lambda: TD3(BoxDMDP(), seed=0, matmul_precision="medium", **{**det, "hidden": (32, 32)})),
        ("rainbow-bf16", lambda: Rainbow(dmdp, seed=0, lr=3e-3, budget=400, v_min=0.0, v_max=4.0, atoms=21,
                                         n_step=1, target_update_interval=50, matmul_precision="bfloat16",
                                         **{**TINY, "hidden": (32, 32)})),
    ]


@pytest.mark.parametrize("make", [m for _, m in _learners()], ids=[n for n, _ in _learners()])
def test_reaches_the_dynamic_programming_optimum_of_two_round_dmdp(make: Any) -> None:
    learner = make()
    records = learner.run(progress=False)
    assert records.stopped_by == "budget" and learner.done
    assert learner.history["env_steps"].iloc[-1] >= learner.config.budget
    optimum = pb.load_game("mdp:two_round_dmdp").optimal_value()
    assert optimum == pytest.approx(3.0)
    assert learner.evaluate(2, deterministic=True).mean[0] == pytest.approx(optimum)


def _one_per_algorithm() -> list[tuple[str, Any]]:
    """Every learner and variant once (the first seed of DDPG and TD3)."""
    return [(n, m) for n, m in _learners() if not n.endswith(("seed1", "seed2"))]


@pytest.mark.parametrize("make", [m for _, m in _one_per_algorithm()], ids=[n for n, _ in _one_per_algorithm()])
def test_losses_fall_on_a_fixed_batch(make: Any) -> None:
    learner = make()
    learner.config = dataclasses.replace(learner.config, learning_starts=10_000)
    learner.step()  # fills the buffer, no updates yet
    batch = learner.replay.sample(32, np.random.default_rng(1))
    with torch_threads(1):
        losses = [learner._update(batch)["loss"] for _ in range(60)]
    # C51's cross-entropy cannot fall below the entropy of its projected targets (spread over neighbouring
    # atoms): it is asked for a smaller, still unmistakable fall
    factor = 0.8 if getattr(learner.config, "distributional", False) else 0.5
    assert np.mean(losses[-5:]) < factor * np.mean(losses[:5])


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
@pytest.mark.parametrize("make", [
    lambda p: TD3(BoxDMDP(), seed=0, hidden=(16, 8, 4), matmul_precision=p, **{k: v for k, v in TINY.items() if k != "hidden"}),
    lambda p: SAC(BoxDMDP(), seed=0, hidden=(16, 8, 4), sde=True, matmul_precision=p,
                  **{k: v for k, v in TINY.items() if k != "hidden"}),
    lambda p: Rainbow("mdp:two_round_dmdp", seed=0, hidden=(16, 8, 4), noisy=True, matmul_precision=p,
                      **{k: v for k, v in TINY.items() if k != "hidden"}),
], ids=["td3", "sac-gsde", "rainbow-noisy"])
def test_bfloat16_lowers_only_the_hidden_to_hidden_products_of_the_update(make: Any, precision: str) -> None:
    """Under ``matmul_precision="bfloat16"`` the Linear layers between two hidden layers compute in bfloat16;
    the first layer, the heads, the losses and every parameter and gradient stay float32. Acting is float32."""
    learner = make(precision)
    learner.config = dataclasses.replace(learner.config, learning_starts=10_000)
    learner.step()
    seen: dict[str, set[torch.dtype]] = {}
    nets = {name: m for name, m in learner._modules().items() if isinstance(m, torch.nn.Module)}
    hooks = [layer.register_forward_hook(lambda mod, inp, out, key=f"{name}.{path}": seen.setdefault(
                 key, set()).add(out.dtype))
             for name, net in nets.items() for path, layer in net.named_modules()
             if isinstance(layer, (torch.nn.Linear, common_nets.NoisyLinear, critics.EnsembleLinear))]
    stats = learner._train_step(learner.replay.sample(32, np.random.default_rng(0)))
    for h in hooks:
        h.remove()
    assert all(math.isfinite(v) for v in stats.values())
    lowered = {k for k, dtypes in seen.items() if torch.bfloat16 in dtypes}
    assert all(dtypes <= {torch.float32, torch.bfloat16} for dtypes in seen.values())
    if precision == "float32":
        assert not lowered
    else:  # in every network the update ran through, exactly the two layers between the three hidden ones
        ran = {k.split(".")[0] for k in seen}
        assert {k.split(".")[0] for k in lowered} == ran
        for net in ran:
            assert sum(k.startswith(net + ".") for k in lowered) == 2 * _count_mlps(nets[net]), net
    for module in nets.values():
        for param in module.parameters():
            assert param.dtype == torch.float32 and (param.grad is None or param.grad.dtype == torch.float32)
    with torch.no_grad():
        assert np.asarray(learner.act(np.eye(3, dtype=np.float32)[0])).dtype in (np.float32, np.int64)


def test_medium_precision_lowers_the_products_inside_updates_and_restores_the_setting() -> None:
    """``matmul_precision="medium"``: inside an update float32 products read bfloat16-rounded inputs (on a CPU
    with bfloat16 instructions; elsewhere they stay exact), the first layers' and heads' forwards stay exact,
    and the process's own setting is back afterwards, also after an update that raised."""
    from pbmarl.policies.neural import FullPrecisionLinear, bfloat16_products, lowered

    matmul = torch.backends.mkldnn.matmul
    before = matmul.fp32_precision
    torch.manual_seed(0)
    hidden, outer, x = torch.nn.Linear(64, 64), FullPrecisionLinear(64, 64), torch.randn(32, 64)
    with torch.no_grad():
        exact_hidden, exact_outer = hidden(x), outer(x)
        with bfloat16_products():
            assert lowered()
            low_hidden, low_outer = hidden(x), outer(x)
            assert lowered()  # the outer layer's exact forward handed the mode back
    assert not lowered() and matmul.fp32_precision == before
    assert torch.equal(low_outer, exact_outer)
    # whether this CPU's oneDNN lowers at all: bfloat16 inputs miss by ~1e-2 on these sums of 64 products,
    # another float32 kernel by ~1e-6 (an AMD EPYC with AVX512-BF16 does not lower under oneDNN 3.12)
    a, b = torch.randn(32, 64), torch.randn(64, 64)
    with bfloat16_products():
        low_product = a @ b
    if not torch.allclose(low_product, a @ b, atol=1e-3):
        assert not torch.allclose(low_hidden, exact_hidden, atol=1e-3)
        assert torch.allclose(low_hidden, exact_hidden, atol=0.05)  # bfloat16 inputs: about 3 significant digits
    else:
        assert torch.equal(low_hidden, exact_hidden)

    learner = TD3(BoxDMDP(), seed=0, matmul_precision="medium", **{**TINY, "hidden": (16, 16)})
    learner.config = dataclasses.replace(learner.config, learning_starts=10_000)
    learner.step()
    seen: list[bool] = []
    hook = learner.critics.register_forward_hook(lambda *_: seen.append(lowered()))
    batch = learner.replay.sample(32, np.random.default_rng(0))
    stats = learner._train_step(batch)
    hook.remove()
    assert seen and all(seen) and not lowered() and matmul.fp32_precision == before
    assert all(math.isfinite(v) for v in stats.values())
    for param in learner.critics.parameters():
        assert param.dtype == torch.float32 and param.grad is not None and param.grad.dtype == torch.float32
    with pytest.raises(RuntimeError):  # observations of the wrong width: the update raises inside the context
        learner._train_step(dataclasses.replace(batch, obs=batch.obs[:, :1]))
    assert not lowered() and matmul.fp32_precision == before


def _count_mlps(net: torch.nn.Module) -> int:
    """How many MLPs (Sequentials of Linear layers) a module holds; stacked twin critics count as one."""
    return max(1, sum(1 for m in net.modules() if isinstance(m, torch.nn.Sequential) and any(
        isinstance(c, torch.nn.Linear) for c in m.children())))


def test_hddpg_applies_the_smaller_rate_to_negative_td_errors_on_a_constructed_batch() -> None:
    # one state-action pair seen with returns +1 and -1: plain DDPG's critic settles on the mean 0,
    # the hysteretic one on the weighted fixed point inc * (1 - q) = dec * (q + 1): q = 0.9 / 1.1
    def fit(cls: type[DDPG], **extra: Any) -> float:
        learner = cls(BoxDMDP(), seed=0, lr=1e-2, hidden=(16,), **extra)
        obs = np.eye(3, dtype=np.float32)[0]
        batch = Batch(obs=np.stack([obs, obs]), legal_mask=np.ones((2, 1), bool),
                      action=np.array([[0.5], [0.5]], np.float32), reward=np.array([1.0, -1.0]),
                      done=np.array([True, True]), next_obs=np.zeros((2, 3), np.float32),
                      next_legal_mask=np.ones((2, 1), bool), weight=np.ones(2), index=np.array([0, 1]))
        with torch_threads(1):
            for _ in range(300):
                learner._update(batch)
        with torch.no_grad():
            return float(learner.critics.member(0, torch.as_tensor(obs)[None], torch.tensor([[0.5]]))[0])

    assert fit(DDPG) == pytest.approx(0.0, abs=0.05)
    assert fit(HDDPG, q_increase_rate=1.0, q_decrease_rate=0.1) == pytest.approx(0.9 / 1.1, abs=0.05)


def _comparable(learner: ControlLearner) -> Any:
    return learner.history.drop(columns=["wall_time", "time/round"])


@pytest.mark.parametrize("cls,game,extra", [
    (SAC, BoxDMDP, {}),
    (SAC, BoxDMDP, {"sde": True, "train_freq": 7, "gradient_steps": 3}),
    (DDPG, BoxDMDP, {"noise": "ornstein_uhlenbeck", "prioritized": True}),
    (Rainbow, lambda: "mdp:two_round_dmdp", {"v_min": 0.0, "v_max": 4.0, "atoms": 11}),
], ids=["sac", "sac-gsde", "ddpg-ou-per", "rainbow-nstep"])
def test_save_load_is_exact_and_resumed_training_identical(tmp_path: Any, cls: Any, game: Any, extra: dict) -> None:
    opts = {**TINY, "steps_per_round": 60, "learning_starts": 20, **extra}
    whole = cls(game(), seed=3, **opts)
    for _ in whole.run(4, progress=False):
        pass
    first = cls(game(), seed=3, **opts)
    for _ in first.run(2, progress=False):
        pass
    first.save(tmp_path / "run")
    resumed = cls.load(tmp_path / "run", game=game())
    for name, module in first._modules().items():  # the round trip is exact
        a, b = module.state_dict(), resumed._modules()[name].state_dict()
        if "state" in a:  # optimisers
            a, b = a["state"], b["state"]
            a = {f"{k}/{n}": t for k, d in a.items() for n, t in d.items()}
            b = {f"{k}/{n}": t for k, d in b.items() for n, t in d.items()}
        assert all(torch.equal(a[k], b[k]) for k in a), name
    assert len(resumed.replay) == len(first.replay)
    for _ in resumed.run(2, progress=False):
        pass
    assert _comparable(resumed).equals(_comparable(whole))
    for (name, m1), m2 in zip(whole._modules().items(), resumed._modules().values()):
        if isinstance(m1, torch.nn.Module):
            assert all(torch.equal(p, q) for p, q in zip(m1.parameters(), m2.parameters())), name


@pytest.mark.parametrize("n_step", [1, 3])
def test_a_run_stops_right_after_its_last_burst_even_mid_episode(n_step: int) -> None:
    """Budget 290 with bursts every 64 steps: the run ends at 320, after its fifth burst, whether or not an
    episode is running then; an n-step window left open there reaches the replay as a truncation."""
    opts = {**TINY, "budget": 290, "steps_per_round": 100, "learning_starts": 0, "train_freq": 64,
            "gradient_steps": 2, "n_step": n_step, "double": False, "dueling": False, "prioritized": False,
            "noisy": False, "distributional": False}
    learner = Rainbow("gym:CartPole-v1", seed=0, **opts)
    assert learner.stop_step == 320
    learner.run(progress=False)
    assert learner.env_steps == 320 and learner.updates == 5 * 2 and learner.done
    assert len(learner.replay) == 320  # every transition stored, the open window flushed
    assert int(learner.history["episodes"].iloc[-1]) == learner.episodes  # cumulative
    # every finished episode ended by termination, which marks its last n_step transitions (episodes are
    # tens of steps); the one running at step 320 was cut, and its last transition bootstraps
    assert int(learner.replay.done[:320].sum()) == n_step * learner.episodes
    assert not learner.replay.done[319] and learner.discount[319] > 0 and learner._window == []
    # the last round is whole episodes up to the budget, then on to 320: nothing past it
    assert int(learner.history["env_steps"].iloc[-1]) == 320
    # a round asked for after the budget runs steps_per_round more steps of whole episodes, from a reset
    rec = learner.step()
    assert rec.env_steps >= 420 and learner.updates > 10


def test_step_record_history_run_and_evaluate_leave_training_alone() -> None:
    a = SAC("mdp:two_round_dmdp", seed=1, **TINY)
    b = SAC("mdp:two_round_dmdp", seed=1, **TINY)
    rec = a.step()
    assert rec.env_steps >= 100 and rec.episodes >= 50 and math.isfinite(rec.loss) and rec.seconds > 0
    assert rec.iteration == 1 and rec.wall_time == rec.seconds and rec["loss/critic"] == rec.loss
    for deterministic in (False, True):  # must not consume the training random streams, nor the noise
        res = a.evaluate(3, deterministic=deterministic)
        assert list(res.mean.index) == [0] and res.episodes == 3
    rec = a.step()
    assert rec.iteration == 2 and rec.episodes >= 100 and rec.wall_time > rec.seconds  # cumulative
    b.step()
    b.step()
    assert _comparable(a).equals(_comparable(b))
    assert list(a.history.columns[:6]) == ["env_steps", "episodes", "wall_time", "return/0", "loss/critic",
                                           "loss/actor"] and len(a.history) == 2
    assert len(a.run(0)) == 0
    with pytest.raises(ValueError, match="steps must be a non-negative int"):
        a.run(-1)
    with pytest.raises(ValueError, match="episodes must be a positive int"):
        a.evaluate(0)


def test_policies_and_best_response() -> None:
    learner = SAC("gym:Pendulum-v1", seed=0, hidden=(16,), budget=200, steps_per_round=200, learning_starts=100,
                  batch_size=16)
    policy = learner.best_response(0, [None])
    assert isinstance(policy, pb.policies.GaussianPolicy)
    out = policy.act(np.zeros((2, 3), np.float32), rng=0, deterministic=True)
    assert out.action.shape == (2, 1) and np.all(np.abs(out.action) <= 2.0)
    ddpg = DDPG("gym:Pendulum-v1", seed=0, hidden=(16,))
    assert isinstance(ddpg.policy(), pb.policies.DeterministicPolicy)
    # Rainbow's greedy policy is a Policy that saves and loads like any other, and the learner is an Oracle
    rainbow = Rainbow("mdp:two_round_dmdp", seed=0, v_min=0.0, v_max=4.0, atoms=11, eval_episodes=2, budget=200,
                      **TINY)
    assert isinstance(rainbow, Oracle)
    answer = rainbow.respond(0, [None])
    assert answer.env_steps >= TINY["steps_per_round"] and answer.value == pytest.approx(
        rainbow.evaluate(2, deterministic=True).mean[0])
    greedy = answer.policy
    obs, mask = np.eye(3, dtype=np.float32), np.ones((3, 2), bool)
    expected = rainbow.q_values(rainbow.policy().net(torch.as_tensor(obs))).argmax(-1).numpy()
    assert greedy.action_probabilities(obs, mask).argmax(1).tolist() == expected.tolist()
    again = new_policy_from_state(rainbow.game, greedy.arrays(), greedy.meta())
    assert np.array_equal(again.action_probabilities(obs, mask), greedy.action_probabilities(obs, mask))


def test_bad_input_gets_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"DDPG needs Box actions; 'mdp:two_round_dmdp' has Discrete\(2\)"):
        DDPG("mdp:two_round_dmdp")
    with pytest.raises(ValueError, match="Rainbow needs Discrete actions.*try SAC, DDPG"):
        Rainbow("gym:Pendulum-v1")
    with pytest.raises(ValueError, match="budget must be a positive int, got 0"):
        SAC("gym:Pendulum-v1", budget=0)
    with pytest.raises(ValueError, match="lr must be a positive number, got -0.001"):
        TD3("gym:Pendulum-v1", lr=-1e-3)
    with pytest.raises(ValueError, match="tau must be a number in"):
        SAC("gym:Pendulum-v1", tau=float("nan"))
    with pytest.raises(ValueError, match="lr must be a positive number, got nan"):
        Rainbow("gym:CartPole-v1", lr=float("nan"))
    with pytest.raises(ValueError, match="v_min must be below v_max"):
        Rainbow("gym:CartPole-v1", v_min=1.0, v_max=1.0)
    with pytest.raises(ValueError, match=r"SAC trains one agent, or answers for one seat .*'kuhn_poker' \(2 players\) is neither"):
        SAC("kuhn_poker")
    with pytest.raises(TypeError, match="unknown option 'learning_rate'"):
        SAC("gym:Pendulum-v1", learning_rate=1e-3)
    # issue 48's probes
    with pytest.raises(ValueError, match="gradient_steps must be a positive int, got 0"):
        SAC("gym:Pendulum-v1", gradient_steps=0)
    with pytest.raises(ValueError, match=r"buffer_size \(8\) must be at least batch_size \(16\)"):
        SAC("gym:Pendulum-v1", buffer_size=8, batch_size=16)
    with pytest.raises(ValueError, match="buffer_size must be a positive int up to 100,000,000, got 10000000000"):
        SAC("gym:Pendulum-v1", buffer_size=10**10)
    with pytest.raises(ValueError, match=r"hidden must be a sequence of positive ints .*got \(0,\)"):
        SAC("gym:Pendulum-v1", hidden=(0,))
    with pytest.raises(ValueError, match="hidden must be a sequence of positive ints .*got '64'"):
        SAC("gym:Pendulum-v1", hidden="64")
    with pytest.raises(ValueError, match="SAC\\(sde=True\\) explores Box actions.*'mdp:two_round_dmdp' has Discrete"):
        SAC("mdp:two_round_dmdp", sde=True)
    with pytest.raises(ValueError, match=r"matmul_precision must be one of \('float32', 'bfloat16', 'medium'\), got 'float16'"):
        TD3("gym:Pendulum-v1", matmul_precision="float16")
    with pytest.raises(ValueError, match=r"sde_sample_freq must be -1 \(once per rollout\) or a positive int, got 0"):
        SAC("gym:Pendulum-v1", sde=True, sde_sample_freq=0)


@pytest.mark.parametrize("sample_freq", [-1, 5])
def test_sac_gsde_draws_its_noise_per_rollout_or_every_n_steps_and_per_update(sample_freq: int) -> None:
    """Acting keeps one gSDE noise matrix for `sde_sample_freq` env steps (-1: the `train_freq` steps of a
    rollout, SB3's -1); every gradient step draws its own."""
    learner = SAC(BoxDMDP(), seed=0, sde=True, sde_sample_freq=sample_freq, train_freq=8, gradient_steps=2,
                  **{**TINY, "learning_starts": 16, "steps_per_round": 60})
    acting: list[int] = []
    in_update = [0]
    draw, update = learner.gaussian.reset_noise, learner._update

    def spy_draw(generator: Any = None) -> None:
        if in_update[0]:
            in_update[0] += 1
        else:
            acting.append(learner.env_steps)
        draw(generator)

    def spy_update(batch: Batch) -> dict[str, float]:
        in_update[0] = 1
        try:
            return update(batch)
        finally:
            assert in_update[0] == 2, "one draw per gradient step"
            in_update[0] = 0

    learner.gaussian.reset_noise = spy_draw  # type: ignore[method-assign]
    learner._update = spy_update  # type: ignore[method-assign]
    learner.step()
    every = 8 if sample_freq == -1 else sample_freq
    assert learner.updates > 0 and learner.env_steps >= 60
    assert acting == [s for s in range(16, learner.env_steps) if s % every == 0]


def test_pbmarl_train_writes_a_run_folder_that_resume_continues(tmp_path: Any, capsys: Any) -> None:
    from pbmarl.cli import main
    from pbmarl.io import read_json

    out = tmp_path / "run"
    argv = ["train", "--game", "mdp:two_round_dmdp", "--algo", "sac", "--steps", "120", "--eval-episodes", "2",
            "--matmul-precision", "bfloat16", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    for name in ("train.json", "run.json", "history.csv", "learning_curve.png", "policy.npz", "policy.json",
                 "evaluation.json"):
        assert (out / name).exists(), name
    first = pd.read_csv(out / "history.csv")
    assert first["env_steps"].iloc[-1] >= 120
    assert main(["resume", str(out), "--steps", "60", "--quiet"]) == 0
    second = pd.read_csv(out / "history.csv")
    assert len(second) == len(first) + 1 and second["env_steps"].iloc[-1] >= first["env_steps"].iloc[-1] + 60
    assert main(["resume", str(out)]) == 0 and "is complete" in capsys.readouterr().out
    # the precision asked for is part of the learner's spec, so the resumed rounds kept it
    assert read_json(out / "run.json")["config"]["matmul_precision"] == "bfloat16"
    assert pb.load_run(out).config.matmul_precision == "bfloat16"
    assert main(["train", "--game", "gym:Pendulum-v1", "--algo", "rainbow", "--steps", "10",
                 "--out", str(tmp_path / "bad")]) == 2
    assert "Rainbow needs Discrete actions" in capsys.readouterr().err
    several = ["train", "--game", "pettingzoo:simple_adversary_v3(continuous_actions=True)", "--algo", "sac",
               "--steps", "10", "--out", str(tmp_path / "seats")]
    assert main(several) == 2 and not (tmp_path / "seats").exists()  # refused before any file is written
    assert "trains one agent, and 'pettingzoo:simple_adversary_v3" in capsys.readouterr().err


def test_dqn_burst_is_the_textbook_update_written_in_plain_torch() -> None:
    """The control benchmark's DQN (a Rainbow with every part off) against Stable-Baselines3's ``DQN.train``
    loop written out in plain torch: Huber loss on the replayed action's Q, target ``r + gamma * (1 - done) *
    max_a Q_target(s', a)``, gradient-norm clip, torch's own Adam, the target copied every
    ``target_update_interval`` updates. Same start, same minibatches: the same weights to float rounding,
    across two target syncs inside one burst."""
    import torch.nn.functional as F

    opts = {**TINY, "hidden": (32, 32), "batch_size": 16, "learning_starts": 10_000, "steps_per_round": 300,
            "target_update_interval": 4, "gamma": 0.99, "lr": 1e-2, "max_grad_norm": 0.5, "double": False,
            "dueling": False, "n_step": 1, "prioritized": False, "noisy": False, "distributional": False}
    learner = Rainbow("gym:CartPole-v1", seed=0, **opts)
    learner.step()  # random play fills the replay; no update yet
    assert learner.updates == 0 and len(learner.replay) >= 300
    def linears(net: Any) -> list[torch.nn.Linear]:
        return [m for m in net.torso if isinstance(m, torch.nn.Linear)] + [net.advantage]

    layers = linears(learner.net)
    reference = torch.nn.Sequential(*(torch.nn.Sequential(torch.nn.Linear(m.in_features, m.out_features))
                                      for m in layers))
    with torch.no_grad():
        for mine, theirs in zip(layers, reference):
            theirs[0].weight.copy_(mine.weight)
            theirs[0].bias.copy_(mine.bias)

    def q(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        for i, block in enumerate(model):
            x = block(x) if i == len(model) - 1 else torch.relu(block(x))
        return x

    target = copy.deepcopy(reference)
    adam = torch.optim.Adam(reference.parameters(), lr=1e-2, eps=1e-8, foreach=False)
    n = 10
    index = np.random.default_rng(5).integers(len(learner.replay), size=(n, 16))
    replay = learner.replay
    for rows in index:
        obs, nxt = torch.from_numpy(replay.obs[rows]), torch.from_numpy(replay.next_obs[rows])
        act = torch.from_numpy(replay.action[rows]).long()
        reward = torch.from_numpy(replay.reward[rows]).float()
        done = torch.from_numpy(replay.done[rows]).float()
        with torch.no_grad():
            y = reward + 0.99 * (1 - done) * q(target, nxt).max(dim=1).values
        loss = F.smooth_l1_loss(q(reference, obs).gather(1, act[:, None]).squeeze(1), y)
        adam.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
        adam.step()
        if (adam.state[next(reference.parameters())]["step"]) % 4 == 0:
            target.load_state_dict(reference.state_dict())

    class Drawn:  # the burst draws its n minibatches at once; hand it the ones above
        def integers(self, high: int, size: tuple[int, int]) -> np.ndarray:
            assert high == len(replay) and tuple(size) == index.shape
            return index

    start = layers[0].weight.detach().clone()
    learner.rng = Drawn()  # type: ignore[assignment]
    learner._burst(n, {})
    assert learner.updates == n
    for mine, theirs in zip(layers, reference):
        moved = (theirs[0].weight - mine.weight.detach()).abs().max()
        assert torch.allclose(mine.weight, theirs[0].weight, atol=1e-5), float(moved)
        assert torch.allclose(mine.bias, theirs[0].bias, atol=1e-5)
    assert (layers[0].weight - start).abs().max() > 1e-2  # the burst moved the weights
    # the target network was last copied after update 8, as the reference's
    target_layers = linears(learner.target)
    for mine, theirs in zip(target_layers, target):
        assert torch.allclose(mine.weight, theirs[0].weight, atol=1e-5)
    assert not torch.allclose(target_layers[0].weight, layers[0].weight, atol=1e-4)


def _fingerprint(learner: ControlLearner) -> dict[str, Any]:
    """Everything a round may change, copied: replay rows (and priorities, tree, discounts), networks,
    optimisers, generators, counters and records."""
    replay = learner.replay
    out: dict[str, Any] = {f"replay/{k}": np.array(v) for k, v in replay.state_arrays().items()}
    out.update({f"column/{k}": v[: len(replay)].copy() for k, v in replay.columns.items()})
    if hasattr(replay, "_tree"):
        out["tree"] = replay._tree.copy()
    for name, module in learner._modules().items():
        state = module.state_dict()
        if "state" in state:  # an optimiser
            state = {f"{k}/{n}": t for k, d in state["state"].items() for n, t in d.items()}
        out.update({f"{name}/{k}": v.detach().clone() for k, v in state.items() if isinstance(v, torch.Tensor)})
    out.update({f"extra/{k}": np.array(v) for k, v in learner._extra_arrays().items()})
    out["counters"] = (learner.env_steps, learner.updates, learner.episodes, learner.wall_time, len(learner.records))
    out["rng"] = str(learner.rng.bit_generator.state)
    out["gen"] = learner.gen.get_state().clone()
    return out


def _assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], torch.Tensor):
            assert torch.equal(a[k], b[k]), k
        elif isinstance(a[k], np.ndarray):
            assert np.array_equal(a[k], b[k]), k
        else:
            assert a[k] == b[k], k


def _lines_of_step(learner: ControlLearner, stop_at: int = -1) -> int:
    """Run `learner.step()` under a trace that raises KeyboardInterrupt at pbmarl's `stop_at`-th line
    (as a Ctrl-C would); returns how many lines it ran."""
    import sys

    from interrupts import interrupt_at

    trace = interrupt_at(stop_at)
    sys.settrace(trace)
    try:
        learner.step()
    finally:
        sys.settrace(None)
    return int(trace.seen[0])  # type: ignore[attr-defined]


SMALL_RING = {"hidden": (8,), "batch_size": 8, "buffer_size": 48, "steps_per_round": 40, "learning_starts": 20,
              "budget": 10_000}


@pytest.mark.parametrize("make", [
    lambda: SAC("gym:Pendulum-v1", seed=0, **{**SMALL_RING, "steps_per_round": 1}),
    lambda: DDPG("gym:Pendulum-v1", seed=0, noise="ornstein_uhlenbeck", prioritized=True,
                 **{**SMALL_RING, "steps_per_round": 1}),
    lambda: Rainbow("gym:CartPole-v1", seed=0, n_step=3, target_update_interval=10, **SMALL_RING),
], ids=["sac", "ddpg-ou-per", "rainbow-nstep-per-noisy"])
def test_an_interrupted_round_changes_nothing_and_the_next_is_the_one_it_would_have_been(make: Any) -> None:
    """Issue 48: a Ctrl-C at any line of a round left env steps, updates, replay and networks changed without a
    record. The replay here is full (every round overwrites rows, priorities and discounts); interrupted at
    eight points of a round, the learner is as before each time, and its next round is the twin's."""
    learner, twin, probe = make(), make(), make()
    for lr in (learner, twin, probe):
        lr.step()
        lr.step()
    assert len(learner.replay) == learner.replay.capacity
    total = _lines_of_step(probe)
    for k in range(1, 9):
        before = _fingerprint(learner)
        with pytest.raises(KeyboardInterrupt):
            _lines_of_step(learner, stop_at=total * k // 9)
        _assert_same(_fingerprint(learner), before)
    learner.step()
    twin.step()
    assert _comparable(learner).equals(_comparable(twin))
    _assert_same({k: v for k, v in _fingerprint(learner).items() if k != "counters"},
                 {k: v for k, v in _fingerprint(twin).items() if k != "counters"})


def test_evaluating_changes_nothing_even_for_exploring_noisy_learners() -> None:
    for make in (lambda: DDPG("gym:Pendulum-v1", seed=0, noise="ornstein_uhlenbeck", **SMALL_RING),
                 lambda: Rainbow("gym:CartPole-v1", seed=0, **SMALL_RING)):
        learner = make()
        learner.step()
        before = _fingerprint(learner)
        first = learner.evaluate(3, seed=2)
        _assert_same(_fingerprint(learner), before)
        assert np.array_equal(first.mean, learner.evaluate(3, seed=2).mean)


def test_a_refused_load_builds_nothing(tmp_path: Any) -> None:
    """Issue 48: a refused load left the networks replaced but the counters and buffer old. Loading builds a
    fresh learner, so a folder that does not fit it is refused and nothing half-loaded exists."""
    from pbmarl.io import read_json, write_json
    from pbmarl.runs import RunFolderError

    learner = SAC("gym:Pendulum-v1", seed=0, **SMALL_RING)
    learner.step()
    learner.save(tmp_path / "run")
    meta = read_json(tmp_path / "run" / "run.json")
    meta["config"]["hidden"] = [4]  # networks of another shape than the saved ones
    write_json(tmp_path / "run" / "run.json", meta)
    with pytest.raises(RunFolderError, match="does not fit a SAC built from its config"):
        SAC.load(tmp_path / "run")
    meta["config"]["hidden"] = [8]
    write_json(tmp_path / "run" / "run.json", meta)
    loaded = pb.load_run(tmp_path / "run")
    assert loaded.env_steps == learner.env_steps and loaded.history.equals(learner.history)
