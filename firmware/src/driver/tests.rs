//! Driver tests against the behavioural [`MockArray`]: results bit for bit against a direct
//! implementation of the numeric contract, no bank hazards, typed errors, and the overlap goal.

extern crate std;

use super::mock::MockArray;
use super::*;
use std::vec;
use std::vec::Vec;
use systole_core::numeric::{convert, lane_seed, Lfsr32, MAX_K};

/// The contract computed directly: exact sums, tile/lane LFSRs, one conversion per output.
pub(crate) fn reference(job: &MatmulJob<'_>, tile: usize) -> Vec<i16> {
    reference_at(job, tile, 16)
}

/// [`reference`] with `W`-bit words: each output saturated to `W` bits.
pub(crate) fn reference_at(job: &MatmulJob<'_>, tile: usize, w: u32) -> Vec<i16> {
    let (m, k, n) = (job.m, job.k, job.n);
    let mut out = vec![0i16; m * n];
    for i0 in (0..m).step_by(tile) {
        for j0 in (0..n).step_by(tile) {
            let t = tile_seed(job.seed, i0 as u32, j0 as u32);
            for c in 0..tile.min(n - j0) {
                let mut lfsr = Lfsr32::new(lane_seed(t, c as u32));
                for r in 0..tile.min(m - i0) {
                    let u = lfsr.step();
                    let (i, j) = (i0 + r, j0 + c);
                    let acc: i64 = (0..k)
                        .map(|x| i64::from(job.a[i * k + x]) * i64::from(job.b[x * n + j]))
                        .sum();
                    out[i * n + j] = convert(acc, job.shift, job.rounding, u, w) as i16;
                }
            }
        }
    }
    out
}

pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Mostly small words, sometimes the extremes (saturation and -32768).
    fn word(&mut self) -> i16 {
        match self.below(8) {
            0 => i16::MIN,
            1 => i16::MAX,
            2 => self.next() as i16,
            _ => (self.below(512) as i16) - 256,
        }
    }
    pub(crate) fn words(&mut self, len: usize) -> Vec<i16> {
        (0..len).map(|_| self.word()).collect()
    }
}

fn run(cfg: ArrayConfig, job: &MatmulJob<'_>) -> (Vec<i16>, DriverStats, MockArray) {
    let mut mock = MockArray::new(cfg);
    let mut out = vec![0i16; job.m * job.n];
    let stats = matmul(&mut mock, &cfg, job, &mut out).unwrap();
    (out, stats, mock)
}

#[test]
fn random_shapes_match_the_contract_without_hazards() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for case in 0..60 {
        let size = [2, 4, 8][case % 3];
        let cfg = ArrayConfig::new(size, 8, 16).unwrap();
        let (m, k, n) = (1 + rng.below(21), 1 + rng.below(40), 1 + rng.below(21));
        let (a, b) = (rng.words(m * k), rng.words(k * n));
        let job = MatmulJob {
            a: &a,
            b: &b,
            m,
            k,
            n,
            shift: [0, 1, 7, 15, 16, 32][rng.below(6)],
            rounding: Rounding::ALL[case % 3],
            seed: rng.next() as u32,
        };
        let (out, stats, mock) = run(cfg, &job);
        assert_eq!(
            out,
            reference(&job, size),
            "case {case}: {m}x{k}x{n} on {size}x{size}"
        );
        assert_eq!(mock.hazards, 0, "case {case}: bank written while in use");
        let chunks = k.div_ceil(16) as u64;
        let tiles = (m.div_ceil(size) * n.div_ceil(size)) as u64;
        assert_eq!((stats.tiles, stats.commands), (tiles, tiles * chunks));
        assert_eq!(stats.mac_cycles, tiles * k as u64);
    }
}

/// `rows x cols` row-major to its transpose.
pub(crate) fn transpose(x: &[i16], rows: usize, cols: usize) -> Vec<i16> {
    (0..cols * rows)
        .map(|t| x[(t % rows) * cols + t / rows])
        .collect()
}

#[test]
fn transposed_views_equal_the_product_of_the_copies() {
    // The row fills read each view by its own stride, padding the edge tiles with zeros.
    let mut rng = Rng(0x5EED_0017);
    for case in 0..24 {
        let size = [2, 4, 8][case % 3];
        let cfg = ArrayConfig::new(size, 8, 16).unwrap();
        let (m, k, n) = (1 + rng.below(19), 1 + rng.below(37), 1 + rng.below(19));
        let (a, b) = (rng.words(m * k), rng.words(k * n));
        let job = MatmulJob {
            a: &a,
            b: &b,
            m,
            k,
            n,
            shift: 7,
            rounding: Rounding::ALL[case % 3],
            seed: rng.next() as u32,
        };
        let expect = reference(&job, size);
        let (at, bt) = (transpose(&a, m, k), transpose(&b, k, n));
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let view = MatmulJob {
                a: if ta { &at } else { &a },
                b: if tb { &bt } else { &b },
                ..job
            };
            let tr = Transposed { a: ta, b: tb };
            let mut mock = MockArray::new(cfg);
            let mut out = vec![0i16; m * n];
            matmul_views(&mut mock, &cfg, &view, tr, &mut out).unwrap();
            assert_eq!(out, expect, "case {case}: {m}x{k}x{n} on {size}, {tr:?}");
        }
    }
}

