"""PPO self-play and deep MMD (pbmarl.algorithms.selfplay) and MMD's RL loss (pbmarl.rl.magnetic)."""

from __future__ import annotations

import pytest
import torch

import pbmarl as pb
from pbmarl.algorithms.selfplay.ppo import PRESETS
from pbmarl.rl.magnetic import magnetic_policy_loss, masked_kl

SMALL = dict(steps_per_round=512, hidden=(32,), num_envs=8)


def test_masked_kl_ignores_illegal_actions_and_is_zero_only_at_equality() -> None:
    legal = torch.tensor([[True, True, False]])
    p = torch.log(torch.tensor([[0.25, 0.75, 1e-30]]))
    q = torch.log(torch.tensor([[0.5, 0.5, 0.9]]))
    expected = 0.25 * torch.log(torch.tensor(0.5)) + 0.75 * torch.log(torch.tensor(1.5))
    assert float(masked_kl(p, q, legal)) == pytest.approx(float(expected), rel=1e-6)
    assert float(masked_kl(p, p, legal)) == 0.0


def test_the_magnetic_loss_pulls_towards_the_magnet() -> None:
    legal = torch.ones(1, 2, dtype=torch.bool)
    logits = torch.zeros(1, 2, requires_grad=True)
    magnet = torch.log(torch.tensor([[0.9, 0.1]]))
    for _ in range(200):  # no advantage: only the KL terms move the policy
        logp_all = torch.log_softmax(logits, dim=-1)
        old = logp_all.detach()
        loss = magnetic_policy_loss(torch.zeros(1), logp_all[:, 0], logp_all, old[:, 0], old, magnet, legal,
                                    alpha=1.0, stepsize=1.0, clip=None)
        loss.backward()
        with torch.no_grad():
            logits -= 0.5 * logits.grad
            logits.grad.zero_()
    assert torch.softmax(logits, -1)[0, 0].item() == pytest.approx(0.9, abs=0.01)


@pytest.mark.parametrize("cls, options", [(pb.PPOSelfPlay, {}), (pb.DeepMMD, {"magnet_every": 5, "clip_coef": 0.2})])
def test_self_play_lowers_exact_exploitability_on_kuhn(cls: type, options: dict) -> None:
    with cls("kuhn_poker", seed=0, **SMALL, **options) as run:
        records = run.run(25, progress=False)
    first, last = records[0].exploitability, min(r.exploitability for r in records[-5:])
    assert first > 0.3 and last < 0.75 * first   # uniform-ish 0.41 at the start


def test_one_actor_per_seat_when_not_shared() -> None:
    run = pb.PPOSelfPlay("kuhn_poker", seed=0, shared=False, **SMALL)
    assert len(run.actors) == 2 and run.actor_of(0) is not run.actor_of(1)
    run.step()
    assert run.history["loss/policy"].notna().all()


def test_the_iig_preset_is_the_papers_setting_and_options_override_it() -> None:
    run = pb.PPOSelfPlay("kuhn_poker", preset="iig_liars_dice", eval_every=0)
    assert (run.config.lr, run.config.clip_coef, run.config.ent_coef, run.config.epochs, run.config.minibatches,
            run.config.vf_coef, run.config.steps_per_round) == (6.25e-5, 0.025, 0.1, 8, 1, 0.0625, 2048)
    assert pb.PPOSelfPlay("kuhn_poker", preset="iig_liars_dice", lr=1e-3).config.lr == 1e-3
    assert set(PRESETS) == {"iig_liars_dice"}
    with pytest.raises(ValueError, match="did you mean 'iig_liars_dice'"):
        pb.PPOSelfPlay("kuhn_poker", preset="iig_liars_dic")


def test_deep_mmd_iig_preset_is_the_papers_mmd_setting() -> None:
    # best_hyperparameters/min_final_expl_hparams/mmd/liars_dice: ent_coef 0.1 -> alpha (uniform magnet),
    # kl_coef 0.025 -> stepsize 1/0.025, clip 0.025, constant schedules
    cfg = pb.DeepMMD("kuhn_poker", preset="iig_liars_dice", eval_every=0).config
    assert (cfg.alpha, cfg.stepsize, cfg.clip_coef, cfg.lr, cfg.epochs, cfg.minibatches, cfg.vf_coef,
            cfg.steps_per_round, cfg.num_envs) == (0.1, 40.0, 0.025, 6.25e-5, 8, 1, 0.0625, 2048, 8)
    assert cfg.alpha_final is None and cfg.stepsize_final is None and cfg.magnet_every is None
    assert pb.DeepMMD("kuhn_poker", preset="iig_liars_dice", alpha=0.05).config.alpha == 0.05
    with pytest.raises(ValueError, match="unknown preset 'iig_leduc' for DeepMMD"):
        pb.DeepMMD("kuhn_poker", preset="iig_leduc")


def test_deep_mmd_schedules_reach_their_final_values() -> None:
    run = pb.DeepMMD("kuhn_poker", seed=0, alpha=0.2, alpha_final=0.0, stepsize=1.0, stepsize_final=0.5,
                     budget=2048, eval_every=0, **SMALL)
    run.run(progress=False)
    h = run.history
    assert h["alpha"].iloc[0] == pytest.approx(0.2) and h["alpha"].is_monotonic_decreasing
    assert h["stepsize"].iloc[-1] < 1.0 and run.done
