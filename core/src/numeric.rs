//! Scalar primitives of the numeric contract.
//!
//! The contract in words (the full text, with constants and check values, is section 6 of
//! docs/HARDWARE.md):
//!
//! * Words are signed two's-complement, `W = word_bits` wide, `W` in
//!   [`MIN_WORD_BITS`]`..=`[`MAX_WORD_BITS`] (16 by default); a tensor's value is
//!   `word / 2^frac` where `frac` (`0..=W - 1`, [`max_frac`]) is chosen per tensor by the host
//!   (dynamic fixed point).
//! * Products are exact (`W x W -> 2W` bits, largest magnitude [`product_max`]`(W) = 2^(2W-2)`)
//!   and summed exactly in an accumulator of [`acc_bits`]`(W) = 2W + K_BITS - 1` bits
//!   (48 at `W = 16`, like a DSP48's P register). The width follows from `W` and the one K
//!   limit, [`MAX_K`] = `2^K_BITS - 1` = `2^17 - 1`, whatever `W`: `|sum| <= MAX_K * 2^(2W-2) <
//!   2^(2W+15)`, the accumulator's largest value plus one (at `K = 2^17` the all-`(-2^(W-1))^2`
//!   sum is exactly `2^(2W+15)`, one past the largest value).
//! * Each output is converted once: shifted right by `shift = frac_a + frac_b - frac_out`
//!   (`0..=MAX_SHIFT`) with one of three [`Rounding`] modes, then saturated to the `W`-bit range.
//! * Stochastic rounding adds the low `shift` bits of a [`Lfsr32`] state before the floor shift.
//!   Which LFSR state each output uses is fixed by [`tile_seed`], [`lane_seed`] and the stepping
//!   order documented on them, so hardware and golden model agree bit for bit.

/// Default width of a word, operand or result, in bits (`ArrayConfig::square`'s `word_bits`).
pub const WORD_BITS: u32 = 16;
/// Narrowest word the contract accepts.
pub const MIN_WORD_BITS: u32 = 8;
/// Widest word the contract accepts (the words travel as 16-bit values everywhere).
pub const MAX_WORD_BITS: u32 = 16;
/// Most fractional bits a tensor of `W`-bit words may have: `frac` is `0..=W - 1`, so a word
/// keeps its sign bit and a tensor's largest magnitude is at least `1 - 2^-(W-1)`.
pub const fn max_frac(word_bits: u32) -> u32 {
    word_bits - 1
}
/// [`max_frac`] of the default 16-bit words.
pub const MAX_FRAC: u32 = max_frac(WORD_BITS);
/// Bits of the K limit: [`MAX_K`] `= 2^K_BITS - 1`, the same at every word width.
pub const K_BITS: u32 = 17;
/// Longest dot product the contract accepts, at every word width: `2^17 - 1`, so no accepted
/// sum can wrap the accumulator ([`acc_bits`]). Longer reductions are split on the host (see
/// `systole_golden`).
pub const MAX_K: usize = (1 << K_BITS) - 1;
/// Accumulator width for `W`-bit words: `2W + K_BITS - 1` (32 at `W = 8`, 40 at 12, 48 at 16),
/// the narrowest that holds [`MAX_K`] extreme products: `MAX_K * 2^(2W-2) <= 2^(2W+15) - 1`.
pub const fn acc_bits(word_bits: u32) -> u32 {
    2 * word_bits + K_BITS - 1
}
/// Largest magnitude of one exact product of two `W`-bit words: `(-2^(W-1))^2 = 2^(2W-2)`.
pub const fn product_max(word_bits: u32) -> i64 {
    1 << (2 * word_bits - 2)
}
/// Smallest value of the accumulator for `W`-bit words.
pub const fn acc_min(word_bits: u32) -> i64 {
    -(1i64 << (acc_bits(word_bits) - 1))
}
/// Largest value of the accumulator for `W`-bit words.
pub const fn acc_max(word_bits: u32) -> i64 {
    (1i64 << (acc_bits(word_bits) - 1)) - 1
}
/// Accumulator width of the default 16-bit words (a DSP48E1 P register is 48 bits).
pub const ACC_BITS: u32 = acc_bits(WORD_BITS);
/// Largest magnitude of one exact product of two 16-bit words: `(-32768)^2 = 2^30`.
pub const PRODUCT_MAX: i64 = product_max(WORD_BITS);
/// Largest right shift an output conversion accepts (the LFSR supplies 32 random bits).
pub const MAX_SHIFT: u32 = 32;
/// Smallest value of the 48-bit accumulator (16-bit words).
pub const ACC_MIN: i64 = acc_min(WORD_BITS);
/// Largest value of the 48-bit accumulator (16-bit words).
pub const ACC_MAX: i64 = acc_max(WORD_BITS);

