//! Measurements of the Verilated accelerator: simulated cycles against the ideal, PE
//! utilization, and simulation speed (the `systole bench` command prints [`BenchTable`]).

use std::fmt;
use std::time::Instant;
use systole_core::{ArrayConfig, Rounding};
use systole_device::verilator::VerilatorDevice;
use systole_device::{Device, DeviceError};
use systole_golden::tensor::QMatrix;
use systole_golden::{self as golden, OutputSpec};

/// One matrix product on one array size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BenchRow {
    /// Array size `n` (an `n x n` array).
    pub size: usize,
    /// Rows of A and C.
    pub m: usize,
    /// Dot-product length.
    pub k: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Clock cycles the product took on the device (its `CYCLES` counter).
    pub cycles: u64,
    /// Cycles an array busy on every cycle would need: `m * k * n / size²`.
    pub ideal_cycles: f64,
    /// `ideal_cycles / cycles`.
    pub utilization: f64,
    /// Cycles the array consumed a K step (its `MAC_CYCLES` counter).
    pub mac_cycles: u64,
    /// Wall-clock seconds of the whole product (driver and simulation), best of [`RUNS`].
    pub seconds: f64,
    /// Simulated clock cycles per wall-clock second.
    pub cycles_per_second: f64,
}

/// How many times each product is timed (the fastest run is reported).
pub const RUNS: usize = 3;

/// Deterministic operands (xorshift; not a statistical generator): words of `16 - drop` bits
/// with `frac` fractional bits.
pub(crate) fn operand(rows: usize, cols: usize, seed: u64, frac: u32, drop: u32) -> QMatrix {
    let mut s = seed | 1;
    let data = (0..rows * cols)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s as i16) >> drop
        })
        .collect();
    QMatrix {
        rows,
        cols,
        frac,
        data,
    }
}

/// Runs each shape `(m, k, n)` on a Verilated array of each size, checks the result against
/// the golden model, and reports cycles, utilization and simulation speed.
///
/// `trace`: the waveform of the first size's model (its products run once each then, not
/// timed best of several: a trace is for looking at signals, and its speed is the trace
/// writer's).
pub fn matmul_table(
    sizes: &[usize],
    shapes: &[(usize, usize, usize)],
    mut trace: Option<systole_device::TraceWindow>,
) -> Result<Vec<BenchRow>, DeviceError> {
    let mut rows = Vec::new();
    for &size in sizes {
        let cfg = ArrayConfig::square(size);
        let mut dev = VerilatorDevice::new(cfg)?;
        let traced = trace.is_some();
        if let Some(w) = trace.take() {
            dev.open_trace(w)?;
        }
        for (i, &(m, k, n)) in shapes.iter().enumerate() {
            let a = operand(m, k, 2 * i as u64 + 1, 8, 0);
            let b = operand(k, n, 2 * i as u64 + 2, 8, 0);
            let spec = OutputSpec {
                frac: 8,
                rounding: Rounding::Stochastic,
                seed: 42,
            };
            // Timed `RUNS` times (same product, same result): the best run is the model's speed
            // without the first run's cold caches and the machine's other load.
            let mut seconds = f64::INFINITY;
            let mut simulated = 0;
            for run in 0..if traced { 1 } else { RUNS } {
                dev.reset_stats();
                let sim0 = dev.sim_cycles();
                let t0 = Instant::now();
                let c = dev.matmul(&a, &b, &spec)?;
                seconds = seconds.min(t0.elapsed().as_secs_f64());
                simulated = dev.sim_cycles() - sim0;
                if run == 0 && c != golden::matmul(&a, &b, &spec, size)? {
                    return Err(DeviceError::DiffersFromGolden(format!(
                        "{m}x{k}x{n} on the {size}x{size} model"
                    )));
                }
            }
            let st = dev.stats();
            let ideal_cycles = (m * k * n) as f64 / (size * size) as f64;
            rows.push(BenchRow {
                size,
                m,
                k,
                n,
                cycles: st.cycles,
                ideal_cycles,
                utilization: ideal_cycles / st.cycles.max(1) as f64,
                mac_cycles: st.mac_cycles,
                seconds,
                cycles_per_second: simulated as f64 / seconds.max(1e-9),
            });
        }
    }
    Ok(rows)
}

/// A printable table of [`BenchRow`]s.
pub struct BenchTable<'a>(pub &'a [BenchRow]);

impl fmt::Display for BenchTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>5} {:>15} {:>11} {:>11} {:>8} {:>9} {:>12}",
            "array", "m x k x n", "cycles", "ideal", "util", "wall s", "cycles/s"
        )?;
        for r in self.0 {
            writeln!(
                f,
                "{:>5} {:>15} {:>11} {:>11.0} {:>7.1}% {:>9.3} {:>12.0}",
                format!("{0}x{0}", r.size),
                format!("{}x{}x{}", r.m, r.k, r.n),
                r.cycles,
                r.ideal_cycles,
                100.0 * r.utilization,
                r.seconds,
                r.cycles_per_second
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lists_every_row() {
        let row = BenchRow {
            size: 8,
            m: 16,
            k: 16,
            n: 16,
            cycles: 80,
            ideal_cycles: 64.0,
            utilization: 0.8,
            mac_cycles: 64,
            seconds: 0.5,
            cycles_per_second: 160.0,
        };
        let t = BenchTable(&[row, BenchRow { size: 4, ..row }]).to_string();
        assert_eq!(t.lines().count(), 3);
        assert!(
            t.contains("8x8") && t.contains("4x4") && t.contains("80.0%"),
            "{t}"
        );
    }

    #[test]
    fn small_table_on_the_model_when_built() {
        match matmul_table(&[4], &[(9, 20, 7)], None) {
            Err(DeviceError::NotBuilt { .. }) => eprintln!("verilator backend not built: skipped"),
            Err(e) => panic!("{e}"),
            Ok(rows) => {
                assert_eq!(rows.len(), 1);
                let r = rows[0];
                assert!(r.cycles as f64 >= r.ideal_cycles && r.utilization <= 1.0);
                assert_eq!(r.mac_cycles, 3 * 2 * 20);
            }
        }
    }

    /// The overlap goal on the shape: simulated cycles, so this is no wall-clock test.
    #[test]
    #[ignore = "simulates 256x256x256 on 8x8 and 16x16 (~400k cycles); run with --ignored"]
    fn utilization_goal_on_256_cubed() {
        let sizes: Vec<usize> = [8, 16]
            .into_iter()
            .filter(|n| systole_sim::built_sizes().contains(n))
            .collect();
        assert!(
            !sizes.is_empty(),
            "build with SYSTOLE_VERILATOR_SIZES including 8 or 16"
        );
        let rows = matmul_table(&sizes, &[(256, 256, 256)], None).unwrap();
        println!("{}", BenchTable(&rows));
        for r in rows {
            assert!(
                r.utilization >= 0.9,
                "{}x{}: {:.3}",
                r.size,
                r.size,
                r.utilization
            );
        }
    }
}
