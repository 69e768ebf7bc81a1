//! The operation seeds of the step: a function of the run seed, the step, the shard and the
//! operation's index only, so a step replayed (after `--resume`, on another rank or on the
//! board) converts with the very same stochastic bits.

/// The SplitMix64 finaliser: a bijective 64-bit mix.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Seed of one operation: a function of the run seed, the training step and the operation's
/// index within that step only, so replaying a step (after `--resume`) reproduces it exactly.
pub fn op_seed(run_seed: u64, step: u64, op_index: u32) -> u32 {
    let h =
        mix64(mix64(run_seed ^ 0x5157_4F4C_4500_0000) ^ step.wrapping_mul(0xA24B_AED4_963E_E407))
            ^ (op_index as u64).wrapping_mul(0x9FB2_1C65_1E98_DF25);
    let s = (mix64(h) >> 32) as u32;
    // Zero is the LFSR's dead state; the contract maps it to 1 anyway, but keep seeds distinct.
    if s == 0 {
        1
    } else {
        s
    }
}

/// The run seed a shard's operations are derived from: a shard's seeds depend on (run seed,
/// step, shard, op index) only, never on the rank that computes it, so any rank count
/// reproduces the same shard bit for bit.
pub fn shard_run_seed(run_seed: u64, shard: u32) -> u64 {
    mix64(run_seed ^ (shard as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_seeds_differ_by_step_and_index() {
        let s = op_seed(1, 10, 3);
        assert_eq!(s, op_seed(1, 10, 3));
        assert_ne!(s, op_seed(1, 10, 4));
        assert_ne!(s, op_seed(1, 11, 3));
        assert_ne!(s, op_seed(2, 10, 3));
    }

    /// Values computed apart (Python, arbitrary-precision integers) pin the mix (a changed constant or shift changes every seed of
    /// every run, and with it every checkpoint).
    #[test]
    fn seeds_are_pinned() {
        assert_eq!(mix64(0), 0);
        assert_eq!(mix64(1), 0x5692_161d_100b_05e5);
        assert_eq!(op_seed(1, 5, 0), 643_693_591);
    }
}
