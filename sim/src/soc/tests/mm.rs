//! The product sequencer on the Verilated SoC against the golden model: operands put in the
//! SoC's RAM through the monitor program's stores, one descriptor and `MM_CMD`, the result
//! loaded back. Random shapes (edge tiles, K past a bank when the build's depth allows), both
//! transposes (the steps swapped), C inside a wider matrix (elements between its rows keep
//! their values), every rounding, random shifts and seeds; and the refusals: a descriptor with
//! a size 0 or past its field, a shift or rounding out of range, moves nothing and says why.

use super::monitor::MonitorBus;
use super::*;
use std::io;
use systole_core::tensor::{OutputSpec, QMatrix};
use systole_core::Rounding;

/// RAM above the monitor program where operands and results are placed.
const SCRATCH: u32 = 0x8000;

struct Ram {
    mon: MonitorBus,
    free: u32,
}

impl Ram {
    /// Copies `mem` into fresh scratch RAM (two elements a word); returns its address.
    fn put(&mut self, mem: &[i16]) -> io::Result<u32> {
        let at = self.free;
        for (i, pair) in mem.chunks(2).enumerate() {
            let hi = pair.get(1).copied().unwrap_or(0) as u16;
            let word = u32::from(pair[0] as u16) | (u32::from(hi) << 16);
            self.mon.store(at + 4 * i as u32, word)?;
        }
        // A fresh cache line each time (the monitor's loads go through the data cache).
        self.free = (at + 2 * mem.len() as u32 + 63) & !31;
        Ok(at)
    }

    fn get(&mut self, at: u32, len: usize) -> io::Result<Vec<i16>> {
        let mut out = Vec::with_capacity(len + 1);
        for i in 0..len.div_ceil(2) {
            let w = self.mon.load(at + 4 * i as u32)?;
            out.extend([w as u16 as i16, (w >> 16) as u16 as i16]);
        }
        out.truncate(len);
        Ok(out)
    }

    /// Writes the 14 descriptor words, runs `MM_CMD`, returns `MM_STATUS`.
    fn run(&mut self, words: &[u32; 14]) -> io::Result<u32> {
        for (i, &w) in words.iter().enumerate() {
            self.mon.store(MM_A_ADDR + 4 * i as u32, w)?;
        }
        self.mon.store(MM_CMD, 0)?;
        self.mon.load(MM_STATUS)
    }
}

