//! Integer forms of the step's float operations, bit for bit the float ones (the tests compare
//! them over every input class): the board's CPU has no FPU, and a soft-float `f64` multiply
//! and `rint` cost it hundreds of cycles an element.

/// `libm::rint(x as f64 * 2^k) as i64` (the largest magnitude saturates, NaN is 0, as `as`
/// does) for `k <= 64`: `x · 2^k` is exact in `f64` (an `f32` has 24 significant bits and
/// its exponent range shifted by at most 64 stays inside `f64`'s normal range), so this is
/// that value rounded to the nearest integer, ties to even.
pub fn scaled_rint(x: f32, k: u32) -> i64 {
    let bits = x.to_bits();
    let neg = bits >> 31 == 1;
    let e = ((bits >> 23) & 0xFF) as i32;
    let m = bits & 0x7F_FFFF;
    let sat = if neg { i64::MIN } else { i64::MAX };
    if e == 0xFF {
        return if m == 0 { sat } else { 0 };
    }
    // |x| = mant · 2^exp exactly.
    let (mant, exp) = match e {
        0 => (m, -149),
        _ => (m | 0x80_0000, e - 150),
    };
    let exp = exp + k as i32;
    let mag: u64 = if exp >= 0 {
        // mant < 2^24: the value reaches 2^63 exactly when mant's bits plus exp exceed 63.
        if mant != 0 && (32 - mant.leading_zeros()) as i32 + exp > 63 {
            return sat;
        }
        (mant as u64) << exp
    } else if exp < -25 {
        0
    } else {
        let r = (-exp) as u32;
        let q = (mant >> r) as u64;
        let rem = mant & ((1 << r) - 1);
        let half = 1 << (r - 1);
        q + u64::from(rem > half || (rem == half && q & 1 == 1))
    };
    if neg {
        -(mag as i64)
    } else {
        mag as i64
    }
}

/// `v.iter().fold(0f64, |m, &x| m.max((x as f64).abs()))`: the largest magnitude of the
/// non-NaN values (0 for none), compared as bits (the order of non-negative floats).
pub fn max_abs(v: &[f32]) -> f64 {
    let top = v
        .iter()
        .map(|x| x.to_bits() & 0x7FFF_FFFF)
        .filter(|&b| b <= f32::INFINITY.to_bits())
        .max()
        .unwrap_or(0);
    f32::from_bits(top) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float_rint(x: f32, k: u32) -> i64 {
        libm::rint(x as f64 * (1u128 << k) as f64) as i64
    }

    /// Every class of input: zeros, subnormals, ties at every shift, values around 2^63, the
    /// extremes, infinities and NaN, at every scale the step uses and beyond; and a sweep of
    /// pseudo-random bit patterns.
    #[test]
    fn scaled_rint_is_the_float_rint_bit_for_bit() {
        let mut xs: alloc::vec::Vec<f32> = alloc::vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
            0.25,
            0.75,
            1.0 / 16.0,
            15.0 / 16.0,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::from_bits(0x7F_FFFF),
            f32::MAX,
            f32::MIN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            9.223372e18,
            -9.223372e18,
            4.2e9,
            3.0e-8,
            0.4999999,
            0.50000006,
        ];
        let mut s = 0x1234_5678u32;
        for _ in 0..200_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            xs.push(f32::from_bits(s));
            // Values near the step's range: pixels, gradients, small words.
            xs.push((s % 4096) as f32 / 16.0 - 128.0);
            xs.push(f32::from_bits(
                (s & 0x807F_FFFF) | (((s >> 8) % 40 + 100) << 23),
            ));
        }
        for p in 0..=255u32 {
            for d in [16.0f32, 255.0] {
                xs.push(p as f32 / d);
            }
        }
        for &x in &xs {
            for k in [0, 1, 5, 15, 16, 17, 20, 25, 31, 40, 63, 64] {
                assert_eq!(
                    scaled_rint(x, k),
                    float_rint(x, k),
                    "{x:e} ({:#x}) k {k}",
                    x.to_bits()
                );
            }
        }
    }

    #[test]
    fn max_abs_is_the_float_fold() {
        let fold = |v: &[f32]| v.iter().fold(0f64, |m, &x| m.max((x as f64).abs()));
        for v in [
            &[][..],
            &[f32::NAN],
            &[-3.5, 2.0, f32::NAN, -0.0],
            &[f32::NEG_INFINITY, 1.0],
            &[f32::from_bits(1), -f32::MIN_POSITIVE],
            &[0.0625, 0.9375, 0.5],
        ] {
            assert_eq!(max_abs(v).to_bits(), fold(v).to_bits(), "{v:?}");
        }
    }
}
