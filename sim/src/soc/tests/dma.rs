//! The row DMA on the CPU's bus: the firmware's tile driver runs here with every operand block
//! and C tile moved by `DMA_CMD` (programmed through the monitor program's stores), operands
//! and results in the SoC's RAM. The products must equal the contract for every transposed
//! view (row and lane steps), and the C rows must land on their elements and no others.

use super::monitor::MonitorBus;
use super::*;
use std::io;
use systole_core::bus::{BlockTarget, RowBlock};
use systole_core::Rounding;

/// RAM above the monitor program where operands and results are placed.
const SCRATCH: u32 = 0x8000;

/// The monitor bus with blocks moved by the SoC's DMA.
struct DmaBus {
    mon: MonitorBus,
    /// Next free scratch byte.
    free: u32,
    /// Operands already in RAM: `(address of the slice, its length, RAM address)`.
    uploaded: Vec<(usize, usize, u32)>,
    blocks: usize,
}

impl DmaBus {
    /// Copies `mem` into fresh scratch RAM (two elements a word) and returns its address.
    fn put(&mut self, mem: &[i16]) -> io::Result<u32> {
        let at = self.free;
        for (i, pair) in mem.chunks(2).enumerate() {
            let hi = pair.get(1).copied().unwrap_or(0) as u16;
            let word = u32::from(pair[0] as u16) | (u32::from(hi) << 16);
            self.mon.store(at + 4 * i as u32, word)?;
        }
        // Word-aligned, and a fresh cache line each time (the monitor's loads go through the
        // CPU's data cache).
        self.free = (at + 2 * mem.len() as u32 + 63) & !31;
        Ok(at)
    }

    fn start(&mut self, kind: u32, block: &RowBlock, base: u32) -> io::Result<()> {
        self.blocks += 1;
        self.mon.store(DMA_ADDR, base + 2 * block.offset as u32)?;
        self.mon.store(DMA_ROW_STEP, block.row_step as u32)?;
        self.mon.store(DMA_LANE_STEP, block.lane_step as u32)?;
        self.mon.store(DMA_LANES, u32::from(block.lanes))?;
        self.mon.store(DMA_ROWS, u32::from(block.rows))?;
        let cmd = ROW_CMD_ROW.put(u32::from(block.first_row))
            | ROW_CMD_BANK.put(u32::from(block.bank))
            | ROW_CMD_KIND.put(kind);
        self.mon.store(DMA_CMD, cmd)
    }
}

impl AcceleratorBus for DmaBus {
    type Error = io::Error;

    fn read_reg(&mut self, addr: u8) -> io::Result<u32> {
        self.mon.read_reg(addr)
    }
    fn write_reg(&mut self, addr: u8, value: u32) -> io::Result<()> {
        self.mon.write_reg(addr, value)
    }
    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> io::Result<()> {
        self.mon.beat(beat, c_out)
    }
    fn idle(&mut self, cycles: u32) -> io::Result<()> {
        self.mon.idle(cycles)
    }
    fn write_fm(&mut self, addr: u32, words: &[i16]) -> io::Result<()> {
        self.mon.write_fm(addr, words)
    }
    fn moves_blocks(&self) -> bool {
        true
    }
    fn write_block(
        &mut self,
        target: BlockTarget,
        block: &RowBlock,
        _size: usize,
        mem: &[i16],
    ) -> io::Result<()> {
        let key = (mem.as_ptr() as usize, mem.len());
        let base = match self.uploaded.iter().find(|u| (u.0, u.1) == key) {
            Some(u) => u.2,
            None => {
                let at = self.put(mem)?;
                self.uploaded.push((key.0, key.1, at));
                at
            }
        };
        let kind = match target {
            BlockTarget::A => ROW_KIND_WRITE_A,
            BlockTarget::B => ROW_KIND_WRITE_B,
        };
        self.start(kind, block, base)
    }
    fn read_block(&mut self, block: &RowBlock, _size: usize, mem: &mut [i16]) -> io::Result<()> {
        // `mem` as it is into RAM, the DMA's rows over it, and all of it back: elements the
        // block does not name must come back unchanged.
        let base = self.put(mem)?;
        self.start(ROW_KIND_READ_C, block, base)?;
        for i in 0..mem.len().div_ceil(2) {
            let w = self.mon.load(base + 4 * i as u32)?;
            mem[2 * i] = w as u16 as i16;
            if let Some(x) = mem.get_mut(2 * i + 1) {
                *x = (w >> 16) as u16 as i16;
            }
        }
        Ok(())
    }
}

/// The contract's product of `a` (`m x k`) and `b` (`k x n`).
fn contract(a: &[i16], b: &[i16], (m, k, n): (usize, usize, usize), shift: u32) -> Vec<i16> {
    use systole_core::numeric::convert;
    let mut want = vec![0i16; m * n];
    for i in 0..m {
        for j in 0..n {
            let acc: i64 = (0..k)
                .map(|t| i64::from(a[i * k + t]) * i64::from(b[t * n + j]))
                .sum();
            want[i * n + j] = convert(acc, shift, Rounding::NearestEven, 0, 16) as i16;
        }
    }
    want
}

