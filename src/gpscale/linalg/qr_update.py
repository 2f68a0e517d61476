"""Moving one pivot of the augmented partial Cholesky + QR factors to the last position
(Cao et al. 2013 §3.2; Bach & Jordan 2005, appendix), with the rotations computed on
the small blocks first and then applied to the long n-vectors in one sweep each.

Moving pivot p to position k−1 is the sequence of adjacent transpositions
q = p, …, k−2. Transposition q rotates columns q, q+1 of L by the symmetric
orthogonal G_q = [[c, s], [s, −c]] (c, s from the two entries in the row of pivot
q+1), rotates the augmented rows n+q, n+q+1 of Q by G_q (so that σI stays σI), and
restores R's triangularity with a Givens rotation J_q on rows q, q+1 of R G_q
(Q ← Q J_qᵀ). The parameters of every G_q depend only on the (k−p)² block of L in
the pivot rows, and those of J_q only on R, so they are found first, on the host
(an O(k²) scalar recurrence). Applying them to L and Q is then a "carry" recurrence
over whole columns — column q becomes a combination of the carried column and the
untouched column q+1 — O((k−p)(n+k)) flops in a few device operations per step.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def _rotations(S: np.ndarray, R: np.ndarray, A: np.ndarray, qy: np.ndarray, p: int):
    """Host part. S: L in the pivot rows P = pivots[p:] and columns p: (local indices);
    R: the k × (k−p) block R[:, p:]; A: Q's augmented rows n+p…n+k−1 as a k × (k−p)
    block of Qᵀ; qy: Qᵀỹ. Updates R, A, qy in place and returns the (c, s) of the G's
    and the 2 × 2 J's."""
    carry = S[:, 0].copy()
    gs, js = [], []
    for t in range(S.shape[0] - 1):
        q = p + t
        x, z = carry[t + 1], S[t + 1, t + 1]
        h = math.hypot(x, z)
        c, s = x / h, z / h
        carry = s * carry - c * S[:, t + 1]
        gs.append((c, s))
        # R ← R G on columns q, q+1 (rows ≤ q+1); augmented rows of Q ← G (rows)
        u, v = R[: q + 2, t].copy(), R[: q + 2, t + 1].copy()
        R[: q + 2, t], R[: q + 2, t + 1] = c * u + s * v, s * u - c * v
        u, v = A[:, t].copy(), A[:, t + 1].copy()
        A[:, t], A[:, t + 1] = c * u + s * v, s * u - c * v
        # J zeroes R[q+1, q]; keep R[q+1, q+1] > 0
        a, e = R[q, t], R[q + 1, t]
        h = math.hypot(a, e)
        j0 = (a / h, e / h)
        j1 = (-e / h, a / h)
        u, v = R[q, t:].copy(), R[q + 1, t:].copy()
        if j1[0] * u[1] + j1[1] * v[1] < 0:
            j1 = (-j1[0], -j1[1])
        R[q, t:] = j0[0] * u + j0[1] * v
        R[q + 1, t:] = j1[0] * u + j1[1] * v
        R[q + 1, t] = 0.0
        u, v = qy[q], qy[q + 1]
        qy[q], qy[q + 1] = j0[0] * u + j0[1] * v, j1[0] * u + j1[1] * v
        js.append((j0, j1))
    return gs, js


def move_to_last(f, p: int) -> None:
    """Permute pivot ``p`` of the :class:`~gpscale.linalg.pivchol.CholQRFactors` ``f``
    to the last position, keeping L lower trapezoidal (in pivot order), the augmented
    block σI and R upper triangular with a positive diagonal. O((k−p)(n+k))."""
    k, n = f.k, f.n
    if p >= k - 1:
        return
    P = f.pivots[p:k]
    idx = torch.tensor(P, device=f._Lt.device)
    Lt, Qt = f._Lt, f._Qt
    S = Lt[p:k][:, idx].mT.cpu().numpy().copy()                 # rows P, columns p:k
    R = f._R[:k, p:k].cpu().numpy().copy()
    A = Qt[:k, n + p : n + k].cpu().numpy().copy()
    qy = f._qy[:k].cpu().numpy().copy()
    gs, js = _rotations(S, R, A, qy, p)
    f._R[:k, p:k] = torch.as_tensor(R, device=f._R.device)
    Qt[:k, n + p : n + k] = torch.as_tensor(A, device=Qt.device)
    f._qy[:k] = torch.as_tensor(qy, device=f._qy.device)
    # device part: carry recurrences over the columns of L (G's) and of Q (J's)
    carry = Lt[p].clone()
    for t, (c, s) in enumerate(gs):
        nxt = Lt[p + t + 1]
        torch.mul(carry, c, out=Lt[p + t])
        Lt[p + t].add_(nxt, alpha=s)
        carry.mul_(s).add_(nxt, alpha=-c)
    Lt[k - 1] = carry
    carry = Qt[p, : n + k].clone()
    for t, (j0, j1) in enumerate(js):
        nxt = Qt[p + t + 1, : n + k]
        torch.mul(carry, j0[0], out=Qt[p + t, : n + k])
        Qt[p + t, : n + k].add_(nxt, alpha=j0[1])
        carry.mul_(j1[0]).add_(nxt, alpha=j1[1])
    Qt[k - 1, : n + k] = carry
    f.pivots[p:k] = P[1:] + P[:1]
    # exact zeros of the trapezoidal pattern: column p+a vanishes in the rows of the
    # pivots at positions p … p+a−1
    new_idx = torch.tensor(f.pivots[p:k], device=Lt.device)
    block = Lt[p:k][:, new_idx]
    Lt[p:k, new_idx] = torch.triu(block)
