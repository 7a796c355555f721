"""Distributed learners: parameter-server modes (BSP, ASP, BAP), A3C, IMPALA's V-trace, Ape-X pieces.

Submodules: `options` (config fields), `server` (the parameter server), `workers`
(gradient workers), `executors` (local or Ray), `modes` (BSP/ASP/BAP rounds), `a3c`.
Ray is imported only inside functions that need it.
"""
