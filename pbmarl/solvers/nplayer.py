"""Nash equilibria of games with any number of players: pure check, dynamics, Newton on the support.

There is no efficient exact method for three or more players, so `iterative_nash`
combines three cheap steps and is honest about what it reached:

1. **Pure equilibria** are found for the whole table at once: a cell where every
   player's payoff is the maximum along its own axis.
2. **Dynamics** (projected replicator dynamics, regret matching+, fictitious play) run
   from the warm start `init` (PSRO's previous meta-strategy, zero-padded) or uniform;
   every `check_every` steps their iterates and averages are scored by meta-game
   NashConv, all candidates in one batched contraction.
3. **Newton's method on the support** polishes a candidate: on the members ``S_p``
   that carry its mass it solves the indifference system

       u_p(i, x_{-p}) = v_p  for i in S_p,     sum_{i in S_p} x_p(i) = 1,

   (Govindan & Wilson 2003 follow the same equations globally; here they are solved
   locally, Jacobian ``d u_p(i, x_{-p}) / d x_q(j) = u_p(i, j, x_{-p,q})``), and the
   result is kept only if it is a distribution and no member outside the support
   does better, i.e. its NashConv meets the tolerance.

The search stops as soon as a profile meets ``tol`` x payoff range; otherwise it
returns the best profile seen and says so (``info["converged"]`` is False).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike

from pbmarl.solvers.dynamics import Profile, _project_exact
from pbmarl.solvers.inputs import DistributionsLike, as_payoff_array, check_distributions, payoff_scale
from pbmarl.solvers.nashconv import deviation_function
from pbmarl.solvers.result import SolverResult

#: the dynamics `iterative_nash` can run
DYNAMICS = ("prd", "rm", "fp")
#: the order `iterative_nash` runs them in by default: RM+ finds supports fastest
DEFAULT_ORDER = ("rm", "prd", "fp")
#: at most this many supports are polished per search (each costs a few small linear solves)
MAX_POLISH = 100


def pure_equilibria(U: np.ndarray) -> np.ndarray:
    """Every pure Nash equilibrium of `U` ``(n_1, ..., n_k, k)``: ``[m, k]`` member indices, in C order."""
    k = U.shape[-1]
    stable = np.ones(U.shape[:-1], dtype=bool)
    for p in range(k):
        Up = U[..., p]
        stable &= Up >= Up.max(axis=p, keepdims=True)
    return np.argwhere(stable)


def batch_nash_conv(U: np.ndarray, profiles: Sequence[Profile]) -> np.ndarray:
    """Meta-game NashConv of each profile in `profiles`, ``[c]``, with one contraction per player."""
    k = U.shape[-1]
    total = np.zeros(len(profiles))
    for p in range(k):
        # player p's axis first, then contract the others' from the last, every candidate at once
        others = [q for q in range(k) if q != p]
        T = np.transpose(U[..., p], [p] + others)
        x = np.stack([prof[others[-1]] for prof in profiles])  # [c, n_last]
        T = np.einsum("...i,ci->c...", T, x)
        for j in reversed(others[:-1]):
            x = np.stack([prof[j] for prof in profiles])
            T = np.einsum("c...i,ci->c...", T, x)
        sig = np.stack([prof[p] for prof in profiles])
        total += np.maximum(T.max(axis=1) - np.einsum("ci,ci->c", T, sig), 0.0)
    return total


def _contract(T: np.ndarray, x: Sequence[np.ndarray], keep: tuple[int, ...]) -> np.ndarray:
    """Contract every axis of `T` not in `keep` with `x[axis]`; the kept axes stay in order."""
    letters = "abcdefghijklmnopqrstuvwxyz"[:T.ndim]
    others = [j for j in range(T.ndim) if j not in keep]
    spec = letters + "".join("," + letters[j] for j in others) + "->" + "".join(letters[j] for j in keep)
    return np.einsum(spec, T, *[x[j] for j in others])


def newton_polish(U: np.ndarray, sigma: Profile, *, support_tol: float = 1e-3, steps: int = 20,
                  clip: bool = False) -> Profile | None:
    """Solve the indifference equations on the support of `sigma` by Newton's method (module doc, step 3).

    Returns the full profile (zeros off the support), or None when Newton fails or leaves the simplex
    (with ``clip=True`` negative probabilities are cut to zero instead: in degenerate games the
    equations have a family of solutions and the least-squares step may land just outside).
    The caller checks the NashConv: members outside the support may still do better.
    """
    k = U.shape[-1]
    support = [np.flatnonzero(s >= support_tol * s.max()) for s in sigma]
    sub = U[np.ix_(*support)]
    tensors = [np.ascontiguousarray(sub[..., p]) for p in range(k)]
    sizes = [len(s) for s in support]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    n = int(offsets[-1])
    x = [sigma[p][support[p]] / sigma[p][support[p]].sum() for p in range(k)]
    scale = max(float(np.ptp(sub)), 1e-300)
    residual = np.inf
    for _ in range(steps):
        u = [_contract(tensors[p], x, (p,)) for p in range(k)]
        v = [float(x[p] @ u[p]) for p in range(k)]
        F = np.concatenate([np.concatenate([u[p] - v[p], [x[p].sum() - 1.0]]) for p in range(k)])
        size = float(np.abs(F).max())
        if size <= 1e-13 * scale:
            break
        if size > 100.0 * residual:  # diverging: this support holds no equilibrium near here
            return None
        residual = min(residual, size)
        J = np.zeros((n + k, n + k))
        for p in range(k):
            rows = slice(offsets[p] + p, offsets[p + 1] + p)  # the s_p indifference rows of player p
            for q in range(k):
                if q == p:
                    continue
                block = _contract(tensors[p], x, tuple(sorted((p, q))))
                J[rows, offsets[q] + q:offsets[q + 1] + q] = block if p < q else block.T
            J[rows, offsets[p + 1] + p] = -1.0  # d/dv_p
            J[offsets[p + 1] + p, offsets[p] + p:offsets[p + 1] + p] = 1.0  # sum row
        # unknowns laid out as [x_0, v_0, x_1, v_1, ...], like the equations
        z = np.concatenate([np.concatenate([x[p], [v[p]]]) for p in range(k)])
        try:
            z = z + np.linalg.lstsq(J, -F, rcond=None)[0]
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(z)) or np.abs(z).max() > 1e6 * (1.0 + scale):
            return None
        x = [z[offsets[p] + p:offsets[p + 1] + p] for p in range(k)]
    if any(xp.min() < -1e-9 * max(1.0, float(np.abs(xp).max())) for xp in x) and not clip:
        return None
    out = []
    for p in range(k):
        full = np.zeros(U.shape[p])
        full[support[p]] = np.maximum(x[p], 0.0)
        if full.sum() <= 0:
            return None
        out.append(full / full.sum())
    return tuple(out)


def iterative_nash(
    U: ArrayLike,
    *,
    iterations: int = 10_000,
    tol: float = 1e-6,
    check_every: int = 20,
    dynamics: Sequence[str] = DEFAULT_ORDER,
    init: DistributionsLike | None = None,
    polish: bool = True,
) -> SolverResult:
    """A Nash equilibrium of `U` by a pure check, dynamics and Newton polishing; see the module doc.

    Args:
        U: payoff array ``(n_1, ..., n_k, k)``.
        iterations: steps per dynamic, at most.
        tol: stop once NashConv is at most ``tol`` x payoff range.
        check_every: score candidates (and polish new supports) every this many steps.
        dynamics: which of ``("prd", "rm", "fp")`` to run, in order, until one meets `tol`.
        init: a warm start, one distribution per player (e.g. the previous meta-strategy with
            zeros for new members); tried first and the start of the replicator dynamics.
        polish: whether to polish candidates by Newton's method (False: dynamics alone).

    Returns:
        A `SolverResult` whose method names what produced the profile (``"pure"``,
        ``"warm-start+newton"``, ``"prd-average+newton"``, ``"rm-iterate"``, ...) and whose
        info holds ``nash_conv``, ``steps`` (per dynamic), ``converged`` and ``tol``.
    """
    U = as_payoff_array(U)
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise ValueError(f"iterations must be a positive integer, got {iterations!r}")
    if isinstance(check_every, bool) or not isinstance(check_every, (int, np.integer)) or check_every < 1:
        raise ValueError(f"check_every must be a positive integer, got {check_every!r}")
    unknown = [d for d in dynamics if d not in DYNAMICS]
    if unknown or not dynamics:
        raise ValueError(f"dynamics must be a non-empty subset of {DYNAMICS}, got {tuple(dynamics)!r}")
    start = None if init is None else tuple(np.asarray(s, dtype=float) for s in check_distributions(init, U.shape[:-1]))
    search = _Search(U, tol, polish)
    pure = pure_equilibria(U)
    if len(pure):
        welfare = U[tuple(pure.T)].sum(axis=-1)
        cell = pure[int(np.argmax(welfare))]
        search.offer([tuple(np.eye(n)[i] for n, i in zip(U.shape[:-1], cell))], ["pure"], polish=False)
    if start is not None and not search.done:
        search.offer([start], ["warm-start"])
    steps: dict[str, int] = {}
    for name in dynamics:
        if search.done:
            break
        for t, labels, candidates in _run(name, U, iterations, check_every, start):
            steps[name] = t
            search.offer(candidates, labels)
            if search.done:
                break
    info = {"nash_conv": search.score, "steps": steps, "converged": search.done, "tol": tol}
    return SolverResult(tuple(np.array(s) for s in search.sigma), search.method, info)


class _Search:
    """The best profile seen so far; polishes each new support once."""

    def __init__(self, U: np.ndarray, tol: float, polish: bool) -> None:
        self.U = U
        self.polish = polish
        self.target = tol * payoff_scale(U)
        self.deviations = deviation_function(U)
        self.sigma: Profile = tuple(np.full(n, 1.0 / n) for n in U.shape[:-1])
        self.score = float(batch_nash_conv(U, [self.sigma])[0])
        self.method = "uniform"
        self.tried: set[tuple[bytes, ...]] = set()

    @property
    def done(self) -> bool:
        return self.score <= self.target

    def _keep(self, score: float, sigma: Profile, method: str) -> None:
        if score < self.score:
            self.score, self.sigma, self.method = score, sigma, method

    def offer(self, candidates: Sequence[Profile], labels: Sequence[str], *, polish: bool = True) -> None:
        scores = batch_nash_conv(self.U, candidates)
        for score, sigma, label in zip(scores, candidates, labels):
            self._keep(float(score), sigma, label)
        if self.done or not polish or not self.polish:
            return
        for i in np.argsort(scores):
            if len(self.tried) >= MAX_POLISH:
                return
            sigma = candidates[int(i)]
            signature = tuple(np.packbits(s >= 1e-3 * s.max()).tobytes() for s in sigma)
            if signature in self.tried:
                continue
            self.tried.add(signature)
            polished = newton_polish(self.U, sigma)
            if polished is not None:
                self._keep(float(batch_nash_conv(self.U, [polished])[0]), polished, labels[int(i)] + "+newton")
                if self.done:
                    return


def _run(name: str, U: np.ndarray, iterations: int, check_every: int,
         init: Profile | None) -> Iterator[tuple[int, list[str], list[Profile]]]:
    """Yield (steps so far, labels, candidate profiles) every `check_every` steps and at the end."""
    deviations = deviation_function(U / payoff_scale(U))
    sizes = U.shape[:-1]
    uniform = tuple(np.full(n, 1.0 / n) for n in sizes)
    sigma: Profile = uniform if init is None or name != "prd" else tuple(0.9 * s + 0.1 * u for s, u in zip(init, uniform))
    regrets = [np.zeros(n) for n in sizes]
    total = [np.zeros(n) for n in sizes]
    weight_sum = 0.0
    for t in range(1, iterations + 1):
        values = deviations(sigma)
        weight = float(t) if name == "rm" else 1.0  # RM+ uses linear averaging
        for acc, s in zip(total, sigma):
            acc += weight * s
        weight_sum += weight
        if name == "prd":
            sigma = tuple(_project_exact(s + 0.3 * s * (v - s @ v), 1e-9) for s, v in zip(sigma, values))
        elif name == "rm":
            for r, s, v in zip(regrets, sigma, values):
                r += v - s @ v
                np.maximum(r, 0.0, out=r)
            sigma = tuple(r / r.sum() if r.sum() > 0 else np.full(r.size, 1.0 / r.size) for r in regrets)
        else:  # fictitious play: best-respond to the running average
            br = tuple(np.eye(len(v))[int(np.argmax(v))] for v in values)
            sigma = tuple(s + (b - s) / (t + 1) for s, b in zip(sigma, br))
        if t % check_every == 0 or t == iterations:
            average = tuple(acc / weight_sum for acc in total)
            if name == "fp":  # fictitious play's iterates already are averages
                yield t, ["fp"], [sigma]
            else:
                yield t, [f"{name}-iterate", f"{name}-average"], [sigma, average]