#[test]
fn slow_conversion_still_correct() {
    // A converter much slower than a command: C reads fall back to draining before the queue.
    let cfg = ArrayConfig::new(4, 8, 16).unwrap();
    let mut rng = Rng(7);
    let (m, k, n) = (13, 5, 11);
    let (a, b) = (rng.words(m * k), rng.words(k * n));
    let job = MatmulJob {
        a: &a,
        b: &b,
        m,
        k,
        n,
        shift: 9,
        rounding: Rounding::Stochastic,
        seed: 3,
    };
    let mut mock = MockArray::new(cfg);
    mock.latency = 300;
    let mut out = vec![0i16; m * n];
    matmul(&mut mock, &cfg, &job, &mut out).unwrap();
    assert_eq!(out, reference(&job, 4));
    assert_eq!(mock.hazards, 0);
}

#[test]
fn overlap_reaches_the_utilization_goal() {
    // Simulated cycles, not wall clock: the schedule must keep the array busy >= 90%.
    let cfg = ArrayConfig::square(8);
    let mut rng = Rng(11);
    let (m, k, n) = (64, 256, 96);
    let (a, b) = (rng.words(m * k), rng.words(k * n));
    let job = MatmulJob {
        a: &a,
        b: &b,
        m,
        k,
        n,
        shift: 12,
        rounding: Rounding::NearestEven,
        seed: 0,
    };
    let (out, stats, mock) = run(cfg, &job);
    assert_eq!(out, reference(&job, 8));
    assert_eq!(mock.hazards, 0);
    let ideal = (m * k * n / 64) as f64;
    let util = ideal / stats.cycles as f64;
    assert!(
        util >= 0.9,
        "utilization {util:.3} ({} cycles for {ideal} ideal)",
        stats.cycles
    );
}

#[test]
fn bad_inputs_are_typed_errors() {
    let cfg = ArrayConfig::square(4);
    let mut mock = MockArray::new(cfg);
    let a = [1i16; 6];
    let b = [1i16; 6];
    let mut out = [0i16; 4];
    let job = MatmulJob {
        a: &a,
        b: &b,
        m: 2,
        k: 3,
        n: 2,
        shift: 0,
        rounding: Rounding::Truncate,
        seed: 0,
    };
    let e = |job: &MatmulJob<'_>, mock: &mut MockArray, out: &mut [i16]| {
        matmul(mock, &cfg, job, out).unwrap_err()
    };
    assert_eq!(
        e(&MatmulJob { a: &a[..5], ..job }, &mut mock, &mut out),
        DriverError::Length {
            which: "a",
            expected: 6,
            found: 5
        }
    );
    assert_eq!(
        e(&MatmulJob { n: 3, ..job }, &mut mock, &mut out),
        DriverError::Length {
            which: "b",
            expected: 9,
            found: 6
        }
    );
    assert_eq!(
        e(&job, &mut mock, &mut out[..3]),
        DriverError::Length {
            which: "out",
            expected: 4,
            found: 3
        }
    );
    assert_eq!(
        e(&MatmulJob { shift: 33, ..job }, &mut mock, &mut out),
        DriverError::Shift(33)
    );
    let long = vec![0i16; MAX_K + 1];
    assert_eq!(
        e(
            &MatmulJob {
                a: &long,
                b: &long,
                m: 1,
                k: MAX_K + 1,
                n: 1,
                ..job
            },
            &mut mock,
            &mut out[..1]
        ),
        DriverError::KTooLong(MAX_K + 1)
    );
    assert_eq!(
        e(
            &MatmulJob {
                m: usize::MAX,
                ..job
            },
            &mut mock,
            &mut out
        ),
        DriverError::ShapeOverflow
    );
    // The device is a 4x4 array; asking for 8x8 is caught before anything is written.
    let wrong = ArrayConfig::square(8);
    let err = matmul(&mut mock, &wrong, &job, &mut out).unwrap_err();
    assert!(matches!(err, DriverError::ConfigMismatch { .. }), "{err:?}");
    matmul(&mut mock, &cfg, &job, &mut out).unwrap();
    assert_eq!(out, [3; 4]);
}

#[test]
fn empty_dot_product_is_zero_and_stale_errors_are_cleared() {
    let cfg = ArrayConfig::square(4);
    let mut mock = MockArray::new(cfg);
    // Leave a sticky error behind: a command with K_LEN 0.
    mock.write_reg(regmap::K_LEN, 0).unwrap();
    mock.write_reg(regmap::COMMAND, 0).unwrap();
    assert_ne!(
        mock.read_reg(regmap::STATUS).unwrap() & regmap::STATUS_ERROR,
        0
    );
    let mut out = [5i16; 6];
    let job = MatmulJob {
        a: &[],
        b: &[],
        m: 2,
        k: 0,
        n: 3,
        shift: 4,
        rounding: Rounding::Stochastic,
        seed: 9,
    };
    matmul(&mut mock, &cfg, &job, &mut out).unwrap();
    assert_eq!(out, [0; 6]);
    let a = [2i16; 6];
    let job = MatmulJob {
        a: &a,
        b: &a,
        m: 2,
        k: 3,
        n: 2,
        ..job
    };
    let mut out = [0i16; 4];
    matmul(&mut mock, &cfg, &job, &mut out).unwrap();
    assert_eq!(out[..], reference(&job, 4)[..]);
    assert_eq!(
        mock.read_reg(regmap::STATUS).unwrap() & regmap::STATUS_ERROR,
        0
    );
}
