//! Exact `i16 x i16 -> i64` matrix products: the golden model's hot loop.
//!
//! Three kernels give identical (exact) results; [`gemm_exact`] picks the first the CPU has:
//! * [`gemm_exact_amx`]: AMX-INT8 tile products. Both operands are split into a signed high and
//!   an unsigned low byte (`x = 256*hi + lo`); the four byte products accumulate exactly in
//!   `i32` tiles over blocks of up to 2^15 k steps and are widened into the `i64` result as
//!   `65536*hh + 256*(hl + lh) + ll` (bounds in `amx.rs`).
//! * [`gemm_exact_vnni`]: AVX-512 VNNI `vpdpwssd`. `B` is split into a signed high byte and an
//!   unsigned low byte (`b = 256*hi + lo`), so every pairwise sum `a0*b0 + a1*b1` is below
//!   `2 * 32768 * 255 < 2^24` and 128 of them (256 k steps) fit an `i32` lane without
//!   overflow; each such block is then widened into the `i64` result as `256*sum_hi + sum_lo`.
//! * [`gemm_exact_f64`]: `f64` dgemm. Every product (`<= 2^30`) and partial sum (`< 2^47`) is an
//!   integer below `2^53`, so it is exact in any summation order.

/// `C = A·B` exactly; `a` is `m x k`, `b` is `k x n`, both row-major; `C` is `m x n` row-major.
pub fn gemm_exact(a: &[i16], b: &[i16], m: usize, k: usize, n: usize) -> Vec<i64> {
    gemm_exact_amx(a, b, m, k, n)
        .or_else(|| gemm_exact_vnni(a, b, m, k, n))
        .unwrap_or_else(|| gemm_exact_f64(a, b, m, k, n))
}

/// [`gemm_exact`] handed to `sink` in row order as `sink(first_row, rows)`, `rows` holding one or
/// more whole rows of `n`; never called when `m` or `n` is 0. The AMX kernel streams stripes
/// of 16 rows, so a consumer (the output conversion) reads them while they are still in cache
/// and `C` is never stored whole; the other kernels hand over all of `C` at once.
pub fn gemm_exact_rows(
    a: &[i16],
    b: &[i16],
    m: usize,
    k: usize,
    n: usize,
    sink: &mut dyn FnMut(usize, &[i64]),
) {
    assert!(
        a.len() == m * k && b.len() == k * n,
        "gemm_exact_rows: operand lengths do not match the shape"
    );
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        if amx::available() {
            return amx::gemm_rows(a, b, m, k, n, sink);
        }
    }
    if m > 0 && n > 0 {
        sink(0, &gemm_exact(a, b, m, k, n));
    }
}

/// The AMX-INT8 kernel; `None` when the CPU lacks it or Linux does not grant the tile state
/// (elsewhere than Linux: always `None`).
pub fn gemm_exact_amx(a: &[i16], b: &[i16], m: usize, k: usize, n: usize) -> Option<Vec<i64>> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        if amx::available() {
            assert!(
                a.len() == m * k && b.len() == k * n,
                "gemm_exact_amx: operand lengths do not match the shape"
            );
            let mut c = Vec::with_capacity(m * n);
            amx::gemm_rows(a, b, m, k, n, &mut |_, rows| c.extend_from_slice(rows));
            return Some(c);
        }
    }
    let _ = (a, b, m, k, n);
    None
}

/// The portable kernel (`f64` dgemm).
pub fn gemm_exact_f64(a: &[i16], b: &[i16], m: usize, k: usize, n: usize) -> Vec<i64> {
    assert!(
        a.len() == m * k && b.len() == k * n,
        "gemm_exact_f64: operand lengths do not match the shape"
    );
    let af: Vec<f64> = a.iter().map(|&x| x as f64).collect();
    let bf: Vec<f64> = b.iter().map(|&x| x as f64).collect();
    let mut cf = vec![0f64; m * n];
    if m > 0 && n > 0 && k > 0 {
        // SAFETY: the slices are exactly m*k, k*n and m*n long and the strides describe
        // row-major layouts inside them.
        unsafe {
            matrixmultiply::dgemm(
                m,
                k,
                n,
                1.0,
                af.as_ptr(),
                k as isize,
                1,
                bf.as_ptr(),
                n as isize,
                1,
                0.0,
                cf.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    }
    cf.into_iter().map(|x| x as i64).collect()
}

/// The AVX-512 VNNI kernel; `None` when the CPU lacks it.
pub fn gemm_exact_vnni(a: &[i16], b: &[i16], m: usize, k: usize, n: usize) -> Option<Vec<i64>> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vnni")
        {
            assert!(
                a.len() == m * k && b.len() == k * n,
                "gemm_exact_vnni: operand lengths do not match the shape"
            );
            return Some(vnni::gemm(a, b, m, k, n));
        }
    }
    let _ = (a, b, m, k, n);
    None
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod amx;
#[cfg(target_arch = "x86_64")]
mod vnni;

#[cfg(test)]
mod tests;
