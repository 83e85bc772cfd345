"""Energy per I/O from the traced I/O stream and the rails: what one read or write of a size class
costs above the idle baseline it stands on, with a confidence interval.

Method (docs/analysis.md, "Energy per I/O"): the phase and the idle window before it are cut into
windows of WINDOW_S (edges EDGE_S inside each span left out: the rails follow a change of load with a
time constant). Per window, its energy E_w (the rails' samples) and, per class c, the I/Os n_wc whose
midpoint (submission + completion) / 2 falls in it. Ordinary least squares of
``E_w = b * T_w + sum_c e_c * n_wc`` over all windows gives the idle baseline b (W: the idle windows
hold no I/O) and each class's energy per I/O e_c (J), with the covariance s^2 (X'X)^-1 of the
residuals: the interval is e_c +- t(0.975, dof) * se_c. e_c is everything above idle the phase
drew per I/O of that class at the rate it ran: the drive's busy overhead (controller active
power) is shared over its I/Os. A class whose counts do not vary apart from another's (two classes
always in the same proportion) cannot be told apart: it is reported once as their mix, with why.

Classes: read or write (the kernel's opcode), the size rounded to a power of two (4 KiB ... 1 MiB),
and sequential or random where the trace can tell (an I/O that starts where the previous one of its
kind ended is sequential; a class is "seq" when most of its I/Os are).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

WINDOW_S = 0.02
EDGE_S = 0.03
MIN_IOS = 100        # fewer I/Os of a class: the estimate stands with a note


@dataclass
class IoClassEnergy:
    io_class: str                  # "read 4 KiB rand"
    count: int                     # I/Os of the class in the windows
    energy_j: float                # per I/O, above the idle baseline
    ci_low_j: float
    ci_high_j: float
    baseline_w: float              # the idle baseline the fit found
    windows: int
    note: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def size_label(nbytes: float) -> str:
    """The size class: a power of two, from 4 KiB to 1 MiB (smaller and larger clamp)."""
    k = int(round(math.log2(max(4096.0, min(float(nbytes), 2.0 ** 20)))))
    v = 2 ** k
    return f"{v // 2**20} MiB" if v >= 2**20 else f"{v // 1024} KiB"


def classes(io: dict) -> np.ndarray:
    """Each I/O's class label (``io``: NvmeTrace.io_arrays(): submit, complete, bytes, write, slba).
    With numpy over the arrays: a step of a fast drive holds half a million I/Os."""
    n = len(io["submit"])
    if n == 0:
        return np.empty(0, dtype=object)
    k = np.rint(np.log2(np.clip(np.asarray(io["bytes"], float), 4096.0, 2.0 ** 20))).astype(np.int64)
    cls = np.asarray(io["write"], bool).astype(np.int64) * 64 + k           # kind and size class
    ids, inv = np.unique(cls, return_inverse=True)
    names = np.array([f"{'write' if c >= 64 else 'read'} {size_label(2.0 ** (c % 64))}" for c in ids.tolist()],
                     dtype=object)
    blocks = io.get("blocks")
    if blocks is None:
        return names[inv]
    # sequential: starts where the previous I/O of its kind and size ended (in submission order)
    order = np.lexsort((np.arange(n), np.asarray(io["submit"], float), inv))
    slba = np.asarray(io["slba"], float)[order]
    end = slba + np.asarray(blocks, float)[order]
    g = inv[order]
    seq = np.zeros(n, bool)
    seq[order[1:]] = (g[1:] == g[:-1]) & (slba[1:] == end[:-1])
    share = np.bincount(inv, weights=seq, minlength=len(ids)) / np.bincount(inv, minlength=len(ids))
    full = np.array([f"{nm} {'seq' if r > 0.5 else 'rand'}" for nm, r in zip(names.tolist(), share.tolist())],
                    dtype=object)
    return full[inv]


def windows_of(t0: float, t1: float) -> np.ndarray:
    """Window edges (s) inside [t0 + EDGE_S, t1 - EDGE_S]; empty when too short."""
    a, b = t0 + EDGE_S, t1 - EDGE_S
    n = int((b - a) // WINDOW_S)
    return a + np.arange(n + 1) * WINDOW_S if n >= 1 else np.empty(0)


def window_energy(p: np.ndarray, t_first: float, dt: float, edges: np.ndarray) -> np.ndarray:
    """Energy (J) of the rails in each window [edges[i], edges[i+1]): ``p`` is power per interval
    starting at time ``t_first``; partial intervals at the edges count by their overlap."""
    cum = np.concatenate([[0.0], np.cumsum(np.nan_to_num(p, nan=0.0)) * dt])

    def at(t):
        x = np.clip((t - t_first) / dt, 0, len(p))
        k = np.minimum(np.floor(x).astype(int), len(p) - 1)
        return cum[k] + (x - k) * p[k] * dt
    e = at(edges)
    return np.diff(e)


def estimate(energy: np.ndarray, seconds: np.ndarray, counts: np.ndarray, names: list[str]) -> list[IoClassEnergy]:
    """OLS of window energy on window length (the baseline) and per-class counts; see the module."""
    X = np.column_stack([seconds, counts]).astype(float)
    y = np.asarray(energy, float)
    keep = np.isfinite(y)
    X, y = X[keep], y[keep]
    cols = [k for k in range(counts.shape[1]) if X[:, 1 + k].sum() > 0]
    out: list[IoClassEnergy] = []
    Xs = X[:, [0] + [1 + k for k in cols]]
    n, m = Xs.shape
    if n <= m + 1 or not cols:
        return [IoClassEnergy(names[k], int(counts[:, k].sum()), math.nan, math.nan, math.nan, math.nan, n,
                              "too few windows to fit") for k in cols]
    rank = np.linalg.matrix_rank(Xs)
    if rank < m:
        return [IoClassEnergy(names[k], int(counts[:, k].sum()), math.nan, math.nan, math.nan, math.nan, n,
                              "its counts move in step with another class's: the classes cannot be told apart")
                for k in cols]
    beta, *_ = np.linalg.lstsq(Xs, y, rcond=None)
    resid = y - Xs @ beta
    dof = n - m
    s2 = float(resid @ resid) / dof
    cov = s2 * np.linalg.inv(Xs.T @ Xs)
    t = _t975(dof)
    for j, k in enumerate(cols, start=1):
        se = math.sqrt(max(cov[j, j], 0.0))
        ios = int(counts[:, k].sum())
        out.append(IoClassEnergy(names[k], ios, float(beta[j]), float(beta[j] - t * se), float(beta[j] + t * se),
                                 float(beta[0]), n, f"only {ios} I/Os of the class in the phase: the interval says how "
                                                    "little they tell" if ios < MIN_IOS else None))
    return out


def _t975(dof: int) -> float:
    try:
        from scipy.stats import t
        return float(t.ppf(0.975, dof))
    except ImportError:               # the normal quantile: windows number in the hundreds
        return 1.959964


def io_energy(p: np.ndarray, t_first: float, dt: float, io: dict, spans: list[tuple[float, float]],
              idle: tuple[float, float] | None) -> list[IoClassEnergy]:
    """Energy per I/O class over the workload ``spans`` (s, the capture's clock) and the ``idle``
    span before them; ``io``: the traced I/O (NvmeTrace.io_arrays() with times on the capture's
    clock, ``blocks`` optional for sequential/random)."""
    labels = classes(io)
    names = sorted(set(labels))
    mid = (io["submit"] + io["complete"]) / 2 if len(labels) else np.empty(0)
    rows_e, rows_t, rows_n = [], [], []
    for a, b in ([idle] if idle else []) + list(spans):
        edges = windows_of(a, b)
        if len(edges) < 2:
            continue
        rows_e.append(window_energy(p, t_first, dt, edges))
        rows_t.append(np.diff(edges))
        cnt = np.zeros((len(edges) - 1, len(names)))
        for k, nm in enumerate(names):
            m = mid[labels == nm]
            cnt[:, k] = np.histogram(m, bins=edges)[0]
        rows_n.append(cnt)
    if not rows_e or not names:
        return []
    return estimate(np.concatenate(rows_e), np.concatenate(rows_t), np.vstack(rows_n), names)
