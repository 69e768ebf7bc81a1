//! The SGD update's exact sums, `coef·x + (b << shift)` per pair of words (the momentum
//! `mu_q·v + (g << s)` and the weight `(w << s) - lr_q·v`), converted once with the host-side
//! rule. Formed in `i32` when the operands' largest magnitudes prove every sum fits it (with the
//! usual momentum and formats they do), else in `i64`: the same integers either way, and the
//! board's CPU has no 64-bit multiply.

use crate::width::frac_for_exact_at;
use alloc::vec::Vec;
use systole_core::elementwise::{convert_each, convert_each32};
use systole_core::Rounding;

fn largest(t: &[i16]) -> u64 {
    u64::from(
        t.iter()
            .map(|&w| i32::from(w).unsigned_abs())
            .max()
            .unwrap_or(0),
    )
}

/// Whether `|coef·x + (b << shift)| <= i32::MAX` for every word `x` of `xs` and `b` of `bs`.
fn sums_fit_i32(coef: i64, xs: &[i16], bs: &[i16], shift: u32) -> bool {
    shift < 32
        && coef
            .unsigned_abs()
            .checked_mul(largest(xs))
            .and_then(|p| p.checked_add(largest(bs) << shift))
            .is_some_and(|s| s <= i32::MAX as u64)
}

/// `coef·x + (b << shift)` for each pair `(x, b)` of `xs` and `bs`, exact integers with
/// `frac_in` fractional bits, converted to `width`-bit words at the largest `frac` that fits
/// them ([`frac_for_exact_at`]): the sums are formed twice (for their largest magnitude, then to
/// convert them) rather than stored, as a tensor of them would be four times the words' RAM.
/// Returns the `frac` and the words.
pub(crate) fn convert_affine(
    (coef, xs): (i64, &[i16]),
    (bs, shift): (&[i16], u32),
    (frac_in, width): (u32, u32),
    rounding: Rounding,
    seed: u32,
) -> (u32, Vec<i16>) {
    if sums_fit_i32(coef, xs, bs, shift) {
        // `coef` fits i32 unless every x is 0 (then its products are 0 whatever it is).
        let c = coef as i32;
        let sums = || {
            xs.iter()
                .zip(bs)
                .map(move |(&x, &b)| c.wrapping_mul(i32::from(x)) + (i32::from(b) << shift))
        };
        let m = sums().map(i32::unsigned_abs).max().unwrap_or(0);
        let frac = frac_for_exact_at(i64::from(m), frac_in, width);
        let words = convert_each32(sums(), frac_in - frac, rounding, seed);
        (frac, words)
    } else {
        let sums = || {
            xs.iter()
                .zip(bs)
                .map(move |(&x, &b)| coef * i64::from(x) + (i64::from(b) << shift))
        };
        let m = sums().map(i64::abs).max().unwrap_or(0);
        let frac = frac_for_exact_at(m, frac_in, width);
        let words = convert_each(sums(), frac_in - frac, rounding, seed);
        (frac, words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `i32` path gives the `i64` path's words and frac, and is taken exactly when the sums
    /// fit: the usual momentum and rates, extreme words, shifts up to the largest.
    #[test]
    fn the_i32_path_is_the_i64_path() {
        let wide = |coef: i64, xs: &[i16], bs: &[i16], shift: u32, frac_in: u32| {
            let sums: Vec<i64> = xs
                .iter()
                .zip(bs)
                .map(|(&x, &b)| coef * i64::from(x) + (i64::from(b) << shift))
                .collect();
            let m = sums.iter().map(|s| s.abs()).max().unwrap_or(0);
            let frac = frac_for_exact_at(m, frac_in, 16);
            (
                frac,
                convert_each(sums.into_iter(), frac_in - frac, Rounding::Stochastic, 7),
            )
        };
        let mut s = 0x2545_F491u32;
        let mut word = |range: i32| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            ((s % (2 * range as u32 + 1)) as i32 - range) as i16
        };
        let mut fast = 0;
        for (coef, range, shift) in [
            (29_491, 32_767, 12),
            (29_491, 32_767, 14),
            (-3_277, 32_767, 15),
            (-3_277, 32_767, 16),
            (1 << 15, 32_768, 14),
            (-65_536, 4_000, 12),
            (1 << 20, 3, 20),
            (0, 32_767, 31),
            (i64::from(i32::MAX) * 4, 1, 0),
            // Small sums converted without a shift: every word shows its sum.
            (5, 200, 3),
            (-7, 1_000, 0),
        ] {
            let xs: Vec<i16> = (0..300)
                .map(|_| word(range))
                .chain([i16::MIN, i16::MAX])
                .collect();
            let bs: Vec<i16> = (0..302).map(|_| word(range)).collect();
            let frac_in = if range > 1_000 { 15 + 12 } else { 15 };
            let got = convert_affine(
                (coef, &xs),
                (&bs, shift),
                (frac_in, 16),
                Rounding::Stochastic,
                7,
            );
            assert_eq!(
                got,
                wide(coef, &xs, &bs, shift, frac_in),
                "{coef} {range} {shift}"
            );
            fast += usize::from(sums_fit_i32(coef, &xs, &bs, shift));
        }
        // The first, second, third, fifth and the last two fit i32; the rest do not.
        assert_eq!(fast, 6);
        assert!(sums_fit_i32(29_491, &[i16::MIN], &[i16::MIN], 14));
        assert!(!sums_fit_i32(29_491, &[i16::MIN], &[i16::MIN], 16));
    }
}
