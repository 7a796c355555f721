"""OpenSpiel 2.0.2's PyTorch NFSP on Kuhn poker, run inside its own venv (/work/venvs/openspiel-nfsp:
open_spiel==2.0.2, torch==2.13.0, dm-tree).

The loop and settings are those of ``open_spiel/python/examples/nfsp_kuhn_pytorch.py`` (hidden 128,
replay 2e5, reservoir 2e6, anticipatory 0.1, epsilon 0.06 -> 0.001 over 3e6 episodes), cut at
``--episodes``. Prints one JSON line per ``--eval-every`` episodes: episodes, wall seconds and the
exact exploitability of the average policies. benchmarks/population_learning.py --only nfsp-peer
calls it and records the rows.

    /work/venvs/openspiel-nfsp/bin/python benchmarks/peers/openspiel_nfsp_kuhn.py --episodes 40000
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from open_spiel.python import policy, rl_environment
from open_spiel.python.algorithms import exploitability
from open_spiel.python.pytorch import nfsp


class NFSPPolicies(policy.Policy):
    """The two agents' average policies as one OpenSpiel policy (as in the example)."""

    def __init__(self, env: rl_environment.Environment, agents: list[nfsp.NFSP]) -> None:
        super().__init__(env.game, [0, 1])
        self._agents = agents
        self._obs: dict = {"info_state": [None, None], "legal_actions": [None, None]}

    def action_probabilities(self, state, player_id=None):  # type: ignore[no-untyped-def]
        player = state.current_player()
        legal = state.legal_actions(player)
        self._obs["current_player"] = player
        self._obs["info_state"][player] = state.information_state_tensor(player)
        self._obs["legal_actions"][player] = legal
        step = rl_environment.TimeStep(observations=self._obs, rewards=None, discounts=None, step_type=None)
        with self._agents[player].temp_mode_as(nfsp.MODE.AVERAGE_POLICY):
            probs = self._agents[player].step(step, is_evaluation=True).probs
        return {a: probs[a] for a in legal}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=40_000)
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    env = rl_environment.Environment("kuhn_poker", players=2)
    env.seed(args.seed)
    size, actions = env.observation_spec()["info_state"][0], env.action_spec()["num_actions"]
    agents = [nfsp.NFSP(p, size, actions, [128], int(2e6), 0.1, replay_buffer_capacity=int(2e5),
                        epsilon_decay_duration=int(3e6), epsilon_start=0.06, epsilon_end=0.001)
              for p in range(2)]
    average = NFSPPolicies(env, agents)
    start = time.perf_counter()
    for ep in range(args.episodes):
        step = env.reset()
        while not step.last():
            player = step.observations["current_player"]
            step = env.step([agents[player].step(step).action])
        for agent in agents:
            agent.step(step)
        if (ep + 1) % args.eval_every == 0:
            expl = exploitability.exploitability(env.game, average)
            print(json.dumps({"episodes": ep + 1, "wall_s": round(time.perf_counter() - start, 2),
                              "exploitability": float(expl)}), flush=True)


if __name__ == "__main__":
    main()
