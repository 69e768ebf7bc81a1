//! The driver on a bus that moves whole blocks (the SoC's row DMA): the same results as the
//! row-a-beat schedule, with every operand and C tile moved as blocks.

extern crate std;

use super::mock::MockArray;
use super::tests::{reference, transpose, Rng};
use super::*;
use std::format;
use std::vec;
use systole_core::bus::{BlockTarget, RowBlock};

/// The mock array behind a bus that says it moves blocks; it counts the blocks and moves them
/// with the trait's provided row-a-beat versions (the semantics a DMA must have).
struct Blocks<'a> {
    mock: &'a mut MockArray,
    written: usize,
    read: usize,
}

impl AcceleratorBus for Blocks<'_> {
    type Error = core::convert::Infallible;

    fn read_reg(&mut self, addr: u8) -> Result<u32, Self::Error> {
        self.mock.read_reg(addr)
    }
    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), Self::Error> {
        self.mock.write_reg(addr, value)
    }
    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), Self::Error> {
        self.mock.beat(beat, c_out)
    }
    fn idle(&mut self, cycles: u32) -> Result<(), Self::Error> {
        self.mock.idle(cycles)
    }
    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), Self::Error> {
        self.mock.write_fm(addr, words)
    }
    fn moves_blocks(&self) -> bool {
        true
    }
    fn write_block(
        &mut self,
        target: BlockTarget,
        block: &RowBlock,
        size: usize,
        mem: &[i16],
    ) -> Result<(), Self::Error> {
        assert!(
            block.end().unwrap() <= mem.len(),
            "{block:?} past {}",
            mem.len()
        );
        self.written += 1;
        self.mock.write_block(target, block, size, mem)
    }
    fn read_block(
        &mut self,
        block: &RowBlock,
        size: usize,
        mem: &mut [i16],
    ) -> Result<(), Self::Error> {
        assert!(
            block.end().unwrap() <= mem.len(),
            "{block:?} past {}",
            mem.len()
        );
        self.read += 1;
        self.mock.read_block(block, size, mem)
    }
}

#[test]
fn blocks_give_the_contract_for_every_view_without_hazards() {
    let mut rng = Rng(0xB10C_0017);
    for case in 0..30 {
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
            shift: [0, 7, 15][case % 3],
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
            let mut bus = Blocks {
                mock: &mut mock,
                written: 0,
                read: 0,
            };
            let mut out = vec![0i16; m * n];
            let stats = matmul_views(&mut bus, &cfg, &view, tr, &mut out).unwrap();
            let (written, read) = (bus.written, bus.read);
            let what = format!("case {case}: {m}x{k}x{n} on {size}, {tr:?}");
            assert_eq!(out, expect, "{what}");
            assert_eq!(mock.hazards, 0, "{what}: bank written while in use");
            // Every operand and tile moved as blocks: at most one a command and operand, one
            // a tile (a tile's rows come in one block unless the driver had to drain).
            let tiles = stats.tiles as usize;
            assert!(
                written >= 1 && written <= 2 * stats.commands as usize,
                "{what}: {written}"
            );
            assert!(
                read >= tiles && read <= 2 * tiles,
                "{what}: {read} blocks read"
            );
            let rows = m * n.div_ceil(size);
            assert_eq!(stats.rows_read as usize, rows, "{what}");
        }
    }
}
