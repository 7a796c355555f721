"""Distributed learners: parameter-server modes (BSP, ASP, BAP), A3C, IMPALA's V-trace, Ape-X pieces.

Submodules: `options` (config fields), `hosting` (one object in-process or as a Ray actor),
`on_server` (the `staleness` and `close` every such learner shows), `server` (the parameter server, hosted), `replay` (Ape-X's central replay, hosted), `workers`
(gradient workers), `executors` (local or Ray), `modes` (BSP/ASP/BAP rounds), `a3c`.
Ray is imported only inside functions that need it.
"""
