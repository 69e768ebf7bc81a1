//! A small driver for the emitted top, written from the guide: register names, bit fields and
//! the order of operations as docs/HARDWARE.md states them. Serial and simple on purpose (one
//! tile at a time), unlike the firmware's pipelined driver.

use super::doc::Guide;
use systole_core::bus::{Beat, RowWrite};
use systole_core::AcceleratorBus;
use systole_sim::VerilatedArray;

/// Edges any wait may take before the bench gives up.
const WAIT_LIMIT: u32 = 100_000;

pub struct Bench {
    pub bus: VerilatedArray,
    pub g: Guide,
    /// Array size and bank depth, read from `CONFIG`.
    pub n: usize,
    pub depth: usize,
}

impl Bench {
    pub fn new(bus: VerilatedArray, g: Guide) -> Bench {
        let mut b = Bench {
            bus,
            g,
            n: 0,
            depth: 0,
        };
        let config = b.read("CONFIG");
        b.n = b.g.field("CONFIG", "size").get(config) as usize;
        b.depth = 1 << b.g.field("CONFIG", "log2_depth").get(config);
        b
    }

    pub fn read(&mut self, reg: &str) -> u32 {
        let addr = self.g.reg(reg);
        self.bus.read_reg(addr).unwrap()
    }

    pub fn write(&mut self, reg: &str, value: u32) {
        let addr = self.g.reg(reg);
        self.bus.write_reg(addr, value).unwrap();
    }

    /// A command word from `(field, value)` pairs of register `reg`.
    pub fn word(&self, reg: &str, fields: &[(&str, u32)]) -> u32 {
        fields
            .iter()
            .map(|&(f, v)| self.g.field(reg, f).put(v))
            .sum()
    }

    pub fn status(&mut self, field: &str) -> bool {
        let s = self.read("STATUS");
        self.g.field("STATUS", field).get(s) == 1
    }

    /// Idles one edge at a time until `done`; returns the edges waited.
    pub fn wait(&mut self, what: &str, mut done: impl FnMut(&mut Bench) -> bool) -> u32 {
        let mut edges = 0;
        while !done(self) {
            assert!(edges < WAIT_LIMIT, "timed out waiting for {what}");
            self.bus.idle(1).unwrap();
            edges += 1;
        }
        edges
    }

    /// One beat writing A and/or B row `row` of `bank`.
    pub fn rows(&mut self, bank: u8, row: usize, a: Option<&[i16]>, b: Option<&[i16]>) {
        let w = |data| RowWrite {
            bank,
            row: row as u16,
            data,
        };
        let beat = Beat {
            a: a.map(w),
            b: b.map(w),
            c: None,
        };
        self.bus.beat(&beat, &mut []).unwrap();
    }

    /// Reads C row `row` of `bank`.
    pub fn c_row(&mut self, bank: u8, row: usize) -> Vec<i16> {
        let mut out = vec![0i16; self.n];
        self.bus.read_c_row(bank, row as u16, &mut out).unwrap();
        out
    }

    /// Queues one array command after checking the queue has room; no error may stand.
    pub fn command(&mut self, a_bank: u32, b_bank: u32, c_bank: u32, clear: bool, emit: bool) {
        self.wait("a free command slot", |b| !b.status("queue_full"));
        let w = self.word(
            "COMMAND",
            &[
                ("a_bank", a_bank),
                ("b_bank", b_bank),
                ("c_bank", c_bank),
                ("clear", clear.into()),
                ("emit", emit.into()),
            ],
        );
        self.write("COMMAND", w);
        assert!(!self.status("error"), "COMMAND 0x{w:x} was refused");
    }

    /// Waits for tile number `done` (DONE_COUNT) and reads its `rows` rows from `bank`.
    pub fn tile(&mut self, done: u32, bank: u8, rows: usize) -> Vec<Vec<i16>> {
        self.wait("the tile", |b| b.read("DONE_COUNT") == done);
        (0..rows).map(|r| self.c_row(bank, r)).collect()
    }
}
