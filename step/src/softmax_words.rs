//! The softmax cross-entropy of [`crate::loss`] from fixed-point logits (words with `frac`
//! fractional bits), bit for bit the f32 form on their host values: the board's CPU has no
//! FPU, and each f32 operation is a soft-float call. The f32 values the float form computes are
//! formed in integers where that is exact or provably the same rounding: the row's largest
//! logit and its arg max (word order is value order), `v - m` (the difference of two words is
//! exact in f32), `e^(v - m)` from that difference ([`exp_neg_words`]), the row's sum of
//! non-negative f32 ([`add_nonneg`]) and the gradient's division by a power-of-two batch
//! ([`div_pow2`]). The divisions by the row's sum and the `ln` stay float operations.

use crate::exp::exp_neg_words;
use crate::loss::ln;
use alloc::vec;
use alloc::vec::Vec;
use systole_core::tensor::QMatrix;

/// `a + b` rounded to nearest-even for non-negative finite `a` and `b` (a soft-float call for
/// zeros, subnormals or an overflow, which the integer form leaves out).
#[inline]
pub fn add_nonneg(a: f32, b: f32) -> f32 {
    let (x, y) = (a.to_bits(), b.to_bits());
    // Non-negative floats order as their bits: `hi` has the larger exponent.
    let (hi, lo) = if x >= y { (x, y) } else { (y, x) };
    let (ehi, elo) = (hi >> 23, lo >> 23);
    if elo == 0 || ehi >= 0xFE {
        // Zero, subnormal, negative (sign bit set makes the field >= 0x100) or near overflow.
        return a + b;
    }
    // Significands with their hidden bit and three bits below (guard, round, sticky).
    let mhi = ((hi & 0x7F_FFFF) | 0x80_0000) << 3;
    let mlo = ((lo & 0x7F_FFFF) | 0x80_0000) << 3;
    let d = ehi - elo;
    let aligned = if d >= 27 {
        // Entirely below the guard bits: only the sticky bit remains.
        1
    } else {
        (mlo >> d) | u32::from(mlo & ((1 << d) - 1) != 0)
    };
    let mut sum = mhi + aligned;
    let mut e = ehi;
    if sum >= 1 << 27 {
        // A carry out: one more exponent, the bit shifted out kept sticky.
        sum = (sum >> 1) | (sum & 1);
        e += 1;
    }
    let (q, rem) = (sum >> 3, sum & 7);
    let q = q + u32::from(rem > 4 || (rem == 4 && q & 1 == 1));
    // q carries the hidden bit (2^23), which adds one to the exponent field: subtract it first;
    // a rounding carry to 2^24 moves to the next exponent as it should (an infinity past 0xFE).
    f32::from_bits(((e - 1) << 23) + q)
}

/// `x / 2^k` of a finite `x` (the exponent field lowered by `k` while the result stays
/// normal, else the float division, which rounds a subnormal result).
#[inline]
pub fn div_pow2(x: f32, k: u32) -> f32 {
    let bits = x.to_bits();
    let e = (bits >> 23) & 0xFF;
    if e > k && e != 0xFF {
        f32::from_bits(bits - (k << 23))
    } else {
        x / (1u64 << k.min(63)) as f32
    }
}

/// Whether the words form takes logits `t` for `labels` of `classes` (a tensor's fraction, a
/// row of `classes` words per label); else the float form decides (and refuses) them.
pub fn fits(t: &QMatrix, labels: &[u8], classes: usize) -> bool {
    t.frac <= 15 && classes > 0 && Some(t.data.len()) == labels.len().checked_mul(classes)
}

/// The rows of the softmax from words: for each row `i`, `e = exp(z - max z)` and `s = sum e`
/// as the f32 form computes them, given to `each(i, e, s, label)`; returns the mean loss and
/// the correct count. `frac <= 15` (every tensor's).
fn rows(
    words: &[i16],
    frac: u32,
    labels: &[u8],
    classes: usize,
    mut each: impl FnMut(usize, &[f32], f32, usize),
) -> (f32, usize) {
    let b = labels.len();
    let mut e = vec![0f32; classes];
    let mut loss = 0f64;
    let mut correct = 0;
    for (i, (z, &label)) in words.chunks_exact(classes).zip(labels).enumerate() {
        // The first largest: the float form's arg max and its `m`.
        let (mut top, mut m) = (0, z[0]);
        for (c, &v) in z.iter().enumerate() {
            if v > m {
                (top, m) = (c, v);
            }
        }
        for (e, &v) in e.iter_mut().zip(z) {
            *e = exp_neg_words((i32::from(m) - i32::from(v)) as u32, frac);
        }
        // The float form's sum starts from -0.0, which adds nothing to the first term.
        let s = e[1..].iter().fold(e[0], |s, &x| add_nonneg(s, x));
        loss += -(ln((e[label as usize] / s).max(1e-30))) as f64;
        correct += usize::from(top == label as usize);
        each(i, &e, s, label as usize);
    }
    ((loss / b as f64) as f32, correct)
}

