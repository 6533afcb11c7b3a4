//! Robust PCA by principal component pursuit: a matrix `M` is split into a
//! low-rank part `L` and a sparse part `E` (`M = L + E`) by solving
//!
//! ```text
//! minimise ‖L‖_* + λ‖E‖_1   subject to   L + E = M
//! ```
//!
//! with the inexact augmented Lagrange multiplier method of Lin, Chen and
//! Ma ("The augmented Lagrange multiplier method for exact recovery of
//! corrupted low-rank matrices", 2010, Algorithm 5), the method CloudDiag
//! cites. Each iteration shrinks the entries of `M − L + Y/μ` by `λ/μ` (the
//! new `E`), shrinks the singular values of `M − E + Y/μ` by `1/μ` (the new
//! `L`), moves the multiplier `Y` by `μ(M − L − E)` and grows `μ` by `ρ`.
//! The starting values are the paper's: `Y = M / max(‖M‖₂, ‖M‖_∞/λ)`,
//! `μ = 1.25/‖M‖₂`, `ρ = 1.5`, `μ` capped at `10⁷` times its start.
//!
//! The singular values and vectors come from `faer` (no decomposition is
//! written here). A diagnosis's matrices are tall (many runs, fewer
//! syscalls: 10 000 × 500 in the benchmark), and each iteration needs only
//! the singular values above `1/μ` and their right vectors, so they are
//! taken from faer's symmetric eigendecomposition of the small Gram matrix
//! `XᵀX` (`σ² ` and `V`) rather than from an SVD of `X` itself: about three
//! times as fast at that size (measured: 0.15 s against 0.5 s for faer's
//! thin SVD). Its rounding error in `σ` is about `n·ε·σ_max²/σ`, far below
//! the thresholds the iterations use until the very last ones, where it is
//! below the tolerance's scale; the test against numpy's SVD
//! (`diagnose/tests/rpca.rs`) agrees to 1e-14 of the largest entry.

use anyhow::bail;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{get_global_parallelism, Accum, Mat, MatRef, Side};

/// How to solve. The defaults are those of Lin, Chen and Ma.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PcpParams {
    /// The weight of the sparse part; `None` is `1/√max(m, n)` (Candès, Li,
    /// Ma and Wright's choice, under which recovery is proven).
    pub lambda: Option<f64>,
    /// Stop when `‖M − L − E‖_F ≤ tolerance · ‖M‖_F`.
    pub tolerance: f64,
    /// Stop after this many iterations even if not converged (the result
    /// then says so).
    pub max_iterations: usize,
    /// Growth of the penalty `μ` per iteration (larger: fewer iterations,
    /// less accurate).
    pub rho: f64,
}

impl Default for PcpParams {
    fn default() -> Self {
        PcpParams {
            lambda: None,
            tolerance: 1e-7,
            max_iterations: 1000,
            rho: 1.5,
        }
    }
}

/// `M = L + E`, and how it was found.
#[derive(Debug, Clone)]
pub struct Decomposition {
    /// The low-rank part `L`.
    pub low_rank: Mat<f64>,
    /// The sparse part `E`.
    pub sparse: Mat<f64>,
    /// The rank of `L` (singular values kept in the last iteration).
    pub rank: usize,
    /// The `λ` used.
    pub lambda: f64,
    /// Iterations made.
    pub iterations: usize,
    /// `‖M − L − E‖_F / ‖M‖_F` at the end.
    pub residual: f64,
    /// Whether the residual reached the tolerance.
    pub converged: bool,
}

/// The default `λ` for an `m × n` matrix: `1/√max(m, n)`.
pub fn default_lambda(rows: usize, cols: usize) -> f64 {
    1.0 / (rows.max(cols).max(1) as f64).sqrt()
}

/// Soft thresholding: `x` moved towards 0 by `t`, and 0 within `t` of it.
fn shrink(x: f64, t: f64) -> f64 {
    if x > t {
        x - t
    } else if x < -t {
        x + t
    } else {
        0.0
    }
}

