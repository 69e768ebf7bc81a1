//! The numeric contract re-implemented from section 6 of the guide (constants from its table).

use super::doc::Guide;

pub struct Contract {
    taps: u32,
    lane_mul: u32,
    tile_mul: [u32; 2],
    tile_mix: [u32; 2],
}

impl Contract {
    pub fn new(g: &Guide) -> Contract {
        Contract {
            taps: g.constant("LFSR_TAPS"),
            lane_mul: g.constant("LANE_SEED_MUL"),
            tile_mul: [
                g.constant("TILE_SEED_MUL[0]"),
                g.constant("TILE_SEED_MUL[1]"),
            ],
            tile_mix: [
                g.constant("TILE_SEED_MIX[0]"),
                g.constant("TILE_SEED_MIX[1]"),
            ],
        }
    }

    pub fn tile_seed(&self, seed: u32, i0: u32, j0: u32) -> u32 {
        let mut x = seed ^ i0.wrapping_mul(self.tile_mul[0]) ^ j0.wrapping_mul(self.tile_mul[1]);
        x ^= x >> 16;
        x = x.wrapping_mul(self.tile_mix[0]);
        x ^= x >> 15;
        x = x.wrapping_mul(self.tile_mix[1]);
        x ^= x >> 16;
        x.max(1)
    }

    fn lane_seed(&self, t: u32, c: u32) -> u32 {
        (t ^ self.lane_mul.wrapping_mul(c + 1)).max(1)
    }

    fn step(&self, s: &mut u32) -> u32 {
        let lsb = *s & 1;
        *s >>= 1;
        if lsb == 1 {
            *s ^= self.taps;
        }
        *s
    }

    /// One conversion: `mode` 0 truncate, 1 nearest-even, 2 stochastic with state `u`.
    fn convert(acc: i64, shift: u32, mode: u32, u: u32) -> i16 {
        let q = if shift == 0 {
            acc
        } else {
            let floor = acc >> shift;
            let rem = acc - (floor << shift);
            let half = 1i64 << (shift - 1);
            match mode {
                0 => floor,
                1 => floor + i64::from(rem > half || (rem == half && floor & 1 == 1)),
                _ => (acc + (i64::from(u) & ((1i64 << shift) - 1))) >> shift,
            }
        };
        q.clamp(-32768, 32767) as i16
    }

    /// `C = A·B` (`m x k` times `k x n`, row-major) on an array of size `tile`.
    #[allow(clippy::too_many_arguments)]
    pub fn matmul(
        &self,
        a: &[i16],
        b: &[i16],
        (m, k, n): (usize, usize, usize),
        shift: u32,
        mode: u32,
        seed: u32,
        tile: usize,
    ) -> Vec<i16> {
        let mut out = vec![0i16; m * n];
        for i0 in (0..m).step_by(tile) {
            for j0 in (0..n).step_by(tile) {
                let t = self.tile_seed(seed, i0 as u32, j0 as u32);
                for c in 0..tile {
                    let mut s = self.lane_seed(t, c as u32);
                    for r in 0..tile {
                        let u = self.step(&mut s);
                        let (i, j) = (i0 + r, j0 + c);
                        if i < m && j < n {
                            let acc: i64 = (0..k)
                                .map(|kk| i64::from(a[i * k + kk]) * i64::from(b[kk * n + j]))
                                .sum();
                            out[i * n + j] = Self::convert(acc, shift, mode, u);
                        }
                    }
                }
            }
        }
        out
    }
}
