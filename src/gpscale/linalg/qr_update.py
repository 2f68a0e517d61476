"""Moving one pivot of the augmented partial Cholesky + QR factors to the last position
(Cao et al. 2013 §3.2; Bach & Jordan 2005, appendix), with the rotations found on the
small blocks first and then applied to the long n-vectors a block at a time.

Moving pivot p to position k−1 is the sequence of adjacent transpositions
q = p, …, k−2. Transposition q rotates columns q, q+1 of L by the symmetric
orthogonal G_q = [[c, s], [s, −c]] (c, s from the two entries in the row of pivot
q+1), rotates the augmented rows n+q, n+q+1 of Q by G_q (so that σI stays σI), and
restores R's triangularity with a Givens rotation J_q on rows q, q+1 of R G_q
(Q ← Q J_qᵀ). The parameters of every G_q depend only on the (k−p)² block of L in
the pivot rows, and those of J_q only on R, so they are found first, on the host:

1. the G's, by the carry recurrence on that block (O((k−p)²));
2. R ← R G_p ⋯ G_{k−2}, then the J's by a Givens QR of the resulting upper
   Hessenberg block (left and right rotations commute, and J_q depends only on column
   q, which the later G's leave alone).

Each sequence acts as a "carry" recurrence: in step t, output t is a combination of
the carried vector and the untouched vector t+1, and the carry moves on. A block of
b consecutive steps is one (b+1) × (b+1) matrix on b+1 consecutive vectors
(:func:`_carry_matrix`), so applying a sequence is ⌈(k−p)/b⌉ small matrix products
(:func:`_apply_carry`): O((k−p)·b·(n+k)) flops in a few operations instead of four
vector operations per step.
"""

from __future__ import annotations

import math

import numpy as np
import torch

#: steps per block of :func:`_carry_blocks` (flops grow with it, operation count falls).
#: 8 was chosen by timing random removals against the per-step sweep and against 16,
#: which gains at small n and loses at large n.
BLOCK = 8


def _carry_matrix(steps: list[tuple[float, float, float, float]]) -> np.ndarray:
    """C ((b+1) × (b+1)) with new = C @ [carry, v_1, …, v_b] for the steps
    (a, β, γ, δ): out_t = a·carry + β·v_{t+1}, carry ← γ·carry + δ·v_{t+1}; row b of
    the result is the final carry."""
    b = len(steps)
    C = np.zeros((b + 1, b + 1))
    coef = np.zeros(b + 1)
    coef[0] = 1.0
    for t, (a, beta, gamma, delta) in enumerate(steps):
        C[t] = a * coef
        C[t, t + 1] += beta
        coef *= gamma
        coef[t + 1] += delta
    C[b] = coef
    return C


def _carry_blocks(steps: list[tuple[float, float, float, float]]
                  ) -> list[tuple[int, int, np.ndarray]]:
    """The steps cut into blocks of :data:`BLOCK`: (t0, t1, C) with C the
    :func:`_carry_matrix` of steps t0 … t1−1."""
    return [(t0, min(t0 + BLOCK, len(steps)), _carry_matrix(steps[t0 : t0 + BLOCK]))
            for t0 in range(0, len(steps), BLOCK)]


def _apply_carry(rows, blocks: list[tuple[int, int, np.ndarray]]) -> None:
    """Apply a carry recurrence, given as :func:`_carry_blocks`, in place to the rows of
    ``rows`` (K × N, numpy or torch; row 0 holds the initial carry, K − 1 steps); the
    final carry ends in row K − 1. The blocks overlap by one row: the carry a block
    leaves in its last row is the next block's first."""
    torch_rows = isinstance(rows, torch.Tensor)
    for t0, t1, C in blocks:
        if torch_rows:
            C = torch.as_tensor(C, dtype=rows.dtype, device=rows.device)
        rows[t0 : t1 + 1] = C @ rows[t0 : t1 + 1]


