"""The policy loss of magnetic mirror descent in its RL form (Sokota et al., ICLR 2023, arXiv 2206.05825, sec. 5).

MMD's behavioural update at a state ``s`` is

    pi_{t+1} = argmax_pi  E_{a~pi}[A(s, a)] - alpha KL(pi || rho) - (1/eta) KL(pi || pi_t),

with ``rho`` the magnet, ``alpha`` the temperature and ``eta`` the step size. The RL form follows it
by gradient steps on a PPO-style surrogate for the first term (the ratio ``pi / pi_t`` times the
advantage, clipped or not) plus both KL terms computed exactly over the legal actions of each
sampled state.

Example:
    >>> import torch
    >>> logp = torch.log(torch.tensor([[0.5, 0.5]]))
    >>> float(masked_kl(logp, logp, torch.tensor([[True, True]])))
    0.0
"""

from __future__ import annotations

import torch

from pbmarl.rl.policy_gradients import clipped_surrogate_loss

__all__ = ["magnetic_policy_loss", "masked_kl"]


def masked_kl(logp: torch.Tensor, logq: torch.Tensor, legal_mask: torch.Tensor | None) -> torch.Tensor:
    """``KL(p || q) = sum_a p(a) (log p(a) - log q(a))`` per row ``[B]``, over legal actions only.

    Args:
        logp, logq: ``[B, A]`` log-probabilities (``-inf`` or anything at illegal actions).
        legal_mask: ``[B, A]`` bool, or None when every action is legal.
    """
    if logp.shape != logq.shape:
        raise ValueError(f"logp and logq must have the same shape, got {tuple(logp.shape)} and {tuple(logq.shape)}")
    terms = logp.exp() * (logp - logq)
    if legal_mask is not None:
        terms = torch.where(legal_mask, terms, torch.zeros_like(terms))
    return terms.sum(dim=-1)


def magnetic_policy_loss(advantage: torch.Tensor, logp: torch.Tensor, logp_all: torch.Tensor, old_logp: torch.Tensor,
                         old_logp_all: torch.Tensor, magnet_logp_all: torch.Tensor, legal_mask: torch.Tensor | None,
                         *, alpha: float, stepsize: float, clip: float | None) -> torch.Tensor:
    """MMD's policy loss to minimise: ``surrogate + alpha KL(pi || rho) + (1/eta) KL(pi || pi_old)``, batch mean.

    Args:
        advantage: ``[B]`` advantages (no gradient).
        logp, old_logp: ``[B]`` log-probabilities of the taken actions now and under the behaviour policy.
        logp_all, old_logp_all, magnet_logp_all: ``[B, A]`` log-probabilities of every action now, under the
            behaviour policy and under the magnet.
        legal_mask: ``[B, A]`` legal actions, or None.
        alpha: the magnet's weight (temperature), >= 0.
        stepsize: eta > 0; the KL to the previous policy is weighted ``1 / eta``.
        clip: PPO's clip range for the surrogate, or None for the plain ratio ``- A r``.
    """
    if not alpha >= 0 or not stepsize > 0:
        raise ValueError(f"alpha must be >= 0 and stepsize > 0, got alpha={alpha!r}, stepsize={stepsize!r}")
    ratio = (logp - old_logp).exp()
    surrogate = (-advantage * ratio).mean() if clip is None else clipped_surrogate_loss(advantage, ratio, clip)
    magnet = masked_kl(logp_all, magnet_logp_all, legal_mask).mean()
    previous = masked_kl(logp_all, old_logp_all, legal_mask).mean()
    return surrogate + alpha * magnet + previous / stepsize
