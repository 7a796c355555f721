"""The maths of the control learners, each checked on its own against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pbmarl.learners.common.buffers import PrioritizedReplayBuffer, ReplayBuffer
from pbmarl.learners.common.nets import NoisyLinear, RainbowNet, frozen
from pbmarl.torchutil import clip_grad_norm, flush_denormals

# -- C51 projection ------------------------------------------------------------------


# -- n-step returns --------------------------------------------------------------------


# -- prioritised replay ------------------------------------------------------------------
def _filled(buf: ReplayBuffer, n: int) -> None:
    for i in range(n):
        buf.append(np.full(2, i, np.float32), i % 3, float(i), False, np.zeros(2, np.float32))


def test_prioritized_probabilities_and_importance_weights() -> None:
    buf = PrioritizedReplayBuffer(16, (2,), 1, alpha=0.7, beta=0.5, eps=0.0)
    _filled(buf, 4)
    buf.update_priorities(np.arange(4), np.array([1.0, -2.0, 3.0, 4.0]))  # |td| is the priority
    expected = np.array([1.0, 2.0, 3.0, 4.0]) ** 0.7
    expected /= expected.sum()
    assert np.allclose(buf.probabilities(), expected)
    rng = np.random.default_rng(0)
    batch = buf.sample(40_000, rng)
    freq = np.bincount(batch.index, minlength=4) / 40_000
    assert np.allclose(freq, expected, atol=0.01)
    w = (4 * expected[batch.index]) ** -0.5
    assert np.allclose(batch.weight, w / w.max())
    assert batch.weight.max() == pytest.approx(1.0)
    # new transitions enter with the largest priority seen
    _filled(buf, 1)
    assert buf.priority[4] == pytest.approx(4.0)


def test_prioritized_sum_tree_draws_what_the_cumulative_sum_draws_through_wraparound_and_reload() -> None:
    rng = np.random.default_rng(3)
    buf = PrioritizedReplayBuffer(37, (2,), 1, alpha=0.6, beta=0.4)  # not a power of two: padded leaves stay 0
    for step in range(200):  # appends past capacity (overwrites), batched priority updates with repeats
        _filled(buf, 1)
        if step % 7 == 0 and len(buf) > 3:
            index = rng.integers(len(buf), size=5)
            buf.update_priorities(np.r_[index, index[:1]], rng.normal(size=6) * 3)
    scaled = buf.priority[: len(buf)] ** buf.alpha
    assert buf._tree[1] == pytest.approx(scaled.sum(), rel=1e-12)  # the root holds the total mass
    batch = buf.sample(5000, np.random.default_rng(11))
    u = np.random.default_rng(11).random(5000) * buf._tree[1]
    expected = np.searchsorted(np.cumsum(scaled), u, side="right")  # the O(capacity) draw
    assert np.mean(batch.index == np.minimum(expected, len(buf) - 1)) > 0.999  # (ties at float rounding aside)
    other = PrioritizedReplayBuffer(37, (2,), 1, alpha=0.6, beta=0.4)
    other.load_state_arrays(buf.state_arrays())
    np.testing.assert_allclose(other._tree, buf._tree, rtol=1e-12)
    again = other.sample(64, np.random.default_rng(5))
    assert np.array_equal(again.index, buf.sample(64, np.random.default_rng(5)).index)


def test_uniform_buffer_box_actions_round_trip() -> None:
    buf = ReplayBuffer(3, (2,), 1, action_shape=(2,), action_dtype=np.float32)
    for i in range(5):
        buf.append(np.full(2, i, np.float32), np.array([i, -i], np.float32), float(i), i == 4, np.zeros(2))
    assert len(buf) == 3 and sorted(buf.reward.tolist()) == [2.0, 3.0, 4.0]
    other = ReplayBuffer(3, (2,), 1, action_shape=(2,), action_dtype=np.float32)
    other.load_state_arrays(buf.state_arrays())
    assert np.array_equal(other.action, buf.action) and other.pos == buf.pos


# -- networks ------------------------------------------------------------------------
def test_noisy_layer_deterministic_in_eval_mode_and_noisy_in_training() -> None:
    torch.manual_seed(0)
    layer = NoisyLinear(4, 3)
    gen = torch.Generator().manual_seed(1)
    layer.reset_noise(gen)
    x = torch.randn(5, 4)
    train_a = layer(x)
    layer.reset_noise(gen)
    assert not torch.allclose(train_a, layer(x))
    layer.eval()
    a = layer(x)
    layer.reset_noise(gen)
    assert torch.equal(a, layer(x))
    assert torch.allclose(a, x @ layer.weight_mu.T + layer.bias_mu)


def test_dueling_heads_average_advantage_out() -> None:
    torch.manual_seed(0)
    net = RainbowNet(3, (8,), 4, atoms=1, dueling=True)
    x = torch.randn(6, 3)
    h = net.torso(x)
    adv = net.advantage(h)
    assert net.value is not None
    assert torch.allclose(net(x)[..., 0], net.value(h) + adv - adv.mean(1, keepdim=True), atol=1e-6)


def test_frozen_accepts_a_parameter_list_and_restores_only_what_it_froze() -> None:
    net = torch.nn.Linear(2, 2)
    net.bias.requires_grad_(False)
    with frozen(list(net.parameters())):
        assert not net.weight.requires_grad
    assert net.weight.requires_grad and not net.bias.requires_grad


# -- hysteretic loss ------------------------------------------------------------------


def _adam_run(make_opt, *, steps: int = 30, switch_at: int | None = None):
    """Train a small net with an optimiser from `make_opt`; at `switch_at`, move the state into a fresh one."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2), torch.nn.Linear(2, 2))
    x = torch.randn(16, 4)
    opt = make_opt(net.parameters())
    for i in range(steps):
        if i == 10:
            opt.param_groups[0]["lr"] = 3e-3          # a schedule's change is read on the next step
        if switch_at is not None and i == switch_at:
            state = opt.state_dict()
            opt = make_opt(net.parameters())
            opt.load_state_dict(state)
        frozen_head = 12 <= i < 15                     # a parameter without a gradient: torch's own step
        net[3].requires_grad_(not frozen_head)
        opt.zero_grad()
        net(x + i).pow(2).mean().backward()
        opt.step()
    return [p.detach().clone() for p in net.parameters()], opt