/// How an accumulator is rounded when it is shifted down to the output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Rounding {
    /// Drop the low bits: two's-complement truncation, i.e. round toward minus infinity (floor).
    Truncate = 0,
    /// Round to the nearest value; exact halves go to the even neighbour.
    #[default]
    NearestEven = 1,
    /// Add `shift` uniformly random bits from the LFSR, then floor: rounds up with probability
    /// equal to the dropped fraction, so the expected result is the exact value.
    Stochastic = 2,
}

impl Rounding {
    /// All modes, in register-encoding order.
    pub const ALL: [Rounding; 3] = [
        Rounding::Truncate,
        Rounding::NearestEven,
        Rounding::Stochastic,
    ];

    /// The register encoding (see `regmap::ROUNDING`).
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// Decodes a register value; `None` for an unknown code.
    pub const fn from_code(code: u32) -> Option<Rounding> {
        match code {
            0 => Some(Rounding::Truncate),
            1 => Some(Rounding::NearestEven),
            2 => Some(Rounding::Stochastic),
            _ => None,
        }
    }

    /// The name used on the command line and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Rounding::Truncate => "truncate",
            Rounding::NearestEven => "nearest",
            Rounding::Stochastic => "stochastic",
        }
    }

    /// Other names the command line accepts.
    pub const fn aliases(self) -> &'static [&'static str] {
        match self {
            Rounding::Truncate => &["trunc", "floor"],
            Rounding::NearestEven => &["rne", "nearest-even"],
            Rounding::Stochastic => &["sr"],
        }
    }

    /// Parses a command-line name ([`Rounding::name`] or one of its [`Rounding::aliases`]).
    pub fn parse(name: &str) -> Option<Rounding> {
        let named = |r: &&Rounding| r.name() == name || r.aliases().contains(&name);
        Rounding::ALL.iter().find(named).copied()
    }
}

/// `--rounding` as the command line takes it: the names and aliases above.
#[cfg(feature = "clap")]
impl clap::ValueEnum for Rounding {
    fn value_variants<'a>() -> &'a [Self] {
        &Rounding::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()).aliases(self.aliases().iter().copied()))
    }
}

/// Feedback mask of the contract's LFSR: x^32 + x^22 + x^2 + x + 1 (a maximal-length
/// polynomial), in right-shifting Galois form.
pub const LFSR_TAPS: u32 = 0x8020_0003;

/// The contract's 32-bit Galois LFSR.
///
/// One step: `lsb = s & 1; s >>= 1; if lsb == 1 { s ^= LFSR_TAPS }`. The state is never zero.
/// In hardware this is one register and a few XOR gates per column of the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lfsr32 {
    state: u32,
}

impl Lfsr32 {
    /// Starts from `seed`; a zero seed (the LFSR's one dead state) is replaced by 1.
    pub const fn new(seed: u32) -> Self {
        Lfsr32 {
            state: if seed == 0 { 1 } else { seed },
        }
    }

    /// The current state.
    pub const fn state(&self) -> u32 {
        self.state
    }

    /// Advances one step and returns the new state.
    #[inline]
    pub fn step(&mut self) -> u32 {
        let lsb = self.state & 1;
        self.state >>= 1;
        if lsb == 1 {
            self.state ^= LFSR_TAPS;
        }
        self.state
    }
}

/// Multiplier used to give each lane a distinct LFSR seed (the 32-bit golden-ratio constant).
pub const LANE_SEED_MUL: u32 = 0x9E37_79B9;

/// Seed of the LFSR that converts column `lane` of an output tile.
///
/// `lane_seed(s, c) = s XOR (LANE_SEED_MUL * (c + 1) mod 2^32)`, with 0 replaced by 1.
/// In hardware `LANE_SEED_MUL * (c + 1)` is a constant per column, computed at generation time.
pub const fn lane_seed(tile_seed: u32, lane: u32) -> u32 {
    let s = tile_seed ^ LANE_SEED_MUL.wrapping_mul(lane + 1);
    if s == 0 {
        1
    } else {
        s
    }
}

