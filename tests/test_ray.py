"""RolloutPool on Ray: same results as local, lost workers, policy shipping, init_ray, a two-node cluster."""

import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pbmarl as pb

pytestmark = pytest.mark.ray
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def leduc():
    return pb.load_game("leduc_poker")


@pytest.fixture(scope="module")
def population(leduc):
    pop = pb.Population(leduc)
    for p in range(2):
        pop.add(p, pb.RandomPolicy(leduc))
        pop.add(p, pb.MLPPolicy(leduc, hidden=(32,), seed=p))
        pop.add(p, pb.TabularPolicy.random(leduc, seed=p))
    return pop


@pytest.fixture(scope="module")
def ray_pool(ray_session, leduc):
    with pb.RolloutPool(leduc, num_workers=2, backend="ray", seed=0, unit_episodes=1_000) as pool:
        yield pool


def _local_table(game, pop, *, seed, episodes=3_000):
    table = pb.PayoffTable(pop)
    with pb.RolloutPool(game, seed=0, unit_episodes=1_000) as pool:
        pool.fill(table, episodes=episodes, seed=seed)
    return table


def _snapshot(table):
    return table.values.copy(), table.counts.copy()


def _wrap_results(pool, action):
    """Run `action(n)` in the driver as the n-th unit result of the next call arrives."""
    backend = pool._backend
    original = backend.run

    def run(units, policies, on_result):
        seen = [0]

        def hooked(result):
            seen[0] += 1
            action(seen[0])
            on_result(result)

        try:
            return original(units, policies, hooked)
        finally:
            backend.run = original

    backend.run = run


def test_ray_gives_the_same_payoffs_as_local(ray_pool, leduc, population):
    expected = _local_table(leduc, population, seed=7)
    table = pb.PayoffTable(population)
    ray_pool.fill(table, episodes=3_000, seed=7)
    np.testing.assert_array_equal(table.counts, expected.counts)
    np.testing.assert_allclose(table.values, expected.values, rtol=0, atol=1e-12)
    profile = [population[0][1], pb.Mixture(population[1], [0.2, 0.3, 0.5])]
    with pb.RolloutPool(leduc, seed=0, unit_episodes=1_000) as local:
        a = local.evaluate(profile, 5_000, seed=3)
    b = ray_pool.evaluate(profile, 5_000, seed=3)
    np.testing.assert_allclose(a.mean, b.mean, rtol=0, atol=1e-12)
    assert a.steps == b.steps


def test_a_worker_dying_after_some_units_loses_nothing(ray_pool, leduc, population):
    expected = _local_table(leduc, population, seed=11)
    ray_pool._backend.actors[0].call("crash_after", 2)
    before = ray_pool._backend.replacements
    table = pb.PayoffTable(population)
    rec = ray_pool.fill(table, episodes=3_000, seed=11)
    assert ray_pool._backend.replacements == before + 1
    np.testing.assert_array_equal(table.counts, np.full((3, 3), 3_000))
    assert rec.episodes == 9 * 3_000
    np.testing.assert_allclose(table.values, expected.values, rtol=0, atol=1e-12)


def test_killing_an_actor_mid_fill_loses_nothing(ray_pool, leduc, population):
    import ray

    expected = _local_table(leduc, population, seed=12)
    before = ray_pool._backend.replacements
    victim = ray_pool._backend.actors[1].actor
    _wrap_results(ray_pool, lambda n: ray.kill(victim) if n == 3 else None)
    table = pb.PayoffTable(population)
    ray_pool.fill(table, episodes=3_000, seed=12)
    assert ray_pool._backend.replacements == before + 1
    np.testing.assert_array_equal(table.counts, np.full((3, 3), 3_000))
    np.testing.assert_allclose(table.values, expected.values, rtol=0, atol=1e-12)


