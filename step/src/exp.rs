//! The softmax's `e^x`, `libm::exp(x as f64) as f32`, in integers where that gives provably
//! the same bits: the board's CPU has no FPU, and `libm`'s double-precision `exp` costs it
//! thousands of cycles in soft-float calls.
//!
//! For `-86 < x <= 0` (every softmax input is one: a logit minus the row's largest), `e^x` is
//! formed in 64-bit fixed point with a relative error below `2^-48` (`x = -(n·ln 2 + i/64 +
//! t)`: a power of two, a table of `e^(-i/64)`, seven terms of the series of `e^-t` for `t <
//! 1/64`) and rounded to `f32`. `libm`'s `exp` is within one `f64` ulp (`2^-52` relative) of
//! `e^x`, so both round to the same `f32` unless `e^x` lies within about `2^-47` (relative) of a
//! point halfway between two `f32`: there (about one input in 2^19) and for any other `x` this
//! calls `libm` itself. The tests compare it with `libm` on every input the step can give it.

/// `ln 2` in Q56 (rounded).
const LN2_Q56: u64 = 49_946_518_145_322_874;
/// `floor(2^118 / LN2_Q56)`: `n = X / LN2_Q56` from one multiply, at most one short.
const INV_LN2: u64 = 6_653_256_548_922_161_202;
/// `e^(-i/64)` in Q63 (rounded), `i = 0..=44` (`44/64 < ln 2 < 45/64`).
const EXP_NEG_64THS: [u64; 45] = [
    9223372036854775808,
    9080376907458843210,
    8939598712059420229,
    8801003080280637127,
    8664556174609911609,
    8530224682136669282,
    8397975806419143373,
    8267777259477268042,
    8139597253909710366,
    8013404495133116422,
    7889168173741676703,
    7766857957985145497,
    7646443986363477761,
    7527896860336275516,
    7411187637145263790,
    7296287822748043765,
    7183169364861397922,
    7071804646112448749,
    6962166477295998885,
    6854228090736406520,
    6747963133752375373,
    6643345662223063719,
    6540350134253941641,
    6438951403940850068,
    6339124715230739114,
    6240845695877586851,
    6144090351492022870,
    6048835059683203884,
    5955056564291511129,
    5862731969710661499,
    5771838735297846201,
    5682354669870532166,
    5594257926288582650,
    5507526996120374271,
    5422140704391608235,
    5338078204415533698,
    5255318972703321087,
    5173842803953342767,
    5093629806118137711,
    5014660395547855795,
    4936915292208996013,
    4860375514977271276,
    4785022377003450591,
    4710837481151047187,
    4637802715504738737,
];
/// `1/k!` in Q63 (rounded), `k = 0..=7`.
const INV_FACT: [u64; 8] = [
    9223372036854775808,
    9223372036854775808,
    4611686018427387904,
    1537228672809129301,
    384307168202282325,
    76861433640456465,
    12810238940076078,
    1830034134296583,
];
/// How close (in units of the 64-bit significand's last bit, 2^-64 relative) to a rounding
/// midpoint the fixed-point value may come before `libm` decides: its own error is below 2^16
/// of them and `libm`'s below 2^12.
const GUARD: u64 = 1 << 20;

/// `(a · b) >> 64`.
fn mul_hi(a: u64, b: u64) -> u64 {
    const LO: u64 = 0xFFFF_FFFF;
    let (a1, a0, b1, b0) = (a >> 32, a & LO, b >> 32, b & LO);
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    let mid = (p00 >> 32) + (p01 & LO) + (p10 & LO);
    p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32)
}

/// `libm::exp(x as f64) as f32`, bit for bit.
pub fn exp_f32(x: f32) -> f32 {
    fixed_exp(x).unwrap_or_else(|| libm::exp(x as f64) as f32)
}

/// `e^x` rounded to `f32` for `-86 < x <= 0` when it is not near a rounding midpoint.
fn fixed_exp(x: f32) -> Option<f32> {
    let bits = x.to_bits();
    if bits & 0x7FFF_FFFF == 0 {
        return Some(1.0);
    }
    let e = ((bits >> 23) & 0xFF) as i32;
    if bits >> 31 == 0 || e == 0 || e == 0xFF {
        return None;
    }
    // |x| = mant · 2^(e - 150) = X / 2^56, exactly.
    let mant = u64::from(bits & 0x7F_FFFF | 0x80_0000);
    let shift = e - 150 + 56;
    if shift < 0 {
        // |x| < 2^-32: e^x lies within 2^-32 below 1, far above the midpoint 1 - 2^-25.
        return Some(1.0);
    }
    if shift >= 40 || mant << shift >= 104 << 56 {
        // |x| >= 104: e^x is below half the smallest subnormal (e^-104 < 0.98 · 2^-150).
        return Some(0.0);
    }
    fixed_exp_q56(mant << shift)
}

/// `exp_f32(-(d as f32) / 2^frac)` for `frac <= 15` (`v - m` of two logit words `m - v = d`
/// apart with `frac` fractional bits: an exact f32), from the integers.
pub fn exp_neg_words(d: u32, frac: u32) -> f32 {
    if d == 0 {
        return 1.0;
    }
    // |x| = d / 2^frac >= 104: 0, as `fixed_exp` gives it.
    if frac > 15 || u64::from(d) >= 104 << frac {
        return exp_f32(-(d as f32) / (1u32 << frac.min(31)) as f32);
    }
    // X = |x| · 2^56 exactly.
    fixed_exp_q56(u64::from(d) << (56 - frac))
        .unwrap_or_else(|| libm::exp(-(d as f64) / (1u64 << frac) as f64) as f32)
}