/// [`tile_seed`]'s multipliers of the tile's first row and first column.
pub const TILE_SEED_MUL: [u32; 2] = [0x85EB_CA6B, 0xC2B2_AE35];
/// [`tile_seed`]'s two finaliser multipliers.
pub const TILE_SEED_MIX: [u32; 2] = [0x7FEB_352D, 0x846C_A68B];

/// Seed the host writes for the output tile whose top-left element is `(row0, col0)` in an
/// operation seeded with `op_seed`.
///
/// Stepping order (the part of the contract hardware must follow): each tile of `n x n`
/// outputs has one LFSR per column `c`, started at `lane_seed(tile_seed, c)`; rows are converted
/// in order `r = 0, 1, .., n-1` and the LFSR steps once *before* each conversion, in every
/// rounding mode, including rows that are padding outside the matrix. So output `(r, c)` of the
/// tile uses the state after `r + 1` steps.
pub const fn tile_seed(op_seed: u32, row0: u32, col0: u32) -> u32 {
    // splitmix32-style finaliser over the three inputs: cheap, and nearby tiles get unrelated
    // seeds. The SoC's product sequencer computes it too (hdl/verilog/soc_mm.v).
    let [row_mul, col_mul] = TILE_SEED_MUL;
    let [m1, m2] = TILE_SEED_MIX;
    let mut x = op_seed ^ row0.wrapping_mul(row_mul) ^ col0.wrapping_mul(col_mul);
    x ^= x >> 16;
    x = x.wrapping_mul(m1);
    x ^= x >> 15;
    x = x.wrapping_mul(m2);
    x ^= x >> 16;
    if x == 0 {
        1
    } else {
        x
    }
}

/// Smallest value of a signed `word_bits`-wide word.
pub const fn word_min(word_bits: u32) -> i64 {
    -(1i64 << (word_bits - 1))
}

/// Largest value of a signed `word_bits`-wide word.
pub const fn word_max(word_bits: u32) -> i64 {
    (1i64 << (word_bits - 1)) - 1
}

/// The first of `words` outside the signed `word_bits`-wide range, as `(index, word)`: what
/// a `W`-bit port would cut (every `i16` fits at 16 bits).
pub fn first_outside(words: &[i16], word_bits: u32) -> Option<(usize, i16)> {
    if word_bits >= 16 {
        return None;
    }
    let (lo, hi) = (word_min(word_bits), word_max(word_bits));
    words
        .iter()
        .position(|&x| (x as i64) < lo || (x as i64) > hi)
        .map(|i| (i, words[i]))
}

/// Saturates `v` to the signed `word_bits`-wide range.
#[inline]
pub const fn saturate(v: i64, word_bits: u32) -> i64 {
    let lo = word_min(word_bits);
    let hi = word_max(word_bits);
    if v < lo {
        lo
    } else if v > hi {
        hi
    } else {
        v
    }
}

/// Shifts `acc` right by `shift` bits with `rounding`, without saturating.
///
/// `random` is the LFSR state for this output; only its low `shift` bits are used, and only by
/// [`Rounding::Stochastic`]. `acc` must lie in an accumulator's range (at most 48 bits) and
/// `shift <= MAX_SHIFT`; the sum `acc + random_bits` is formed one bit wider than the
/// accumulator or the 32 random bits, so it never wraps.
#[inline]
pub const fn round_shift(acc: i64, shift: u32, rounding: Rounding, random: u32) -> i64 {
    if shift == 0 {
        return acc;
    }
    let mask: i64 = (1i64 << shift) - 1;
    match rounding {
        Rounding::Truncate => acc >> shift,
        Rounding::NearestEven => {
            let q = acc >> shift;
            let rem = acc & mask;
            let half = 1i64 << (shift - 1);
            if rem > half || (rem == half && (q & 1) == 1) {
                q + 1
            } else {
                q
            }
        }
        Rounding::Stochastic => (acc + (random as i64 & mask)) >> shift,
    }
}

/// The whole output conversion: [`round_shift`] then [`saturate`] to `word_bits`.
#[inline]
pub const fn convert(acc: i64, shift: u32, rounding: Rounding, random: u32, word_bits: u32) -> i64 {
    saturate(round_shift(acc, shift, rounding, random), word_bits)
}

