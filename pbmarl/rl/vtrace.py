"""V-trace off-policy value targets and policy-gradient advantages (numpy, no torch needed).

Espeholt et al. 2018, "IMPALA: Scalable Distributed Deep-RL with Importance Weighted
Actor-Learner Architectures", section 4.1. Data of a behaviour policy ``mu`` is
corrected towards the target policy ``pi`` with truncated importance weights:

    rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t))
    c_i   = lam * min(c_bar, pi(a_i|x_i) / mu(a_i|x_i))
    delta_t V = rho_t * (r_t + gamma_t * V(x_{t+1}) - V(x_t))
    v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{k=s}^{t-1} gamma_k) (prod_{i=s}^{t-1} c_i) delta_t V     (eq. 1)

computed backwards as ``v_s - V(x_s) = delta_s V + gamma_s c_s (v_{s+1} - V(x_{s+1}))``.
The actor's advantage is ``rho_pg_s * (r_s + gamma_s * v_{s+1} - V(x_s))`` with
``rho_pg_s = min(rho_pg_bar, pi/mu)`` (eq. 4 uses ``rho_pg_bar = rho_bar``).

``gamma_t`` is the discount of transition t: ``gamma * (1 - done_t)``, so episode ends
cut every sum. ``next_value[t]`` is ``V(x_{t+1})``; for the last row of a sequence it is the
bootstrap value (0 when that row ends its episode). With ``pi = mu`` and ``lam = 1``,
``v_s`` is the n-step Bellman target, i.e. the discounted return when episodes are whole.

Example:
    >>> import numpy as np
    >>> vs, adv = vtrace(np.zeros(3), np.ones(3), np.array([0.0, 0.0, 1.0]), np.zeros(3),
    ...                  np.zeros(3), gamma=0.5)
    >>> vs.tolist()
    [0.25, 0.5, 1.0]
"""

from __future__ import annotations

import numpy as np

__all__ = ["vtrace"]


def _vec(name: str, x: object, n: int | None) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 1 or (n is not None and len(a) != n):
        want = "1-D" if n is None else f"1-D of length {n}"
        raise ValueError(f"{name} must be {want}, got shape {a.shape}")
    if not np.all(np.isfinite(a)) and name != "log_rhos":
        raise ValueError(f"{name} must be finite, got {a!r}")
    return a


def vtrace(
    log_rhos: np.ndarray,
    discounts: np.ndarray,
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    *,
    gamma: float = 1.0,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    rho_pg_bar: float | None = None,
    lam: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """V-trace targets ``v_s`` and policy-gradient advantages, both ``[T]``; see the module doc.

    Args:
        log_rhos: ``log pi(a_t|x_t) - log mu(a_t|x_t)`` (untruncated).
        discounts: ``1 - done_t`` (or any per-step factor in [0, 1]); multiplied by `gamma`.
        rewards: ``r_t``.
        values: ``V(x_t)`` under the learner's critic.
        next_values: ``V(x_{t+1})`` (the bootstrap value on the last row).
        gamma: discount factor in [0, 1].
        rho_bar: truncation of ``rho_t`` in the temporal differences (> 0).
        c_bar: truncation of the trace coefficients ``c_i`` (> 0, usually <= rho_bar).
        rho_pg_bar: truncation of the policy-gradient weight (None: `rho_bar`).
        lam: the extra trace decay lambda in [0, 1] (section 4.2 of the paper).
    """
    n = len(np.asarray(log_rhos).reshape(-1))
    log_rhos = _vec("log_rhos", log_rhos, None)
    discounts, rewards = _vec("discounts", discounts, n), _vec("rewards", rewards, n)
    values, next_values = _vec("values", values, n), _vec("next_values", next_values, n)
    for name, v, hi in (("gamma", gamma, 1.0), ("lam", lam, 1.0)):
        if not 0.0 <= float(v) <= hi:
            raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")
    pg_bar = rho_bar if rho_pg_bar is None else rho_pg_bar
    for name, v in (("rho_bar", rho_bar), ("c_bar", c_bar), ("rho_pg_bar", pg_bar)):
        if not float(v) > 0:
            raise ValueError(f"{name} must be a positive number, got {v!r}")
    ratio = np.exp(log_rhos)
    rho = np.minimum(rho_bar, ratio)
    c = lam * np.minimum(c_bar, ratio)
    g = gamma * discounts
    delta = rho * (rewards + g * next_values - values)
    acc = np.zeros(n + 1)  # acc[s] = v_s - V(x_s); acc[n] = 0 (bootstrap)
    for s in range(n - 1, -1, -1):
        acc[s] = delta[s] + g[s] * c[s] * acc[s + 1]
    vs = values + acc[:n]
    vs_next = next_values + acc[1:]
    adv = np.minimum(pg_bar, ratio) * (rewards + g * vs_next - values)
    return vs, adv
