//! The native encoder's matrix product, `out[rows, n] += x[rows, k] · W[k, n]`, for weights
//! that are fixed for the life of the model.
//!
//! On a CPU with AVX-512 the weight is packed once, at load, into panels of [`NR`] columns
//! (`k` rows of `NR` contiguous floats, 64-byte aligned), and the product runs a
//! register-blocked kernel of [`MR`] rows × [`NR`] columns: 24 of the 32 vector registers hold
//! the block's sums, each step loads two weight vectors and broadcasts one `x` value per row,
//! and the reduction dimension is cut into blocks of [`KC`] so a panel's slice stays in L1.
//! Elsewhere the weight stays row-major and the product is `gemm`'s (AVX2/FMA where present).
//!
//! Both paths sum in f32; they differ only in the order of the additions.

/// Columns per packed panel (two 16-float vectors).
const NR: usize = 32;
/// Rows per kernel call.
const MR: usize = 12;
/// Reduction-dimension block: a panel slice of `KC × NR` floats is 32 KB.
const KC: usize = 256;

/// One cache line of floats, so packed panels start 64-byte aligned.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

enum Layout {
    /// `[k, n]` row-major.
    RowMajor(Vec<f32>),
    /// `n.div_ceil(NR)` panels, each `k` rows of `NR` floats (zero past column `n`).
    Panels(Vec<Line>),
}

/// A weight matrix `W[k, n]`, laid out for the product this CPU runs fastest.
pub(crate) struct Weight {
    k: usize,
    n: usize,
    layout: Layout,
}

/// Environment variable that, set to `gemm`, keeps the row-major `gemm` path on a CPU that has
/// AVX-512 (to compare the two kernels in one binary, e.g. with `cardinal bench embed`).
pub const KERNEL_ENV: &str = "CARDINAL_EMBED_KERNEL";

/// Whether the packed AVX-512 kernel runs here: the CPU has AVX-512F and [`KERNEL_ENV`] is not
/// `gemm`. Read when a model's weights are loaded.
pub fn packed_kernel_available() -> bool {
    !std::env::var(KERNEL_ENV).is_ok_and(|v| v == "gemm") && cpu_has_avx512f()
}

fn cpu_has_avx512f() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

impl Weight {
    /// `wt` is `[k, n]` row-major.
    pub(crate) fn new(wt: Vec<f32>, k: usize, n: usize) -> Weight {
        Weight::with_layout(wt, k, n, packed_kernel_available())
    }

    /// `packed` must only be true where [`packed_kernel_available`] is.
    fn with_layout(wt: Vec<f32>, k: usize, n: usize, packed: bool) -> Weight {
        assert_eq!(
            wt.len(),
            k * n,
            "weight of {} floats is not [{k}, {n}]",
            wt.len()
        );
        if !packed {
            return Weight {
                k,
                n,
                layout: Layout::RowMajor(wt),
            };
        }
        let panels = n.div_ceil(NR);
        // NR = 32 floats is two lines per row of a panel.
        let mut lines = vec![Line([0.0; 16]); panels * k * 2];
        for j in 0..panels {
            let cols = NR.min(n - j * NR);
            for p in 0..k {
                let src = &wt[p * n + j * NR..p * n + j * NR + cols];
                let row = &mut lines[(j * k + p) * 2..(j * k + p) * 2 + 2];
                for (c, &v) in src.iter().enumerate() {
                    row[c / 16].0[c % 16] = v;
                }
            }
        }
        Weight {
            k,
            n,
            layout: Layout::Panels(lines),
        }
    }

    pub(crate) fn n(&self) -> usize {
        self.n
    }

