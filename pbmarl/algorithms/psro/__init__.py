"""The PSRO family: a population grown by best responses to a meta-strategy over a payoff table.

- `psro`: `PSRO`, `SelfPlay`, `FictitiousPlay` (the driver and its two special cases);
- `p2sro`: `P2SRO`, Pipeline PSRO, over `levels` (`Level`, `RemoteLevel`: the active levels) and
  `ladder` (`LadderManager`, `RemoteLadder`: claiming and freezing rungs atomically);
- `parallel_oracle`: `ParallelOracle`, one best response per player at once in Ray actors
  (the actors, and the policies sent to them, go through `pbmarl.hosting`);
- `parts`: the meta-solver, oracle and evaluator a run is built from, by name or from a saved spec;
- `targets`: `Target` and `TargetSelector`, what an iteration trains against;
- `records`: `IterationRecord`; `gains`: the sampled gain of new best responses (`br_gains`).
"""
