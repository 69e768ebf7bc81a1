//! Integer forms of the step's float operations, bit for bit the float ones (the tests compare
//! them over every input class): the board's CPU has no FPU, and a soft-float `f64` multiply
//! and `rint` cost it hundreds of cycles an element.

use alloc::vec::Vec;
use systole_core::numeric::{convert, convert32, Lfsr32};
use systole_core::Rounding;

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

/// [`scaled_rint`] when its magnitude is below `2^31` (`None` otherwise, and for NaN and the
/// infinities), formed in 32-bit arithmetic: an input word's path.
#[inline]
pub fn scaled_rint32(x: f32, k: u32) -> Option<i32> {
    let bits = x.to_bits();
    let e = ((bits >> 23) & 0xFF) as i32;
    let m = bits & 0x7F_FFFF;
    if e == 0xFF {
        return None;
    }
    let (mant, exp) = match e {
        0 => (m, -149),
        _ => (m | 0x80_0000, e - 150),
    };
    let exp = exp + k as i32;
    let mag: u32 = if exp >= 0 {
        // Below 2^31: mant's bits plus exp at most 31.
        if mant != 0 && (32 - mant.leading_zeros()) as i32 + exp > 31 {
            return None;
        }
        mant << exp
    } else if exp < -25 {
        0
    } else {
        let r = (-exp) as u32;
        let q = mant >> r;
        let rem = mant & ((1 << r) - 1);
        let half = 1 << (r - 1);
        q + u32::from(rem > half || (rem == half && q & 1 == 1))
    };
    Some(if bits >> 31 == 1 {
        -(mag as i32)
    } else {
        mag as i32
    })
}

/// The words of an import at `frac` fractional bits: `rint(x · 2^(frac + 16))` converted with
/// a 16-bit shift by `rounding` (one LFSR from `seed`, stepped once a value), in 32-bit
/// arithmetic when the scaled value fits it: the words of
/// `convert_each(v.map(|x| scaled_rint(x, frac + 16)), 16, rounding, seed)`.
pub fn import_words(v: &[f32], frac: u32, rounding: Rounding, seed: u32) -> Vec<i16> {
    let k = frac + 16;
    let mut lfsr = Lfsr32::new(seed);
    v.iter()
        .map(|&x| {
            let r = lfsr.step();
            match scaled_rint32(x, k) {
                Some(s) => convert32(s, 16, rounding, r, 16) as i16,
                None => convert(scaled_rint(x, k), 16, rounding, r, 16) as i16,
            }
        })
        .collect()
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
        let mut narrow = 0;
        for &x in &xs {
            for k in [0, 1, 5, 15, 16, 17, 20, 25, 31, 40, 63, 64] {
                let want = float_rint(x, k);
                assert_eq!(scaled_rint(x, k), want, "{x:e} ({:#x}) k {k}", x.to_bits());
                // The 32-bit form: the same value whenever it fits i32, else none.
                let fits = want.unsigned_abs() < 1 << 31 && x.is_finite();
                let got = scaled_rint32(x, k);
                assert_eq!(got, fits.then_some(want as i32), "{x:e} k {k}");
                narrow += usize::from(got.is_some());
            }
        }
        // Both paths are exercised widely.
        assert!(narrow > xs.len() * 3, "{narrow} of {}", xs.len() * 12);
    }

    /// The fused import gives the words of the rounding integers converted in 64 bits, for
    /// values that fit 32 bits after scaling and values that do not, at every rounding.
    #[test]
    fn import_words_are_the_64_bit_conversion() {
        use systole_core::elementwise::convert_each;
        let mut s = 0x0BAD_5EEDu32;
        let mut v: Vec<f32> = Vec::new();
        for _ in 0..20_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            v.push((s % 4096) as f32 / 16.0 - 128.0);
            // Any sign and magnitude from 2^-40 to 2^16 (past 2^31 once scaled, inside the
            // accumulator's 48 bits as the conversion requires).
            let e = (s >> 8) % 56 + 87;
            v.push(f32::from_bits((s & 0x807F_FFFF) | (e << 23)));
        }
        v.extend([0.0, -0.0, f32::NAN, f32::from_bits(1), 0.5, -0.5, 1.5]);
        for rounding in Rounding::ALL {
            for frac in [0, 3, 8, 15] {
                let wide = v.iter().map(|&x| scaled_rint(x, frac + 16));
                let want = convert_each(wide, 16, rounding, 99);
                assert_eq!(
                    import_words(&v, frac, rounding, 99),
                    want,
                    "{rounding:?} {frac}"
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