def test_interrupted_ray_fill_leaves_the_table_unchanged(ray_pool, leduc, population):
    table = pb.PayoffTable(population)
    ray_pool.fill(table, episodes=500, seed=1)
    pop_size = population.sizes
    before = _snapshot(table)

    def interrupt(n):
        if n == 4:
            raise KeyboardInterrupt

    _wrap_results(ray_pool, interrupt)
    with pytest.raises(KeyboardInterrupt):
        ray_pool.fill(table, episodes=500, until_stderr=0.001, max_episodes=5_000, seed=2)
    after = _snapshot(table)
    for x, y in zip(before, after):
        np.testing.assert_array_equal(x, y)
    assert population.sizes == pop_size
    assert ray_pool.evaluate([population[0][0], population[1][0]], 100).episodes == 100  # still usable


def test_policies_travel_once_per_version(ray_pool, leduc):
    backend = ray_pool._backend
    shipped = []
    original = backend._shipments

    def spy(w, unit, policies):
        out = original(w, unit, policies)
        shipped.extend((token, version) for token, version, _, _ in out)
        return out

    backend._shipments = spy
    try:
        pi = pb.MLPPolicy(leduc, hidden=(16,), seed=5)
        profile = [pi, pb.RandomPolicy(leduc)]
        replaced = backend.replacements
        ray_pool.evaluate(profile, 8_000)
        first = list(shipped)
        # at most once per actor; an actor that replaced a dead one (Ray cancels an actor's queued tasks after a
        # 30 s RPC wait on a loaded machine) is a new actor and gets both policies again
        assert 1 <= len(first) <= 2 * (len(backend.actors) + backend.replacements - replaced)
        replaced = backend.replacements
        ray_pool.evaluate(profile, 8_000)
        again = shipped[len(first):]
        if backend.replacements == replaced:
            assert shipped == first  # nothing travels twice to the same actor
        else:  # only to the replacements, and only what the first call shipped
            assert len(again) <= 2 * (backend.replacements - replaced) and all(s in first for s in again)
        import torch

        with torch.no_grad():
            for param in pi.net.parameters():
                param.add_(0.5)
        pi.version += 1
        res = ray_pool.evaluate(profile, 4_000, seed=1)
        assert any(v == pi.version for _, v in shipped[len(first):])
    finally:
        backend._shipments = original
    with pb.RolloutPool(leduc, seed=0, unit_episodes=1_000) as local:
        np.testing.assert_allclose(local.evaluate(profile, 4_000, seed=1).mean, res.mean, atol=1e-12)


def test_worker_errors_reach_the_caller_and_change_nothing(ray_pool, leduc):
    class Unshippable(pb.RandomPolicy):
        kind = "test_unshippable"  # registered here, unknown in the worker processes

    pop = pb.Population(leduc)
    pop.add(0, pb.RandomPolicy(leduc))
    pop.add(1, pb.RandomPolicy(leduc))
    table = pb.PayoffTable(pop)
    ray_pool.fill(table, episodes=200, seed=0)
    pop.add(0, Unshippable(leduc))
    before = _snapshot(table)
    with pytest.raises(ValueError, match="unknown policy kind 'test_unshippable'"):
        ray_pool.fill(table, episodes=200)
    after = _snapshot(table)
    for x, y in zip(before, after):
        np.testing.assert_array_equal(x, y)
    assert after[1][1, 0] == 0 and np.isnan(after[0][1, 0]).all()


def test_a_pool_that_does_not_fit_says_so(ray_pool, leduc):
    with pytest.raises(ValueError, match="need 2 CPUs, but Ray has 0 of 2 free"):
        pb.RolloutPool(leduc, num_workers=2, backend="ray")


def test_init_ray_is_idempotent(ray_session):
    from pbmarl.hosting import init_ray

    first = init_ray()
    assert init_ray() is first
    assert init_ray(address="auto") is first
    with pytest.raises(ValueError, match="already connected"):
        init_ray(address="10.255.255.1:6379")