/// The singular values (largest first) and right singular vectors of `a`
/// (`m ≥ n`), from faer's eigendecomposition of the `n × n` Gram matrix
/// `aᵀa` (eigenvalues `σ²`, eigenvectors `V`).
fn right_svd(a: MatRef<'_, f64>) -> anyhow::Result<(Vec<f64>, Mat<f64>)> {
    debug_assert!(a.nrows() >= a.ncols());
    let n = a.ncols();
    // Only the lower triangle is computed (and read): half the work.
    let mut gram = Mat::<f64>::zeros(n, n);
    triangular::matmul(
        gram.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        a.transpose(),
        BlockStructure::Rectangular,
        a,
        BlockStructure::Rectangular,
        1.0,
        get_global_parallelism(),
    );
    let evd = gram
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| anyhow::anyhow!("eigendecomposition did not converge: {e:?}"))?;
    // Eigenvalues come smallest first; rounding may leave tiny negatives.
    let values = evd.S().column_vector();
    let sigma = (0..n).rev().map(|i| values[i].max(0.0).sqrt()).collect();
    let vectors = evd.U();
    Ok((sigma, Mat::from_fn(n, n, |i, j| vectors[(i, n - 1 - j)])))
}

/// Singular value thresholding: `a`'s singular values shrunk by `tau`
/// (those below dropped), as a matrix, and how many were kept.
fn svt(a: MatRef<'_, f64>, tau: f64) -> anyhow::Result<(Mat<f64>, usize)> {
    if a.nrows() < a.ncols() {
        let (l, rank) = svt(a.transpose(), tau)?;
        return Ok((l.transpose().to_owned(), rank));
    }
    let (sigma, v) = right_svd(a)?;
    let rank = sigma.iter().take_while(|s| **s > tau).count();
    if rank == 0 {
        return Ok((Mat::zeros(a.nrows(), a.ncols()), 0));
    }
    // a = U Σ Vᵀ, so a V_k = U_k Σ_k and U_k (Σ_k − τ) V_kᵀ is
    // a V_k diag((σ − τ)/σ) V_kᵀ: no U needed. With more than half the
    // values kept, one product with the n × n matrix W = V_k diag V_kᵀ is
    // cheaper than two with V_k.
    let n = a.ncols();
    let vk = v.subcols(0, rank);
    let scaled = Mat::from_fn(n, rank, |i, j| vk[(i, j)] * (sigma[j] - tau) / sigma[j]);
    let low = if 2 * rank > n {
        let w = &scaled * vk.transpose();
        a * &w
    } else {
        let av = a * &scaled;
        &av * vk.transpose()
    };
    Ok((low, rank))
}

/// Applies `f(m, l, y) -> out` to every entry (all matrices `m × n`).
fn each(
    out: &mut Mat<f64>,
    m: &Mat<f64>,
    other: &Mat<f64>,
    y: &Mat<f64>,
    f: impl Fn(f64, f64, f64) -> f64,
) {
    for j in 0..m.ncols() {
        let (mc, oc, yc) = (m.col_as_slice(j), other.col_as_slice(j), y.col_as_slice(j));
        for (i, o) in out.col_as_slice_mut(j).iter_mut().enumerate() {
            *o = f(mc[i], oc[i], yc[i]);
        }
    }
}