fn ram() -> Option<Ram> {
    let soc = soc(&monitor_program())?;
    let n = soc.config().size;
    Some(Ram {
        mon: MonitorBus { soc, n },
        free: SCRATCH,
    })
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn transpose(x: &[i16], rows: usize, cols: usize) -> Vec<i16> {
    (0..rows * cols)
        .map(|t| x[(t % rows) * cols + t / rows])
        .collect()
}

/// One random product: `(m, k, n)`, transposes, fracs, rounding from `t`; C at column 2 of a
/// matrix 3 columns wider, filled with a sentinel.
fn one_product(ram: &mut Ram, rng: &mut Rng, t: usize, (m, k, n): (usize, usize, usize)) {
    let size = ram.mon.n;
    let word = |rng: &mut Rng| (rng.next() as i16) >> (rng.below(8) as u32);
    let a = QMatrix::from_vec(
        m,
        k,
        rng.below(16) as u32,
        (0..m * k).map(|_| word(rng)).collect(),
    )
    .unwrap();
    let b = QMatrix::from_vec(
        k,
        n,
        rng.below(16) as u32,
        (0..k * n).map(|_| word(rng)).collect(),
    )
    .unwrap();
    let frac = rng.below((a.frac + b.frac).min(15) as usize + 1) as u32;
    let rounding = [
        Rounding::Truncate,
        Rounding::NearestEven,
        Rounding::Stochastic,
    ][t % 3];
    let spec = OutputSpec {
        frac,
        rounding,
        seed: rng.next() as u32,
    };
    let want = systole_golden::matmul(&a, &b, &spec, size).unwrap();
    let (ta, tb) = (t % 2 == 1, t % 4 >= 2);
    let a_at = ram
        .put(&if ta {
            transpose(&a.data, m, k)
        } else {
            a.data.clone()
        })
        .unwrap();
    let b_at = ram
        .put(&if tb {
            transpose(&b.data, k, n)
        } else {
            b.data.clone()
        })
        .unwrap();
    let (a_i, a_k) = if ta { (1, m) } else { (k, 1) };
    let (b_k, b_j) = if tb { (1, k) } else { (n, 1) };
    let cols = n + 3;
    let c_at = ram.put(&vec![-7; m * cols]).unwrap();
    let shift = a.frac + b.frac - frac;
    let status = ram
        .run(&[
            a_at,
            a_i as u32,
            a_k as u32,
            b_at,
            b_k as u32,
            b_j as u32,
            c_at + 4,
            cols as u32,
            1,
            m as u32,
            n as u32,
            k as u32,
            MM_SHIFT.put(shift) | MM_ROUNDING.put(rounding.code()),
            spec.seed,
        ])
        .unwrap();
    let what =
        format!("product {t}: {m}x{k}x{n}, transposed {ta} {tb}, shift {shift}, {rounding:?}");
    assert_eq!(status, 0, "{what}");
    let got = ram.get(c_at, m * cols).unwrap();
    for i in 0..m {
        for j in 0..cols {
            let expect = match j.checked_sub(2) {
                Some(jj) if jj < n => want.data[i * n + jj],
                _ => -7,
            };
            assert_eq!(got[i * cols + j], expect, "{what}: C row {i}, column {j}");
        }
    }
}

#[test]
fn the_sequencer_computes_the_golden_models_products() {
    let Some(mut ram) = ram() else { return };
    let features = ram.mon.load(SYS_FEATURES).unwrap();
    assert_eq!(
        SYS_FEATURE_MM.get(features),
        1,
        "SYS_FEATURES {features:#x}"
    );
    let mut rng = Rng(0x00C0_FFEE_1234);
    let size = ram.mon.n;
    for t in 0..12 {
        let shape = (
            1 + rng.below(3 * size),
            1 + rng.below(5 * size),
            1 + rng.below(3 * size),
        );
        one_product(&mut ram, &mut rng, t, shape);
    }
    // K past one bank: the tile runs as several commands (first clears, last emits).
    let depth = ram.mon.soc.config().buffer_depth;
    one_product(&mut ram, &mut rng, 12, (size + 1, depth + 3, 2));
    eprintln!("sequencer products: {} cycles", ram.mon.soc.cycles());
}

#[test]
fn the_sequencer_refuses_bad_descriptors() {
    let Some(mut ram) = ram() else { return };
    let (a, b) = (ram.put(&[1; 16]).unwrap(), ram.put(&[2; 16]).unwrap());
    let ok = [a, 4, 1, b, 4, 1, 0, 4, 1, 4, 4, 4, 0, 1];
    let size = MM_ERR_SIZE.mask();
    let conv = MM_ERR_CONVERT.mask();
    let with = |i: usize, v: u32| {
        let mut w = ok;
        w[i] = v;
        w
    };
    for (words, want, what) in [
        (with(9, 0), size, "m = 0"),
        (with(10, 0x1_0004), size, "n past 16 bits (its low bits 4)"),
        (with(11, 0x2_0001), size, "k past MAX_K (its low bits 1)"),
        (with(11, 0), size, "k = 0"),
        (with(12, MM_SHIFT.put(33)), conv, "shift 33"),
        (with(12, MM_ROUNDING.put(3)), conv, "rounding 3"),
        (
            with(12, MM_SHIFT.put(64)),
            conv,
            "shift 64 (past the array's 6 bits)",
        ),
        (ok, 0, "the good descriptor"),
    ] {
        // A fresh C each time: the monitor's loads go through the CPU's data cache.
        let mut words = words;
        words[6] = ram.put(&[-7; 16]).unwrap();
        assert_eq!(ram.run(&words).unwrap(), want, "{what}");
        // Refused: C untouched; run: 4 x (1·2) = 8 in every element.
        let c = if want == 0 { 8 } else { -7 };
        assert_eq!(ram.get(words[6], 16).unwrap(), vec![c; 16], "{what}");
    }
}
