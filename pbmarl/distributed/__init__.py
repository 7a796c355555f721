"""Parameter-server infrastructure: what puts a learner's gradients on a server, and nothing of any one learner.

Submodules: `options` (the config fields ``workers``, ``sync``, ``staleness``, ``backend``),
`on_server` (the `staleness` and `close` every such learner shows), `server` (the parameter server,
hosted through `pbmarl.hosting.hosted`), `replay` (a central replay, hosted), `workers` (gradient
workers), `executors` (local or Ray workers), `modes` (BSP/ASP/BAP rounds), `resume` (the job log that
lets a restored learner hand its jobs in flight out again).

It imports no learner, maths or driver: a learner answers `pbmarl.protocols.GradientSource` (and a
buffer `pbmarl.protocols.ReplayStore`). The learners that run on it live with their families:
`pbmarl.learners.oracles.{a3c,impala,apex}`, `pbmarl.learners.control.{apex_ddpg,rounds}` and
`pbmarl.algorithms.teams.rounds`. Ray is reached only through `pbmarl.hosting`.
"""