def _rotations(S: np.ndarray, R: np.ndarray, A: np.ndarray, qy: np.ndarray, p: int):
    """Host part. S: L in the pivot rows P = pivots[p:] and columns p: (local indices);
    R: the k × (k−p) block R[:, p:]; A: Q's augmented rows n+p…n+k−1 as a k × (k−p)
    block of Qᵀ; qy: Qᵀỹ. Updates R, A, qy in place and returns the carry steps of the
    G's (on columns of L) and of the J's (on rows of Qᵀ), as :func:`_carry_blocks`."""
    K = S.shape[0]
    carry = S[:, 0].copy()
    g_steps = []
    for t in range(K - 1):
        x, z = carry[t + 1], S[t + 1, t + 1]
        h = math.hypot(x, z)
        c, s = x / h, z / h
        carry = s * carry - c * S[:, t + 1]
        g_steps.append((c, s, s, -c))
    # R ← R G and A ← A G: the G's act on columns, i.e. on the rows of the transposes
    g_blocks = _carry_blocks(g_steps)
    Rt, At = R.T.copy(), A.T.copy()
    _apply_carry(Rt, g_blocks)
    _apply_carry(At, g_blocks)
    R[:], A[:] = Rt.T, At.T
    # Givens QR of the upper Hessenberg block: J_q zeroes R[q+1, q], R[q, q] = h > 0
    j_steps = []
    for t in range(K - 1):
        q = p + t
        a, e = R[q, t], R[q + 1, t]
        h = math.hypot(a, e)
        j0, j1 = (a / h, e / h), (-e / h, a / h)
        u, v = R[q, t:].copy(), R[q + 1, t:].copy()
        if t == K - 2 and j1[0] * u[1] + j1[1] * v[1] < 0:
            j1 = (-j1[0], -j1[1])  # the last diagonal entry: keep it positive
        R[q, t:] = j0[0] * u + j0[1] * v
        R[q + 1, t:] = j1[0] * u + j1[1] * v
        R[q + 1, t] = 0.0
        qy[q], qy[q + 1] = j0[0] * qy[q] + j0[1] * qy[q + 1], j1[0] * qy[q] + j1[1] * qy[q + 1]
        j_steps.append((j0[0], j0[1], j1[0], j1[1]))
    return g_blocks, _carry_blocks(j_steps)


def move_to_last(f, p: int, riders=()) -> None:
    """Permute pivot ``p`` of the :class:`~gpscale.linalg.pivchol.CholQRFactors` ``f``
    to the last position, keeping L lower trapezoidal (in pivot order), the augmented
    block σI and R upper triangular with a positive diagonal. O((k−p)(n+k)) vector
    work, in O((k−p)/b) operations on the device.

    ``riders``: tensors whose first k rows are Qᵀ X for some X (e.g. the cached
    Q[:n]ᵀ(K − K̂)[:, J] of the information pivots); their rows p … k−1 get the same
    rotations as Qᵀ's, O((k−p)·b·columns), so that they stay Qᵀ X."""
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
    g_blocks, j_blocks = _rotations(S, R, A, qy, p)
    f._R[:k, p:k] = torch.as_tensor(R, device=f._R.device)
    Qt[:k, n + p : n + k] = torch.as_tensor(A, device=Qt.device)
    f._qy[:k] = torch.as_tensor(qy, device=f._qy.device)
    # device part: the G's on the columns of L (rows of Lᵀ), the J's on the columns of
    # Q (rows of Qᵀ); each moves the carried vector to the last position
    _apply_carry(Lt[p:k], g_blocks)
    _apply_carry(Qt[p:k, : n + k], j_blocks)
    for rows in riders:
        _apply_carry(rows[p:k], j_blocks)
    f.pivots[p:k] = P[1:] + P[:1]
    # exact zeros of the trapezoidal pattern: column p+a vanishes in the rows of the
    # pivots at positions p … p+a−1
    new_idx = torch.tensor(f.pivots[p:k], device=Lt.device)
    block = Lt[p:k][:, new_idx]
    Lt[p:k, new_idx] = torch.triu(block)
