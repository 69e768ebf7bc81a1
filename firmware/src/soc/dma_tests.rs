//! [`MmioBus`] with the row DMA, against a fake register file that records each transfer:
//! one `DMA_CMD` a block in `ROW_CMD`'s layout, blocks checked against their memory before
//! any access, and without the DMA blocks refused and maps through the row stage.

extern crate std;

use super::*;
use crate::mmio::Regs;
use std::string::ToString;
use std::vec;
use std::vec::Vec;
use systole_core::bus::{BlockTarget, ProductJob, RowBlock};
use systole_core::soc::*;
use systole_core::{regmap, AcceleratorBus, ArrayConfig};

/// A 4x4 accelerator with a 4096-word conv unit; `SYS_FEATURES` as given; transfers recorded
/// as `(DMA_CMD word, block, the memory's elements)`.
struct DmaRegs {
    features: u32,
    writes: Vec<(u32, u32)>,
    transfers: Vec<(u32, RowBlock, Vec<i16>)>,
    products: Vec<ProductJob>,
}

fn config() -> ArrayConfig {
    ArrayConfig {
        fm_depth: 4096,
        ..ArrayConfig::square(4)
    }
}

impl DmaRegs {
    fn new(features: u32) -> Self {
        DmaRegs {
            features,
            writes: Vec::new(),
            transfers: Vec::new(),
            products: Vec::new(),
        }
    }
}

impl Regs for DmaRegs {
    fn read32(&mut self, addr: u32) -> u32 {
        match addr {
            SYS_FEATURES => self.features,
            a if a == ACC_REGS + 4 * u32::from(regmap::CONFIG) => config().config_word(),
            _ => 0,
        }
    }
    fn write32(&mut self, addr: u32, value: u32) {
        self.writes.push((addr, value));
    }
    fn dma_from_mem(&mut self, command: u32, block: &RowBlock, mem: &[i16]) -> bool {
        self.transfers.push((command, *block, mem.to_vec()));
        true
    }
    fn dma_into_mem(&mut self, command: u32, block: &RowBlock, mem: &mut [i16]) -> bool {
        self.transfers.push((command, *block, mem.to_vec()));
        mem.fill(1);
        true
    }
    fn product(&mut self, job: &ProductJob, _a: &[i16], _b: &[i16], c: &mut [i16]) -> Option<u32> {
        self.products.push(*job);
        c.fill(2);
        Some(0)
    }
}

fn block(rows: u16, lanes: u16, offset: usize) -> RowBlock {
    RowBlock {
        bank: 1,
        first_row: 2,
        rows,
        lanes,
        offset,
        row_step: 1,
        lane_step: 5,
    }
}

#[test]
fn probe_takes_the_dma_only_when_sys_features_announces_it() {
    for (features, dma) in [
        (0, false),
        (SYS_FEATURE_DMA.put(1), true),
        (0xFFFF_FFFE, false),
    ] {
        let bus = MmioBus::probe(DmaRegs::new(features)).unwrap();
        assert_eq!(
            (bus.has_dma(), bus.moves_blocks()),
            (dma, dma),
            "{features:#x}"
        );
    }
}

#[test]
fn each_block_is_one_dma_command_in_row_cmd_layout() {
    let mut bus = MmioBus::probe(DmaRegs::new(1)).unwrap();
    let mem: Vec<i16> = (0..40).collect();
    // Rows 2..5 of A bank 1 from a transposed 4-lane view: the last element is 3 + 3 * 5 = 18.
    let b = block(3, 4, 1);
    bus.write_block(BlockTarget::A, &b, 4, &mem).unwrap();
    bus.write_block(BlockTarget::B, &b, 4, &mem).unwrap();
    let mut out = vec![0i16; 19];
    bus.read_block(&b, 4, &mut out).unwrap();
    assert_eq!(out, vec![1; 19], "the C rows came back");
    let regs = bus.regs();
    let word = |kind: u32, bank: u32, row: u32| {
        ROW_CMD_KIND.put(kind) | ROW_CMD_BANK.put(bank) | ROW_CMD_ROW.put(row)
    };
    let got: Vec<(u32, RowBlock, usize)> = regs
        .transfers
        .iter()
        .map(|t| (t.0, t.1, t.2.len()))
        .collect();
    assert_eq!(
        got,
        [
            (word(ROW_KIND_WRITE_A, 1, 2), b, 40),
            (word(ROW_KIND_WRITE_B, 1, 2), b, 40),
            (word(ROW_KIND_READ_C, 1, 2), b, 19),
        ]
    );
    assert!(
        regs.writes.is_empty(),
        "no row-stage traffic: {:?}",
        regs.writes
    );
}