def _python(script, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_a_cluster_that_does_not_answer_fails_fast():
    """A closed port, and a TCP server that is not a Ray GCS (a proxy, another service): init_ray says which,
    instead of Ray's own 'Failed to connect' after its ~20 s window (the probe includes gRPC's handshake)."""
    proc = _python("""
        import socket, threading
        import pbmarl as pb
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()  # a closed port
        server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(16)  # a silent service
        silent = server.getsockname()[1]
        held = []
        threading.Thread(target=lambda: [held.append(server.accept()) for _ in range(1000)], daemon=True).start()
        for address in [f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}", f"127.0.0.1:{silent}"]:
            try:
                pb.init_ray(address=address, timeout_s=2)
            except ConnectionError as exc:
                print("ERROR", exc)
        try:
            pb.init_ray(address=f"127.0.0.1:{port}", num_cpus=2)
        except ValueError as exc:
            print("ERROR", exc)
        import ray
        print("INITIALIZED", ray.is_initialized())
    """, timeout=120)
    assert proc.returncode == 0, proc.stderr
    errors = [line for line in proc.stdout.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 4, proc.stdout
    assert all("no Ray cluster answers at" in e for e in errors[:2])
    assert "is not a Ray cluster" in errors[2] and "within 2 s" in errors[2]
    assert "applies only to a local Ray instance" in errors[3]
    assert "INITIALIZED False" in proc.stdout


def test_joining_bounds_rays_gcs_wait_by_timeout_s_and_restores_the_environment(monkeypatch):
    from pbmarl.hosting import ray as hosting_ray

    seen = []

    class FakeRay:
        @staticmethod
        def is_initialized():
            return False

        @staticmethod
        def init(**kwargs):
            seen.append(os.environ.get(hosting_ray.GCS_WAIT_VAR))
            raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")

    monkeypatch.setattr(hosting_ray, "import_ray", lambda: FakeRay)
    monkeypatch.setattr(hosting_ray, "_probe", lambda *a: None)
    monkeypatch.delenv(hosting_ray.GCS_WAIT_VAR, raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ConnectionError, match="no Ray cluster replied within about 2.5 s"):
        hosting_ray.init_ray("10.0.0.1:6379", timeout_s=2.5)
    assert seen == ["3"] and hosting_ray.GCS_WAIT_VAR not in os.environ
    monkeypatch.setenv(hosting_ray.GCS_WAIT_VAR, "40")  # the user's own value is kept
    with pytest.raises(ConnectionError):
        hosting_ray.init_ray("10.0.0.1:6379", timeout_s=2.5)
    assert seen[-1] == "40" and os.environ[hosting_ray.GCS_WAIT_VAR] == "40"


def make_population(pb):
    """Kuhn poker with policies that need no torch (sent to the cluster script as source)."""
    game = pb.load_game("kuhn_poker")
    pop = pb.Population(game)
    for p in range(2):
        pop.add(p, pb.RandomPolicy(game))
        pop.add(p, pb.TabularPolicy.random(game, seed=p))
        pop.add(p, pb.policies.FixedPolicy.pure(game, 1))
    return game, pop


def test_two_node_cluster_runs_workers_on_both_nodes():
    proc = _python(inspect.getsource(make_population) + """
import json, os
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
from ray.cluster_utils import Cluster
import pbmarl as pb

cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
cluster.add_node(num_cpus=1)
cluster.wait_for_nodes()
try:
    pb.init_ray(address=cluster.address)
    game, pop = make_population(pb)
    table = pb.PayoffTable(pop)
    with pb.RolloutPool(game, num_workers=2, backend="ray", unit_episodes=1_000) as pool:
        nodes = pool.node_ids()
        pool.fill(table, episodes=3_000, seed=21)
    import ray
    alive = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    print("RESULT", json.dumps({"nodes": nodes, "alive": alive, "counts": table.counts.tolist(),
                                "values": table.values.tolist()}))
finally:
    import ray
    ray.shutdown()
    cluster.shutdown()
""")
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT"))
    out = json.loads(line[len("RESULT "):])
    assert len(out["alive"]) == 2 and len(set(out["nodes"])) == 2 and set(out["nodes"]) == set(out["alive"])
    game, pop = make_population(pb)
    expected = _local_table(game, pop, seed=21)
    np.testing.assert_array_equal(out["counts"], expected.counts)
    np.testing.assert_allclose(out["values"], expected.values, rtol=0, atol=1e-12)
