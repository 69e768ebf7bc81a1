//! How long a testbench takes to start, cold (Verilator runs) and cached, and how fast the
//! Verilated `RoundingPe` runs against rust-hdl's own simulator on the same stimulus, in one
//! run. Times vary by machine; the ratio is the point.
//!
//! Run: `cargo run --release -p systole-testbench --example testbench_speed`

#[path = "rounding_pe.rs"]
#[allow(dead_code)]
mod rounding_pe;

use rounding_pe::{operand, RoundingPe};
use rust_hdl_core::prelude::*;
use std::time::Instant;
use systole_testbench::{Options, Testbench, TestbenchError};

/// Cycles run on each simulator.
const VERILATOR_CYCLES: u64 = 2_000_000;
const RUST_HDL_CYCLES: u64 = 20_000;

fn main() -> Result<(), TestbenchError> {
    let cold = Options {
        rebuild: true,
        ..Options::default()
    };
    let t = Instant::now();
    let first = Testbench::with_options(&mut RoundingPe::default(), &cold)?;
    let cold_time = t.elapsed();
    drop(first);
    let t = Instant::now();
    let mut tb = Testbench::new(&mut RoundingPe::default())?;
    let cached_time = t.elapsed();
    assert!(tb.cached());
    println!(
        "start-up: cold (Verilate + compile + load) {cold_time:.2?}, cached {cached_time:.2?}"
    );

    let (a, b, first) = (tb.port("a")?, tb.port("b")?, tb.port("first")?);
    let mut seed = 1;
    let t = Instant::now();
    let y = tb.port("y")?;
    let mut outputs = Vec::with_capacity(RUST_HDL_CYCLES as usize);
    for cycle in 0..VERILATOR_CYCLES {
        tb.write_signed(a, operand(&mut seed).into())?;
        tb.write_signed(b, operand(&mut seed).into())?;
        tb.write(first, u64::from(cycle.is_multiple_of(64)))?;
        tb.clock();
        let out = tb.read_signed(y)?;
        if cycle < RUST_HDL_CYCLES {
            outputs.push(out);
        }
    }
    let verilator = VERILATOR_CYCLES as f64 / t.elapsed().as_secs_f64();

    let mut pe = RoundingPe::default();
    pe.connect_all();
    let mut seed = 1;
    let settle = |pe: &mut RoundingPe| assert!(simulate(pe, 100), "rust-hdl did not settle");
    let t = Instant::now();
    for cycle in 0..RUST_HDL_CYCLES {
        pe.a.next = signed(operand(&mut seed).into());
        pe.b.next = signed(operand(&mut seed).into());
        pe.first.next = cycle.is_multiple_of(64);
        pe.clock.next = true.into();
        settle(&mut pe);
        pe.clock.next = false.into();
        settle(&mut pe);
        // The same outputs, or the ratio compares different things.
        let y = i64::from(unsigned_cast(pe.y.val()).to_u64() as u16 as i16);
        assert_eq!(
            y, outputs[cycle as usize],
            "cycle {cycle}: rust-hdl and Verilator differ"
        );
    }
    let rust_hdl = RUST_HDL_CYCLES as f64 / t.elapsed().as_secs_f64();
    println!(
        "cycles/s: Verilator {:.2}M, rust-hdl {:.3}M: {:.0}x (outputs equal on the first {RUST_HDL_CYCLES})",
        verilator / 1e6,
        rust_hdl / 1e6,
        verilator / rust_hdl
    );
    Ok(())
}