#[test]
fn a_block_outside_its_memory_or_the_array_is_refused_before_any_access() {
    let mut bus = MmioBus::probe(DmaRegs::new(1)).unwrap();
    let mem = [0i16; 19];
    // One element too far: rows 3, lanes 4 from offset 2 end at element 19.
    for (b, size) in [
        (block(3, 4, 2), 4),
        (block(1, 5, 0), 4),
        (block(1, 1, 0), 3),
    ] {
        let e = bus.write_block(BlockTarget::A, &b, size, &mem).unwrap_err();
        assert!(
            matches!(e, MmioError::Block { .. } | MmioError::RowLength { .. }),
            "{b:?}: {e}"
        );
        let mut out = mem;
        assert!(bus.read_block(&b, size, &mut out).is_err(), "{b:?}");
    }
    let over = RowBlock {
        row_step: usize::MAX,
        ..block(2, 1, 0)
    };
    let e = bus.write_block(BlockTarget::B, &over, 4, &mem).unwrap_err();
    assert!(matches!(e, MmioError::Block { end: None, .. }), "{e}");
    assert!(e.to_string().contains("outside its memory"), "{e}");
    let regs = bus.regs();
    assert!(regs.transfers.is_empty() && regs.writes.is_empty());
}

#[test]
fn without_the_dma_a_block_is_refused_and_nothing_is_written() {
    let mut bus = MmioBus::probe(DmaRegs::new(0)).unwrap();
    let mem: Vec<i16> = (0..40).collect();
    let e = bus.write_block(BlockTarget::B, &block(2, 3, 1), 4, &mem);
    assert_eq!(e, Err(MmioError::NoDma));
    let mut out = mem.clone();
    assert_eq!(
        bus.read_block(&block(2, 3, 1), 4, &mut out),
        Err(MmioError::NoDma)
    );
    // Feature maps go through the row stage (the firmware's maps are written once a
    // convolution; the image has no room for their DMA path).
    bus.write_fm(0, &mem[..4]).unwrap();
    let regs = bus.regs();
    assert!(regs.transfers.is_empty());
    let pair = |lo: i16, hi: i16| u32::from(lo as u16) | u32::from(hi as u16) << 16;
    let cmd = ROW_CMD_KIND.put(ROW_KIND_WRITE_FM) | ROW_CMD_ROW.put(0);
    assert_eq!(
        regs.writes,
        [
            (ROW_STAGE, pair(0, 1)),
            (ROW_STAGE + 4, pair(2, 3)),
            (ROW_CMD, cmd)
        ]
    );
}

/// The product sequencer: taken only when `SYS_FEATURES` announces it; a product whose
/// operand reaches past its slice is refused by name before any register is written.
#[test]
fn a_product_goes_to_the_sequencer_only_inside_its_slices() {
    let mm = SYS_FEATURE_MM.put(1);
    for (features, runs) in [(0, false), (mm, true), (SYS_FEATURE_DMA.put(1), false)] {
        let bus = MmioBus::probe(DmaRegs::new(features)).unwrap();
        assert_eq!(bus.runs_products(), runs, "{features:#x}");
    }
    let job = ProductJob {
        m: 3,
        k: 5,
        n: 2,
        a_steps: [5, 1],
        b_steps: [2, 1],
        c_steps: [2, 1],
        shift: 1,
        rounding: 2,
        seed: 9,
    };
    let (a, b) = (vec![0i16; 15], vec![0i16; 10]);
    let mut bus = MmioBus::probe(DmaRegs::new(mm)).unwrap();
    let mut c = vec![0i16; 6];
    assert_eq!(bus.run_product(&job, &a, &b, &mut c), Ok(Some(0)));
    assert_eq!(
        (bus.regs().products.as_slice(), c.as_slice()),
        (&[job][..], &[2i16; 6][..])
    );
    // A transposed A whose steps reach element 15 of 15: refused, nothing run.
    let past = ProductJob {
        a_steps: [1, 4],
        ..job
    };
    let e = bus.run_product(&past, &a, &b, &mut c).unwrap_err();
    assert_eq!(
        e,
        MmioError::Product {
            which: "a",
            end: Some(19),
            len: 15
        }
    );
    assert!(
        e.to_string().contains("operand a reaches element 19"),
        "{e}"
    );
    let e = bus.run_product(&job, &a, &b, &mut c[..5]).unwrap_err();
    assert!(matches!(e, MmioError::Product { which: "c", .. }), "{e}");
    assert_eq!(bus.regs().products.len(), 1);
    // Without the sequencer: nothing to run (the driver tiles the product itself).
    let mut plain = MmioBus::probe(DmaRegs::new(0)).unwrap();
    assert_eq!(plain.run_product(&job, &a, &b, &mut c), Ok(None));
}