/// `e^-X` for `X = |x| · 2^56 < 104 · 2^56`, as [`fixed_exp`] gives it (`None`: `libm`'s).
fn fixed_exp_q56(big_x: u64) -> Option<f32> {
    if big_x >= 86 << 56 {
        // A subnormal or near-subnormal result: `libm`.
        return None;
    }
    // X = n·LN2 + r, 0 <= r < LN2.
    let mut n = mul_hi(big_x, INV_LN2) >> 54;
    let mut r = big_x - n * LN2_Q56;
    if r >= LN2_Q56 {
        n += 1;
        r -= LN2_Q56;
    }
    // r = i/64 + t, t < 1/64 in Q63.
    let i = (r >> 50) as usize;
    let t = (r & ((1 << 50) - 1)) << 7;
    let mut p = INV_FACT[7];
    for &c in INV_FACT[..7].iter().rev() {
        p = c - mul_hi(t << 1, p);
    }
    // e^-r in Q63, normalised to a significand with its top bit at 63.
    let y = if i == 0 {
        p
    } else {
        mul_hi(EXP_NEG_64THS[i] << 1, p)
    };
    let lz = y.leading_zeros();
    let m = y << lz;
    let (s, d) = (m >> 40, m & ((1 << 40) - 1));
    if d.abs_diff(1 << 39) < GUARD {
        return None;
    }
    // e^x = (s / 2^23) · 2^-(lz + n): biased exponent 127 - lz - n (>= 1: n <= 124, lz <= 1).
    let biased = 127 - lz as u64 - n;
    let up = u64::from(d > 1 << 39);
    Some(f32::from_bits((((biased - 1) << 23) + s + up) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn libm_exp(x: f32) -> f32 {
        libm::exp(x as f64) as f32
    }

    /// Every softmax input of a 16-bit logit tensor with `frac` fractional bits: `-j / 2^frac`
    /// for `j` in `0..2^16` (the row's largest minus another word), every `stride`-th `j`.
    fn softmax_inputs(frac: u32, stride: usize) -> impl Iterator<Item = f32> {
        (0..1u32 << 16)
            .step_by(stride)
            .map(move |j| -(j as f32) / (1u32 << frac) as f32)
    }

    #[test]
    fn exp_is_libms_on_the_softmax_inputs_sampled() {
        for frac in 0..16 {
            for x in softmax_inputs(frac, 7) {
                assert_eq!(exp_f32(x).to_bits(), libm_exp(x).to_bits(), "e^{x}");
            }
        }
    }

    /// All of them (`--ignored`: 1M `libm` calls).
    #[test]
    #[ignore]
    fn exp_is_libms_on_every_softmax_input() {
        for frac in 0..16 {
            for x in softmax_inputs(frac, 1) {
                assert_eq!(exp_f32(x).to_bits(), libm_exp(x).to_bits(), "e^{x}");
            }
        }
    }

    /// From the words' difference: the f32 path's bits at every fraction, for every difference a
    /// 16-bit tensor can have (every 3rd; all in `exp_is_libms_on_every_softmax_input`'s range).
    #[test]
    fn exp_of_words_is_exp_of_their_difference() {
        for frac in 0..16 {
            for d in (0..1u32 << 16)
                .step_by(3)
                .chain([65_535, 104 << frac, (86 << frac) + 1])
            {
                let x = -(d as f32) / (1u32 << frac) as f32;
                assert_eq!(
                    exp_neg_words(d, frac).to_bits(),
                    exp_f32(x).to_bits(),
                    "{d} {frac}"
                );
            }
        }
    }

    /// Any other input: positive, tiny, huge, subnormal, infinite, NaN, and random patterns.
    #[test]
    fn exp_is_libms_everywhere_else() {
        let mut xs = alloc::vec![
            0.0,
            -0.0,
            1.0,
            -1.0e-30,
            -85.99,
            -86.0,
            -87.0,
            -104.0,
            -1.0e30,
            f32::MIN,
            f32::from_bits(0x8000_0001),
            f32::NEG_INFINITY,
            f32::INFINITY,
            f32::NAN,
            -core::f32::consts::LN_2,
        ];
        let mut s = 0x9E37_79B9u32;
        for _ in 0..100_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            xs.push(f32::from_bits(s));
            xs.push(-((s % 90_000) as f32) / 1000.0);
        }
        for x in xs {
            assert_eq!(exp_f32(x).to_bits(), libm_exp(x).to_bits(), "e^{x}");
        }
    }

    /// The guard is rarely the one deciding: nearly every softmax input above -86 takes the
    /// integer path.
    #[test]
    fn libm_is_rarely_needed() {
        let xs: alloc::vec::Vec<f32> = (0..16)
            .flat_map(|f| softmax_inputs(f, 13))
            .filter(|&x| x > -86.0)
            .collect();
        let fallbacks = xs.iter().filter(|&&x| fixed_exp(x).is_none()).count();
        assert!(fallbacks * 10_000 < xs.len(), "{fallbacks} of {}", xs.len());
    }
}
