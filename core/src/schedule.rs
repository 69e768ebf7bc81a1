//! The learning-rate schedule, part of the numeric contract (docs/HARDWARE.md section 6,
//! "Learning rate"): the rate of every epoch is an integer with [`LR_FRAC`] fractional bits,
//! computed with integer arithmetic only, so every precision (fixed16, f32, f16, bf16) and every
//! platform trains with exactly the same rates, and a resumed run continues the same sequence.

/// Fractional bits of a learning rate and of the decay factor.
pub const LR_FRAC: u32 = 16;

/// `x` (finite, `0 <= x < 2^15`) as an integer with [`LR_FRAC`] fractional bits, rounded to
/// nearest with halves away from zero. Exact: an f32 times a power of two is exact in f64, and
/// rounding (`libm::round`, not the platform's) is exact on every platform.
pub fn quantize(x: f32) -> i64 {
    libm::round(x as f64 * (1u64 << LR_FRAC) as f64) as i64
}

/// The learning rate of epoch `epoch` (counted from 0) in units of `2^-LR_FRAC`: `lr_q(0) =
/// quantize(lr)`, and each epoch multiplies by `quantize(decay)`, rounding halves up:
/// `lr_q(e + 1) = (lr_q(e)·quantize(decay) + 2^(LR_FRAC-1)) >> LR_FRAC`. A rate that reaches 0
/// stays 0.
pub fn lr_q(lr: f32, decay: f32, epoch: usize) -> i64 {
    let d = quantize(decay);
    let mut q = quantize(lr);
    for _ in 0..epoch {
        let next = (q * d + (1 << (LR_FRAC - 1))) >> LR_FRAC;
        if next == q {
            // A fixed point (decay 1, or a rate too small to shrink): no need to go on.
            break;
        }
        q = next;
    }
    q
}

/// [`lr_q`] as the f32 the float formats and the fixed-point update use (exact: `lr_q < 2^24`).
pub fn lr_at(lr: f32, decay: f32, epoch: usize) -> f32 {
    lr_q(lr, decay, epoch) as f32 / (1u64 << LR_FRAC) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recurrence by hand: 0.05 is 3276.8 -> 3277 units; with decay 0.8 (52428.8 -> 52429
    /// units) epoch 1 is (3277·52429 + 32768) >> 16 = 171,842,601 >> 16 = 2622 (2621.6...), epoch
    /// 2 is (2622·52429 + 32768) >> 16 = 137,501,606 >> 16 = 2098 (2098.1...).
    #[test]
    fn hand_worked_rates() {
        assert_eq!(quantize(0.05), 3277);
        assert_eq!(quantize(0.8), 52429);
        assert_eq!(lr_q(0.05, 0.8, 0), 3277);
        assert_eq!(lr_q(0.05, 0.8, 1), 2622);
        assert_eq!(lr_q(0.05, 0.8, 2), 2098);
        assert_eq!(lr_q(0.05, 1.0, 100), 3277);
        assert_eq!(lr_at(0.05, 0.8, 1), 2622.0 / 65536.0);
        // Halves round up: 3·32768 = 98304 = 1.5 units -> 2; then 2·32768 = 1 unit exactly.
        assert_eq!(lr_q(3.0 / 65536.0, 0.5, 1), 2);
        assert_eq!(lr_q(3.0 / 65536.0, 0.5, 2), 1);
        assert_eq!(lr_q(3.0 / 65536.0, 0.5, 3), 1);
    }

    /// Against exact rational arithmetic in i128 (no floats): every step is the nearest integer
    /// (halves up) to the exact product, for many rates, factors and epochs.
    #[test]
    fn every_step_is_the_rounded_exact_product() {
        for lr_units in [1i64, 2, 7, 100, 3277, 65536, 1 << 20] {
            for d_units in [1i64, 32768, 52429, 58982, 65535, 65536] {
                let (lr, d) = (lr_units as f32 / 65536.0, d_units as f32 / 65536.0);
                let mut q = lr_units as i128;
                for e in 0..40 {
                    assert_eq!(lr_q(lr, d, e) as i128, q, "lr {lr_units} d {d_units} e {e}");
                    let exact2 = 2 * q * d_units as i128; // twice the exact product, in 2^-16 units
                    q = (exact2 + 65536) / (2 * 65536); // floor(x + 1/2)
                }
            }
        }
    }
}
