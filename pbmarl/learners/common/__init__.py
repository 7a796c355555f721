"""What several learner families share: configs and records (`config`), replay (`buffers`, `reservoir`),
torch helpers and networks (`nets`), the run-record mixin (`recorded`) and the learners by name (`registry`).

Nothing here imports a family; the families import from here.
"""
