"""Self-play baselines: one policy trained against its current self (`PPOSelfPlay`, `DeepMMD`).

Tabular MMD on the exact engine is `pbmarl.algorithms.mmd.MMD`.
"""