@pytest.mark.parametrize("max_norm", [0.05, 1e6])  # clipped, and left alone
def test_clip_grad_norm_gives_torchs_bits(max_norm: float) -> None:
    def grads(dtype: torch.dtype = torch.float32) -> list[torch.nn.Parameter]:
        gen = torch.Generator().manual_seed(3)
        params = [torch.nn.Parameter(torch.zeros(shape, dtype=dtype)) for shape in [(256, 4), (256,), (2, 256), (7,)]]
        for p in params[:3]:  # the last has no gradient
            p.grad = torch.randn(p.shape, generator=gen, dtype=dtype)
        return params

    ours, theirs = grads(), grads()
    total = clip_grad_norm(iter(ours), max_norm)  # an iterator, as .parameters() gives
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    assert torch.equal(total, expected)
    for a, b in zip(ours, theirs):
        assert (a.grad is None and b.grad is None) or torch.equal(a.grad, b.grad)
    if max_norm < 1:
        assert float(torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in ours[:3]]))) == pytest.approx(max_norm)
    mixed, reference = grads() + grads(torch.float64)[:1], grads() + grads(torch.float64)[:1]  # torch's own path
    assert torch.equal(clip_grad_norm(mixed, max_norm), torch.nn.utils.clip_grad_norm_(reference, max_norm))
    assert all((a.grad is None and b.grad is None) or torch.equal(a.grad, b.grad) for a, b in zip(mixed, reference))
    assert float(clip_grad_norm([torch.nn.Parameter(torch.zeros(3))], 1.0)) == 0.0   # no gradient at all


def test_flush_denormals_nests_and_restores_even_on_an_error() -> None:
    def subnormal() -> float:
        return torch.tensor([1e-39]).item()   # a float32 subnormal: kept, or read as zero

    assert subnormal() > 0
    with flush_denormals():
        assert subnormal() == 0.0
        with flush_denormals():
            assert subnormal() == 0.0
        assert subnormal() == 0.0            # the inner block's end does not switch it off
    assert subnormal() > 0
    with pytest.raises(KeyboardInterrupt), flush_denormals():
        raise KeyboardInterrupt
    assert subnormal() > 0
    big = torch.full((64,), 1e-20)
    with flush_denormals():                  # what Adam's square root sees: 1e-40 is read as 0
        assert float((big * big).sqrt().max()) == 0.0
    assert float((big * big).sqrt().max()) > 0


def test_lean_adam_equals_torchs_fused_adam_through_schedules_reloads_and_missing_gradients() -> None:
    from pbmarl.learners.common.nets import LeanAdam

    def torch_adam(params):
        return torch.optim.Adam(params, lr=1e-2, eps=1e-5, fused=True)

    def lean(params):
        return LeanAdam(params, lr=1e-2, eps=1e-5)

    reference, ref_opt = _adam_run(torch_adam)
    for switch in (None, 5, 20):
        params, opt = _adam_run(lean, switch_at=switch)
        assert all(torch.equal(p, q) for p, q in zip(reference, params)), switch
        assert opt._lists is not None                  # the direct kernel call did run
        ref_state, state = ref_opt.state_dict()["state"], opt.state_dict()["state"]
        assert all(torch.equal(ref_state[k][n], state[k][n]) for k in ref_state for n in ("exp_avg", "exp_avg_sq", "step"))
    # step hooks still run: with one registered, every step takes torch's path
    calls: list[int] = []
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 1)
    opt = LeanAdam(net.parameters(), lr=1e-2)
    opt.register_step_post_hook(lambda *_: calls.append(1))
    for _ in range(3):
        opt.zero_grad()
        net(torch.ones(2, 3)).sum().backward()
        opt.step()
    assert len(calls) == 3