/// Splits `m` into low-rank and sparse parts (see the module). Entries must
/// be finite.
pub fn pcp(m: &Mat<f64>, params: &PcpParams) -> anyhow::Result<Decomposition> {
    let (rows, cols) = (m.nrows(), m.ncols());
    let lambda = params.lambda.unwrap_or_else(|| default_lambda(rows, cols));
    if !(lambda.is_finite() && lambda > 0.0) {
        bail!("λ must be a positive number, not {lambda}");
    }
    if !(params.tolerance.is_finite() && params.tolerance > 0.0) {
        bail!("the tolerance must be a positive number");
    }
    if !(params.rho.is_finite() && params.rho > 1.0) {
        bail!("ρ must be larger than 1");
    }
    for j in 0..cols {
        if m.col_as_slice(j).iter().any(|x| !x.is_finite()) {
            bail!("the matrix holds a value that is not finite (column {j})");
        }
    }
    let m_norm = m.norm_l2();
    let zero = || Mat::<f64>::zeros(rows, cols);
    if rows == 0 || cols == 0 || m_norm == 0.0 {
        return Ok(Decomposition {
            low_rank: zero(),
            sparse: zero(),
            rank: 0,
            lambda,
            iterations: 0,
            residual: 0.0,
            converged: true,
        });
    }
    let spectral = if rows >= cols {
        right_svd(m.as_ref())?.0[0]
    } else {
        right_svd(m.transpose())?.0[0]
    };
    let dual = spectral.max(m.norm_max() / lambda);
    let mut y = Mat::from_fn(rows, cols, |i, j| m[(i, j)] / dual);
    let mut mu = 1.25 / spectral;
    let mu_cap = mu * 1e7;
    let mut low = zero();
    let mut sparse = zero();
    let mut work = zero();
    let mut rank = 0;
    let mut residual = f64::INFINITY;
    let mut iterations = 0;
    while iterations < params.max_iterations {
        iterations += 1;
        let inv_mu = 1.0 / mu;
        // E: the entries of M − L + Y/μ shrunk by λ/μ.
        each(&mut work, m, &low, &y, |m, l, y| {
            shrink(m - l + y * inv_mu, lambda * inv_mu)
        });
        std::mem::swap(&mut sparse, &mut work);
        // L: the singular values of M − E + Y/μ shrunk by 1/μ.
        each(&mut work, m, &sparse, &y, |m, e, y| m - e + y * inv_mu);
        (low, rank) = svt(work.as_ref(), inv_mu)?;
        // Y moves by μ times what is not yet explained.
        let mut gap_sq = 0.0;
        for j in 0..cols {
            let (mc, lc, ec) = (
                m.col_as_slice(j),
                low.col_as_slice(j),
                sparse.col_as_slice(j),
            );
            for (i, yv) in y.col_as_slice_mut(j).iter_mut().enumerate() {
                let z = mc[i] - lc[i] - ec[i];
                gap_sq += z * z;
                *yv += mu * z;
            }
        }
        mu = (mu * params.rho).min(mu_cap);
        residual = gap_sq.sqrt() / m_norm;
        if residual <= params.tolerance {
            break;
        }
    }
    Ok(Decomposition {
        low_rank: low,
        sparse,
        rank,
        lambda,
        iterations,
        residual,
        converged: residual <= params.tolerance,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrink_moves_towards_zero() {
        assert_eq!(shrink(3.0, 1.0), 2.0);
        assert_eq!(shrink(-3.0, 1.0), -2.0);
        assert_eq!(shrink(0.5, 1.0), 0.0);
        assert_eq!(shrink(-1.0, 1.0), 0.0);
    }

    #[test]
    fn zero_matrix_is_its_own_decomposition() {
        let d = pcp(&Mat::zeros(4, 3), &PcpParams::default()).unwrap();
        assert!(d.converged);
        assert_eq!(d.rank, 0);
        assert_eq!(d.iterations, 0);
    }

    #[test]
    fn refuses_non_finite_entries_and_bad_parameters() {
        let mut m = Mat::<f64>::zeros(3, 3);
        m[(1, 2)] = f64::NAN;
        let err = pcp(&m, &PcpParams::default()).unwrap_err();
        assert!(err.to_string().contains("not finite"), "{err}");
        let ok = Mat::<f64>::from_fn(3, 3, |i, j| (i + j) as f64);
        for bad in [
            PcpParams {
                lambda: Some(-1.0),
                ..PcpParams::default()
            },
            PcpParams {
                rho: 1.0,
                ..PcpParams::default()
            },
            PcpParams {
                tolerance: 0.0,
                ..PcpParams::default()
            },
        ] {
            assert!(pcp(&ok, &bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rank_one_matrix_with_one_gross_entry() {
        // An outer product (rank 1) with one entry corrupted: PCP puts the
        // corruption in E and keeps L of rank 1.
        let u: Vec<f64> = (0..30).map(|i| 1.0 + (i % 7) as f64 * 0.1).collect();
        let v: Vec<f64> = (0..20).map(|j| 2.0 + (j % 5) as f64 * 0.3).collect();
        let mut m = Mat::from_fn(30, 20, |i, j| u[i] * v[j]);
        m[(4, 7)] += 50.0;
        let d = pcp(&m, &PcpParams::default()).unwrap();
        assert!(d.converged, "residual {}", d.residual);
        assert_eq!(d.rank, 1);
        assert!(
            (d.sparse[(4, 7)] - 50.0).abs() < 1e-3,
            "{}",
            d.sparse[(4, 7)]
        );
        let mut off = 0.0f64;
        for (i, ui) in u.iter().enumerate() {
            for (j, vj) in v.iter().enumerate() {
                if (i, j) != (4, 7) {
                    off = off.max(d.sparse[(i, j)].abs());
                    assert!((d.low_rank[(i, j)] - ui * vj).abs() < 1e-3);
                }
            }
        }
        assert!(off < 1e-3, "largest other |E| {off}");
    }
}