/// A 5x7 by 7x6 product (edge tiles padded, two tiles each way on 4x4) with A and B read
/// directly, transposed (lane step 1, row step m) or both, through the DMA: equal to the
/// contract, and the C tiles written into the output's elements only.
#[test]
fn dma_blocks_give_the_contract_for_every_view() {
    use systole_firmware::driver::{matmul_views, MatmulJob, Transposed};
    let Some(soc) = soc(&monitor_program()) else {
        return;
    };
    let cfg = soc.config();
    let mut bus = DmaBus {
        mon: MonitorBus { soc, n: cfg.size },
        free: SCRATCH,
        uploaded: Vec::new(),
        blocks: 0,
    };
    let features = bus.mon.load(SYS_FEATURES).unwrap();
    assert_eq!(
        SYS_FEATURE_DMA.get(features),
        1,
        "SYS_FEATURES {features:#x}"
    );
    let (m, k, n) = (5, 7, 6);
    let a: Vec<i16> = (0..m * k)
        .map(|i| (i as i16).wrapping_mul(4099).wrapping_sub(9000))
        .collect();
    let b: Vec<i16> = (0..k * n)
        .map(|i| (i as i16).wrapping_mul(-3001).wrapping_add(77))
        .collect();
    let shift = 14;
    let want = contract(&a, &b, (m, k, n), shift);
    let at: Vec<i16> = (0..m * k).map(|t| a[(t % m) * k + t / m]).collect();
    let bt: Vec<i16> = (0..k * n).map(|t| b[(t % k) * n + t / k]).collect();
    for (ta, tb) in [(false, false), (true, true)] {
        let job = MatmulJob {
            a: if ta { &at } else { &a },
            b: if tb { &bt } else { &b },
            m,
            k,
            n,
            shift,
            rounding: Rounding::NearestEven,
            seed: 3,
        };
        let blocks = bus.blocks;
        // A sentinel the tiles must overwrite, everywhere.
        let mut got = vec![0x5a5a_u16 as i16; m * n];
        let tr = Transposed { a: ta, b: tb };
        matmul_views(&mut bus, &cfg, &job, tr, &mut got).unwrap();
        assert_eq!(got, want, "{tr:?}");
        // 4 commands: A and B for the first two, A alone for the next two (each bank keeps
        // its B block), and 4 tiles, each one transfer.
        assert_eq!(bus.blocks - blocks, 10, "{tr:?}");
    }
    eprintln!("matmuls through the DMA: {} cycles", bus.mon.soc.cycles());
}

/// One C tile row by row into a wider matrix: lanes past `DMA_LANES` and the elements between
/// rows keep their values, and a DMA_CMD with no rows moves nothing.
#[test]
fn dma_c_rows_land_on_their_elements_only() {
    let Some(soc) = soc(&monitor_program()) else {
        return;
    };
    let cfg = soc.config();
    let size = cfg.size;
    let mut bus = DmaBus {
        mon: MonitorBus { soc, n: size },
        free: SCRATCH,
        uploaded: Vec::new(),
        blocks: 0,
    };
    // A tile of known values: A = identity (size x size), B = the values.
    let eye: Vec<i16> = (0..size * size)
        .map(|t| i16::from(t % (size + 1) == 0))
        .collect();
    let vals: Vec<i16> = (0..size * size).map(|t| 100 + t as i16).collect();
    let full = RowBlock {
        bank: 0,
        first_row: 0,
        rows: size as u16,
        lanes: size as u16,
        offset: 0,
        row_step: size,
        lane_step: 1,
    };
    bus.write_block(BlockTarget::A, &full, size, &eye).unwrap();
    bus.write_block(BlockTarget::B, &full, size, &vals).unwrap();
    bus.write_reg(regmap::SHIFT, 0).unwrap();
    bus.write_reg(regmap::K_LEN, size as u32).unwrap();
    bus.write_reg(regmap::COMMAND, regmap::command(0, 0, 0, true, true))
        .unwrap();
    while bus.read_reg(regmap::DONE_COUNT).unwrap() == 0 {}
    // Rows 1.. of the tile, lanes 0..size-1, into a 9-wide matrix from element (2, 1), with
    // a sentinel everywhere; an empty command first.
    let cols = 9;
    let mut mem = vec![-7i16; (size + 2) * cols];
    let none = RowBlock { rows: 0, ..full };
    bus.read_block(&none, size, &mut mem).unwrap();
    assert!(
        mem.iter().all(|&x| x == -7),
        "a command of no rows wrote RAM"
    );
    let part = RowBlock {
        first_row: 1,
        rows: size as u16 - 1,
        lanes: size as u16 - 1,
        offset: 2 * cols + 1,
        row_step: cols,
        ..full
    };
    bus.read_block(&part, size, &mut mem).unwrap();
    for (i, &x) in mem.iter().enumerate() {
        let (r, c) = (i / cols, i % cols);
        let inside = (2..size + 1).contains(&r) && (1..size).contains(&c);
        let want = if inside {
            vals[(r - 1) * size + (c - 1)]
        } else {
            -7
        };
        assert_eq!(x, want, "element ({r}, {c})");
    }
}