    /// `out[rows, n] += x[rows, k] · W`, single-threaded.
    pub(crate) fn product_acc(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        let (k, n) = (self.k, self.n);
        assert!(x.len() >= rows * k && out.len() >= rows * n);
        match &self.layout {
            Layout::RowMajor(wt) => {
                // SAFETY: x is [rows, k], wt is [k, n] and out is [rows, n], all row-major;
                // the lengths are checked above and at construction.
                unsafe {
                    gemm::gemm(
                        rows,
                        n,
                        k,
                        out.as_mut_ptr(),
                        1,
                        n as isize,
                        true,
                        x.as_ptr(),
                        1,
                        k as isize,
                        wt.as_ptr(),
                        1,
                        n as isize,
                        1.0,
                        1.0,
                        false,
                        false,
                        false,
                        gemm::Parallelism::None,
                    );
                }
            }
            Layout::Panels(lines) => {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: panels are only built where the CPU has AVX-512F (`with_layout`'s
                // contract); the buffer lengths are checked above.
                unsafe {
                    avx512::product_acc(x, rows, k, lines.as_ptr().cast::<f32>(), n, out)
                }
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!("packed weights are only built on x86-64 with AVX-512F: {lines:p}")
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{KC, MR, NR};

    /// `out[rows, n] += x[rows, k] · W` with `w` the packed panels of a `[k, n]` weight.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `x` holds `rows · k` floats, `out` `rows · n`, and `w` the
    /// `n.div_ceil(NR) · k · NR` floats of the panels.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn product_acc(
        x: &[f32],
        rows: usize,
        k: usize,
        w: *const f32,
        n: usize,
        out: &mut [f32],
    ) {
        let (x, out) = (x.as_ptr(), out.as_mut_ptr());
        let panels = n.div_ceil(NR);
        let mut p0 = 0;
        while p0 < k {
            let kc = KC.min(k - p0);
            for j in 0..panels {
                let cols = NR.min(n - j * NR);
                let m0: __mmask16 = if cols >= 16 { 0xFFFF } else { (1 << cols) - 1 };
                let m1: __mmask16 = if cols >= 32 {
                    0xFFFF
                } else if cols > 16 {
                    (1 << (cols - 16)) - 1
                } else {
                    0
                };
                // SAFETY (for the pointer arithmetic below): every offset stays inside the
                // buffers the caller described.
                unsafe {
                    let b = w.add(j * k * NR + p0 * NR);
                    let mut i = 0;
                    while i < rows {
                        let mr = MR.min(rows - i);
                        let a = x.add(i * k + p0);
                        let c = out.add(i * n + j * NR);
                        match mr {
                            12 => micro::<12>(a, k, b, kc, c, n, m0, m1),
                            11 => micro::<11>(a, k, b, kc, c, n, m0, m1),
                            10 => micro::<10>(a, k, b, kc, c, n, m0, m1),
                            9 => micro::<9>(a, k, b, kc, c, n, m0, m1),
                            8 => micro::<8>(a, k, b, kc, c, n, m0, m1),
                            7 => micro::<7>(a, k, b, kc, c, n, m0, m1),
                            6 => micro::<6>(a, k, b, kc, c, n, m0, m1),
                            5 => micro::<5>(a, k, b, kc, c, n, m0, m1),
                            4 => micro::<4>(a, k, b, kc, c, n, m0, m1),
                            3 => micro::<3>(a, k, b, kc, c, n, m0, m1),
                            2 => micro::<2>(a, k, b, kc, c, n, m0, m1),
                            _ => micro::<1>(a, k, b, kc, c, n, m0, m1),
                        }
                        i += mr;
                    }
                }
            }
            p0 += kc;
        }
    }

    /// `c[M, NR] += a[M, kc] · b[kc, NR]` (columns past the masks untouched).
    ///
    /// # Safety
    /// AVX-512F; `a` rows of stride `lda` hold `kc` floats, `b` holds `kc · NR` floats, `c`
    /// rows of stride `ldc` hold the masked columns.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn micro<const M: usize>(
        a: *const f32,
        lda: usize,
        b: *const f32,
        kc: usize,
        c: *mut f32,
        ldc: usize,
        m0: __mmask16,
        m1: __mmask16,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 2]; M];
        // SAFETY: offsets within the caller's buffers (see above).
        unsafe {
            for p in 0..kc {
                let b0 = _mm512_load_ps(b.add(p * NR));
                let b1 = _mm512_load_ps(b.add(p * NR + 16));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let av = _mm512_set1_ps(*a.add(r * lda + p));
                    acc[0] = _mm512_fmadd_ps(av, b0, acc[0]);
                    acc[1] = _mm512_fmadd_ps(av, b1, acc[1]);
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                let cr = c.add(r * ldc);
                let c0 = _mm512_maskz_loadu_ps(m0, cr);
                _mm512_mask_storeu_ps(cr, m0, _mm512_add_ps(c0, acc[0]));
                let c1 = _mm512_maskz_loadu_ps(m1, cr.add(16));
                _mm512_mask_storeu_ps(cr.add(16), m1, _mm512_add_ps(c1, acc[1]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[f32], rows: usize, k: usize, wt: &[f32], n: usize, out: &[f32]) -> Vec<f32> {
        let mut want = out.to_vec();
        for r in 0..rows {
            for c in 0..n {
                let s: f64 = (0..k)
                    .map(|p| x[r * k + p] as f64 * wt[p * n + c] as f64)
                    .sum();
                want[r * n + c] += s as f32;
            }
        }
        want
    }

    fn check(packed: bool) {
        // Shapes off every block size: rows not a multiple of MR, k past KC and not a multiple
        // of it, n with a partial panel in each half and one under a half.
        for (rows, k, n) in [
            (1, 1, 1),
            (13, 300, 45),
            (25, 513, 70),
            (12, 256, 32),
            (3, 7, 9),
        ] {
            let x: Vec<f32> = (0..rows * k).map(|i| (i as f32 * 0.37).sin()).collect();
            let wt: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
            let start: Vec<f32> = (0..rows * n).map(|i| i as f32 * 0.5 - 3.0).collect();
            let want = naive(&x, rows, k, &wt, n, &start);
            let w = Weight::with_layout(wt, k, n, packed);
            // A guard column past the end must not be written.
            let mut out = start.clone();
            out.push(42.0);
            w.product_acc(&x, rows, &mut out);
            assert_eq!(
                out[rows * n],
                42.0,
                "wrote past the output ({rows}, {k}, {n})"
            );
            for (i, (g, e)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (g - e).abs() <= 1e-4 * (1.0 + e.abs()),
                    "({rows}, {k}, {n}) [{i}]: {g} vs {e}"
                );
            }
        }
    }

    #[test]
    fn row_major_product_matches_a_naive_product() {
        check(false);
    }

    #[test]
    fn packed_product_matches_a_naive_product() {
        if !cpu_has_avx512f() {
            eprintln!("this CPU has no AVX-512F: the packed kernel is not run here");
            return;
        }
        check(true);
    }
}
