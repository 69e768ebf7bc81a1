//! Two multiplies in one DSP48E1: the shared-operand packing of `ArrayConfig::dsp_pack`.
//!
//! Two products with one factor in common, `s·x` and `s·y`, come out of one multiply
//! `P = s·(y·2^k + x)`: the low product is `sext(P[k-1:0])` and the high one
//! `(P - low) >> k` (`P[..:k]` plus the low product's sign bit, the borrow it took). This
//! is exact when the low product fits `k` signed bits. A product of two `W`-bit signed words
//! lies in `[-(2^(W-1))·(2^(W-1) - 1), 2^(2W-2)]`: the top, `(-2^(W-1))^2 = 2^(2W-2)`, needs
//! `2W` signed bits (`2W - 1` hold everything else), so `k = 2W` ([`pack_shift`]). The packed
//! factor then needs `3W + 1` signed bits (its least value, `y = x = -2^(W-1)`, lies just
//! below `-2^(3W-1)`) and the multiply is `(3W + 1) x W`; a DSP48E1 multiplies 25 x 18 bits
//! signed, so it packs words up to [`MAX_PACK_WORD_BITS`] = 8 bits (`3·8 + 1 = 25`).
//! The hardware (`systole_hdl::pe_pair`) computes exactly [`packed_products`].

/// Width of a DSP48E1 multiplier's wide signed input (A, or the pre-adder's output).
pub const DSP48E1_A_BITS: u32 = 25;
/// Width of a DSP48E1 multiplier's narrow signed input (B).
pub const DSP48E1_B_BITS: u32 = 18;
/// Widest word that packs two multiplies into one DSP48E1: the packed factor's `3W + 1` bits
/// must fit its 25-bit input (and the shared word its 18-bit one).
pub const MAX_PACK_WORD_BITS: u32 = {
    let w = (DSP48E1_A_BITS - 1) / 3;
    assert!(w <= DSP48E1_B_BITS);
    w
};

/// `k`: where the high factor sits in the packed factor, `2W` for `W`-bit words (the
/// narrowest shift under which the low product's `2W` signed bits sign-extend exactly).
pub const fn pack_shift(word_bits: u32) -> u32 {
    2 * word_bits
}

/// Signed bits of the packed factor `y·2^k + x` of `W`-bit words: `3W + 1`.
pub const fn packed_factor_bits(word_bits: u32) -> u32 {
    3 * word_bits + 1
}

/// Both products `(s·x, s·y)` of `W`-bit signed words as one packed multiply yields them:
/// `P = s·(y·2^k + x)` with `k = pack_shift(W)`, `low = sext(P[k-1:0])`,
/// `high = (P - low) >> k`. Equal to the plain products for every `W`-bit `s`, `x`, `y`
/// (checked for all of them at `W = 8` below).
pub const fn packed_products(shared: i64, x: i64, y: i64, word_bits: u32) -> (i64, i64) {
    let k = pack_shift(word_bits);
    let p = shared * ((y << k) + x);
    let low_bits = p & ((1 << k) - 1);
    let low = if low_bits >= 1 << (k - 1) {
        low_bits - (1 << k)
    } else {
        low_bits
    };
    (low, (p - low) >> k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numeric::MIN_WORD_BITS;

    /// Every triple of 8-bit signed words: 2^24 packed multiplies against the plain products.
    #[test]
    fn packing_is_exact_for_every_triple_of_8_bit_words() {
        assert_eq!(MAX_PACK_WORD_BITS, MIN_WORD_BITS);
        let w = MAX_PACK_WORD_BITS;
        let (lo, hi) = (-(1i64 << (w - 1)), 1i64 << (w - 1));
        let mut wrong = 0u64;
        for s in lo..hi {
            for x in lo..hi {
                for y in lo..hi {
                    if packed_products(s, x, y, w) != (s * x, s * y) {
                        wrong += 1;
                    }
                }
            }
        }
        assert_eq!(wrong, 0, "triples the packed multiply gets wrong");
    }

    #[test]
    fn the_packed_factor_fits_the_dsp48e1() {
        let w = MAX_PACK_WORD_BITS;
        // y·2^k + x at its extremes: 3W + 1 signed bits (3W do not hold the least), which
        // fit the 25-bit input; one bit more of W would not.
        let bits = packed_factor_bits(w);
        let most = ((1i64 << (w - 1)) - 1) * (1 << pack_shift(w)) + (1 << (w - 1)) - 1;
        let least = -(1i64 << (w - 1)) * (1 << pack_shift(w)) - (1 << (w - 1));
        assert!(most < 1 << (bits - 1) && least >= -(1 << (bits - 1)));
        assert!(least < -(1 << (bits - 2)));
        assert!(bits <= DSP48E1_A_BITS && packed_factor_bits(w + 1) > DSP48E1_A_BITS);
    }
}
