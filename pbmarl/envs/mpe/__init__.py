"""Numpy ports of mpe2's multi-agent particle environments: the world (`world`) and the scenarios (`batch`)."""