@pytest.mark.parametrize("options", [{}, {"n_step": 3, "dueling": True, "distributional": True, "v_min": 0.0,
                                          "v_max": 100.0, "matmul_precision": "bfloat16"}])
def test_rainbow_burst_batches_the_targets_and_gives_the_bits_of_one_update_at_a_time(options: dict) -> None:
    """Without double Q, noisy nets or priorities, a burst of updates draws its minibatches at once and the
    target network values them in one pass per target sync (48 updates, a sync every 32: two passes in the
    first burst). Weights, losses and the random state equal those of one update at a time, bit for bit."""
    import pbmarl as pb
    from pbmarl.learners.control.base import ControlLearner

    config = dict(hidden=(32, 32), batch_size=16, learning_starts=200, train_freq=64, gradient_steps=48,
                  target_update_interval=32, double=False, noisy=False, prioritized=False, distributional=False,
                  n_step=1, dueling=False)
    runs, passes = [], []
    for batched in (True, False):
        learner = pb.Rainbow(pb.load_game("gym:CartPole-v1"), seed=3, budget=700, steps_per_round=700,
                             **{**config, **options})
        if not batched:  # the plain loop: `_sample` and `_update` once per update
            learner._burst = lambda n, losses, lr=learner: ControlLearner._burst(lr, n, losses)  # type: ignore[method-assign]
        calls = []
        td_target = learner._td_target
        learner._td_target = lambda *a, f=td_target, c=calls: c.append(len(a[0])) or f(*a)  # type: ignore[method-assign]
        learner.run(progress=False)
        runs.append((learner, learner.history))
        passes.append(calls)
    (fast, fast_history), (plain, plain_history) = runs
    assert fast.updates == plain.updates >= 7 * 48               # bursts from env step 256, every 64
    assert passes[0][:2] == [32 * 16, 16 * 16] and len(passes[0]) < len(passes[1]) == fast.updates
    assert all(torch.equal(a, b) for a, b in zip(fast.net.state_dict().values(), plain.net.state_dict().values()))
    assert all(torch.equal(a, b) for a, b in zip(fast.target.state_dict().values(), plain.target.state_dict().values()))
    assert fast_history["loss/td"].tolist() == plain_history["loss/td"].tolist()
    assert fast.rng.bit_generator.state == plain.rng.bit_generator.state


@pytest.mark.parametrize("options", [{"dueling": False, "distributional": False},
                                     {"dueling": True, "distributional": True, "v_min": 0.0, "v_max": 50.0}])
def test_rainbow_explores_with_a_numpy_copy_that_follows_every_weight_change(tmp_path, options: dict) -> None:
    """Epsilon-greedy acting reads Q from numpy copies of the weights: the torch network's Q (to float
    rounding) and its argmax, retaken after an optimiser step and after a load."""
    import pbmarl as pb
    from pbmarl.learners.control.base import ControlLearner

    game = pb.load_game("gym:CartPole-v1")
    make = lambda: pb.Rainbow(game, seed=1, noisy=False, prioritized=False, hidden=(16, 16), budget=600,  # noqa: E731
                              learning_starts=100, train_freq=50, gradient_steps=5, epsilon_end=0.0,
                              exploration_fraction=1e-9, **options)
    learner = make()
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)

    def check(lr: pb.Rainbow) -> np.ndarray:
        with torch.no_grad():
            q = lr.q_values(lr.net(torch.as_tensor(obs))).numpy()
        mine = np.stack([lr._numpy_q(o) for o in obs])
        np.testing.assert_allclose(mine, q, rtol=1e-5, atol=1e-5)
        steps, lr.env_steps = lr.env_steps, lr.config.budget  # epsilon at its end, 0: the greedy action
        plain = [int(ControlLearner._explore(lr, o)) for o in obs]
        assert [lr._explore(o) for o in obs] == plain == q.argmax(axis=1).tolist()
        lr.env_steps = steps
        return mine

    before = check(learner)
    learner.run(progress=False)
    assert learner.updates > 0
    after = check(learner)
    assert not np.allclose(before, after)  # the copy was retaken
    learner.save(tmp_path / "run")
    check(make())
    loaded = pb.Rainbow.load(tmp_path / "run")
    np.testing.assert_array_equal(check(loaded), after)