/// [`crate::loss::softmax_xent_scaled`] of the logits `words / 2^frac`, the same bits.
pub fn softmax_xent_words(
    (words, frac): (&[i16], u32),
    labels: &[u8],
    classes: usize,
    denom: usize,
) -> (f32, usize, Vec<f32>) {
    let mut grad = vec![0f32; labels.len() * classes];
    let pow2 = denom.is_power_of_two().then(|| denom.trailing_zeros());
    let (loss, correct) = rows(words, frac, labels, classes, |i, e, s, label| {
        for (c, g) in grad[i * classes..(i + 1) * classes].iter_mut().enumerate() {
            let p = e[c] / s;
            // `p - 0.0` is `p` for the non-negative `p`.
            let d = if c == label { p - 1.0 } else { p };
            *g = match pow2 {
                Some(k) => div_pow2(d, k),
                None => d / denom as f32,
            };
        }
    });
    (loss, correct, grad)
}

/// [`crate::loss::softmax_loss`] of the logits `words / 2^frac`, the same bits.
pub fn softmax_loss_words(
    (words, frac): (&[i16], u32),
    labels: &[u8],
    classes: usize,
) -> (f32, usize) {
    rows(words, frac, labels, classes, |_, _, _, _| {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::{softmax_loss, softmax_xent_scaled};
    use systole_core::tensor::word_to_f32;

    fn xorshift(s: &mut u32) -> u32 {
        *s ^= *s << 13;
        *s ^= *s >> 17;
        *s ^= *s << 5;
        *s
    }

    /// Non-negative pairs of every kind: near and far exponents, carries, ties, zeros,
    /// subnormals, the largest values: the hardware's f32 addition, bit for bit.
    #[test]
    fn add_nonneg_is_the_float_sum() {
        let mut s = 0xACE1_2345u32;
        let mut pairs = vec![
            (0.0f32, 0.0f32),
            (0.0, 1.0),
            (1.0, -0.0),
            (f32::from_bits(1), 1.0),
            (f32::MIN_POSITIVE, f32::MIN_POSITIVE),
            (f32::MAX, f32::MAX),
            (f32::MAX, 1.0e30),
            (1.0, f32::EPSILON / 2.0),
            (1.0, f32::EPSILON / 2.0 * 3.0),
            (1.0, 1.0),
            (0.75, 0.75),
        ];
        for _ in 0..2_000_000 {
            let a = xorshift(&mut s) & 0x7FFF_FFFF;
            let b = xorshift(&mut s) & 0x7FFF_FFFF;
            // Exponents within 30 of each other half the time.
            let near = (a & 0x807F_FFFF) | ((((a >> 23) & 0xFF) + 30).min(250) - (b >> 27)) << 23;
            pairs.push((f32::from_bits(a), f32::from_bits(b)));
            pairs.push((f32::from_bits(near), f32::from_bits(b)));
            // Softmax terms: at most 1, summed.
            pairs.push((
                f32::from_bits(a % 0x3F80_0001),
                f32::from_bits(b % 0x3F80_0001),
            ));
        }
        for (a, b) in pairs {
            if a.is_nan() || b.is_nan() {
                continue;
            }
            let want = a + b;
            assert_eq!(add_nonneg(a, b).to_bits(), want.to_bits(), "{a:e} + {b:e}");
        }
    }

    #[test]
    fn div_pow2_is_the_float_division() {
        let mut s = 0x0F0F_1234u32;
        for _ in 0..500_000 {
            let x = f32::from_bits(xorshift(&mut s));
            if !x.is_finite() {
                continue;
            }
            for k in [0, 1, 5, 8, 30] {
                let want = x / (1u64 << k) as f32;
                assert_eq!(div_pow2(x, k).to_bits(), want.to_bits(), "{x:e} / 2^{k}");
            }
        }
    }

    /// Random logit words at every fraction, with ties for the largest and the extremes; batch
    /// divisors a power of two and not: the f32 form's loss, correct count and gradient bits.
    #[test]
    fn the_words_softmax_is_the_float_softmax() {
        let mut s = 0x5EED_0001u32;
        for frac in 0..16 {
            for (classes, rows) in [(10, 33), (3, 8), (1, 4)] {
                let range = [65_536, 4_096, 64][(frac % 3) as usize];
                let mut words: Vec<i16> = (0..classes * rows)
                    .map(|_| (xorshift(&mut s) % range) as i32 - range as i32 / 2)
                    .map(|v| v as i16)
                    .collect();
                words[0] = i16::MIN;
                let second = 1 % words.len();
                words[second] = i16::MAX;
                if classes > 2 {
                    // A tie for the row's largest: the first wins.
                    words[classes] = i16::MAX;
                    words[classes + 1] = i16::MAX;
                }
                let labels: Vec<u8> = (0..rows)
                    .map(|_| (xorshift(&mut s) % classes as u32) as u8)
                    .collect();
                let host: Vec<f32> = words.iter().map(|&w| word_to_f32(w, frac)).collect();
                for denom in [rows, 32, 48, 1] {
                    let got = softmax_xent_words((&words, frac), &labels, classes, denom);
                    let want = softmax_xent_scaled(&host, &labels, classes, denom);
                    assert_eq!(got.0.to_bits(), want.0.to_bits(), "loss, frac {frac}");
                    assert_eq!(got.1, want.1, "correct, frac {frac}");
                    let bits = |g: &[f32]| g.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got.2), bits(&want.2), "gradient, frac {frac} {denom}");
                }
                let (loss, ok) = softmax_loss_words((&words, frac), &labels, classes);
                let (wl, wok) = softmax_loss(&host, &labels, classes);
                assert_eq!((loss.to_bits(), ok), (wl.to_bits(), wok));
            }
        }
    }
}