/// [`convert`] of a value that fits `i32`, in 32-bit arithmetic (the board's CPU forms 64-bit
/// sums, shifts and compares from several instructions each): the same word for every input.
/// The floor of the shift and the rounding of the dropped bits are formed apart, so nothing
/// wraps: `(acc + r) >> s = (acc >> s) + ((low + r) >> s)` with `low, r < 2^s`.
#[inline]
pub const fn convert32(
    acc: i32,
    shift: u32,
    rounding: Rounding,
    random: u32,
    word_bits: u32,
) -> i32 {
    if shift >= 32 {
        // Only 32 itself is accepted; the dropped bits and the random word then fill a u32.
        return convert(acc as i64, shift, rounding, random, word_bits) as i32;
    }
    let q = if shift == 0 {
        acc
    } else {
        let mask = (1u32 << shift) - 1;
        let low = acc as u32 & mask;
        let floor = acc >> shift;
        match rounding {
            Rounding::Truncate => floor,
            Rounding::NearestEven => {
                let half = 1u32 << (shift - 1);
                if low > half || (low == half && floor & 1 == 1) {
                    floor + 1
                } else {
                    floor
                }
            }
            // low + r < 2^(shift + 1) <= 2^32 - 2: no wrap for shift <= 31.
            Rounding::Stochastic => floor + ((low + (random & mask)) >> shift) as i32,
        }
    };
    let (lo, hi) = (word_min(word_bits) as i32, word_max(word_bits) as i32);
    if q < lo {
        lo
    } else if q > hi {
        hi
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_dot_product_fits_the_accumulator_strictly() {
        assert_eq!(MAX_K, (1 << 17) - 1);
        assert_eq!(PRODUCT_MAX, (-32768i64) * (-32768i64));
        assert_eq!(
            (ACC_BITS, ACC_MIN, ACC_MAX),
            (48, -(1 << 47), (1 << 47) - 1)
        );
        // At every width the largest accepted sum fits and one more extreme product wraps:
        // the accumulator is the narrowest that holds MAX_K products, not just a wide one.
        for w in MIN_WORD_BITS..=MAX_WORD_BITS {
            let most_negative = word_min(w);
            assert_eq!(product_max(w), most_negative * most_negative, "W = {w}");
            let k = MAX_K as i64;
            assert!(k * product_max(w) <= acc_max(w), "W = {w}");
            assert!(-k * product_max(w) >= acc_min(w), "W = {w}");
            assert!((k + 1) * product_max(w) > acc_max(w), "W = {w}");
            assert!(
                k * product_max(w) > acc_max(w) / 2,
                "W = {w}: one bit too wide"
            );
        }
        // Worked by hand: W = 8 words reach -128, products 2^14, sums 2^31 - 2^14: 32 bits.
        assert_eq!((acc_bits(8), acc_bits(12), acc_bits(16)), (32, 40, 48));
        assert_eq!((max_frac(8), max_frac(12), MAX_FRAC), (7, 11, 15));
    }

    #[test]
    fn lfsr_known_first_steps() {
        // Worked by hand: 1 -> lsb 1, 0 ^ taps = 0x80200003; lsb 1 -> 0x40100001 ^ taps = 0xC0300002;
        // lsb 0 -> 0x60180001.
        let mut l = Lfsr32::new(1);
        assert_eq!(l.step(), 0x8020_0003);
        assert_eq!(l.step(), 0xC030_0002);
        assert_eq!(l.step(), 0x6018_0001);
        assert_eq!(Lfsr32::new(0).state(), 1);
    }

    #[test]
    fn lfsr_does_not_cycle_early() {
        let mut l = Lfsr32::new(0xDEAD_BEEF);
        let start = l.state();
        for _ in 0..1_000_000 {
            assert_ne!(l.step(), start);
            assert_ne!(l.state(), 0);
        }
    }

    #[test]
    fn nearest_even_ties() {
        // 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, -3.5 -> -4 (shift 1: values are doubled)
        assert_eq!(round_shift(5, 1, Rounding::NearestEven, 0), 2);
        assert_eq!(round_shift(7, 1, Rounding::NearestEven, 0), 4);
        assert_eq!(round_shift(-5, 1, Rounding::NearestEven, 0), -2);
        assert_eq!(round_shift(-7, 1, Rounding::NearestEven, 0), -4);
        // 2.75 -> 3, -2.75 -> -3, 2.25 -> 2
        assert_eq!(round_shift(11, 2, Rounding::NearestEven, 0), 3);
        assert_eq!(round_shift(-11, 2, Rounding::NearestEven, 0), -3);
        assert_eq!(round_shift(9, 2, Rounding::NearestEven, 0), 2);
    }

    #[test]
    fn truncate_is_floor() {
        assert_eq!(round_shift(-1, 4, Rounding::Truncate, 0), -1);
        assert_eq!(round_shift(15, 4, Rounding::Truncate, 0), 0);
        assert_eq!(round_shift(-17, 4, Rounding::Truncate, 0), -2);
    }

    #[test]
    fn stochastic_uses_low_bits_only() {
        // 0.25 in units of 2^-2: rounds up only when the two random bits sum past the fraction.
        assert_eq!(round_shift(1, 2, Rounding::Stochastic, 0b00), 0);
        assert_eq!(round_shift(1, 2, Rounding::Stochastic, 0b10), 0);
        assert_eq!(round_shift(1, 2, Rounding::Stochastic, 0b11), 1);
        assert_eq!(round_shift(1, 2, Rounding::Stochastic, 0xFFFF_FFFC), 0);
        // Full 32-bit shift of the accumulator extremes does not wrap.
        assert_eq!(
            round_shift(ACC_MAX, 32, Rounding::Stochastic, u32::MAX),
            (ACC_MAX + u32::MAX as i64) >> 32
        );
        assert_eq!(
            round_shift(ACC_MIN, 32, Rounding::Stochastic, u32::MAX),
            -32768
        );
    }

    #[test]
    fn saturation_both_ways_and_most_negative() {
        assert_eq!(convert(1 << 40, 8, Rounding::Truncate, 0, 16), 32767);
        assert_eq!(convert(-(1 << 40), 8, Rounding::Truncate, 0, 16), -32768);
        // (-32768)*(-32768) = 2^30 with shift 15 is 32768: one past the top, saturates.
        assert_eq!(convert(1 << 30, 15, Rounding::NearestEven, 0, 16), 32767);
        assert_eq!(
            convert(-(1 << 30), 15, Rounding::NearestEven, 0, 16),
            -32768
        );
        // Rounding up into overflow saturates instead of wrapping.
        assert_eq!(
            convert((32767 << 1) + 1, 1, Rounding::NearestEven, 0, 16),
            32767
        );
    }

    #[test]
    fn seeds_are_nonzero_and_distinct_per_lane() {
        let t = tile_seed(7, 0, 8);
        assert_ne!(t, tile_seed(7, 8, 0));
        assert_ne!(lane_seed(t, 0), lane_seed(t, 1));
        assert_eq!(lane_seed(LANE_SEED_MUL, 0), 1);
    }

    proptest::proptest! {
        #[test]
        fn round_shift_matches_f64(acc in ACC_MIN..=ACC_MAX, shift in 1u32..=32) {
            let exact = acc as f64 / (1u64 << shift) as f64;
            let t = round_shift(acc, shift, Rounding::Truncate, 0);
            proptest::prop_assert_eq!(t as f64, exact.floor());
            let n = round_shift(acc, shift, Rounding::NearestEven, 0);
            // Values here are below 2^48, so f64 holds them and exact halves are exact.
            let (fl, fr) = (exact.floor(), exact - exact.floor());
            let want = if fr > 0.5 || (fr == 0.5 && (fl as i64) & 1 == 1) { fl + 1.0 } else { fl };
            proptest::prop_assert_eq!(n as f64, want);
        }

        #[test]
        fn convert32_is_convert(
            acc: i32,
            small in -70_000i32..70_000,
            shift in 0u32..=32,
            r: u32,
            word_bits in MIN_WORD_BITS..=MAX_WORD_BITS,
        ) {
            for rounding in Rounding::ALL {
                // An exact half of the last kept unit (a tie), and the extremes.
                let tie = match shift {
                    1..=31 => (acc & !(1i32 << shift).wrapping_sub(1)) | 1 << (shift - 1),
                    _ => acc,
                };
                for v in [acc, small, tie, i32::MIN, i32::MAX] {
                    proptest::prop_assert_eq!(
                        convert32(v, shift, rounding, r, word_bits) as i64,
                        convert(v as i64, shift, rounding, r, word_bits),
                        "{} >> {} {:?} r {:#x} W {}", v, shift, rounding, r, word_bits
                    );
                }
            }
        }

        #[test]
        fn stochastic_is_floor_or_ceil(acc in ACC_MIN..=ACC_MAX, shift in 1u32..=32, r: u32) {
            let s = round_shift(acc, shift, Rounding::Stochastic, r);
            let f = acc >> shift;
            let exact_int = acc & ((1i64 << shift) - 1) == 0;
            if exact_int { proptest::prop_assert_eq!(s, f) } else { proptest::prop_assert!(s == f || s == f + 1) }
        }
    }
}
