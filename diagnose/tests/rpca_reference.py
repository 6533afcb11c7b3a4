"""A plain numpy reference of principal component pursuit by the inexact
augmented Lagrange multiplier method (Lin, Chen and Ma 2010, Algorithm 5),
for diagnose/tests/rpca.rs only: numpy's full SVD at every iteration, no
reduction, no shortcut.

Usage: python rpca_reference.py M.txt LAMBDA TOL MAX_ITER RHO L.txt E.txt
Prints "rank iterations".
"""
import sys

import numpy as np


def pcp(d, lam, tol, max_iter, rho):
    norm_two = np.linalg.norm(d, 2)
    y = d / max(norm_two, np.abs(d).max() / lam)
    mu = 1.25 / norm_two
    mu_max = mu * 1e7
    low = np.zeros_like(d)
    sparse = np.zeros_like(d)
    d_norm = np.linalg.norm(d, "fro")
    rank = 0
    for k in range(1, max_iter + 1):
        t = d - low + y / mu
        sparse = np.sign(t) * np.maximum(np.abs(t) - lam / mu, 0.0)
        u, s, vt = np.linalg.svd(d - sparse + y / mu, full_matrices=False)
        rank = int((s > 1.0 / mu).sum())
        low = (u[:, :rank] * (s[:rank] - 1.0 / mu)) @ vt[:rank]
        z = d - low - sparse
        y = y + mu * z
        mu = min(mu * rho, mu_max)
        if np.linalg.norm(z, "fro") / d_norm <= tol:
            break
    return low, sparse, rank, k


def main():
    m = np.loadtxt(sys.argv[1], ndmin=2)
    lam, tol = float(sys.argv[2]), float(sys.argv[3])
    max_iter, rho = int(sys.argv[4]), float(sys.argv[5])
    low, sparse, rank, iterations = pcp(m, lam, tol, max_iter, rho)
    np.savetxt(sys.argv[6], low, fmt="%.17g")
    np.savetxt(sys.argv[7], sparse, fmt="%.17g")
    print(rank, iterations)


if __name__ == "__main__":
    main()
