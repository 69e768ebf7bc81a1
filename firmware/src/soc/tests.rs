//! The SoC drivers against a fake register file that logs every access.

extern crate std;

use super::*;
use crate::mmio::Regs;
use embedded_hal::delay::DelayNs;
use embedded_io::{Read, Write};
use std::collections::{BTreeMap, VecDeque};
use std::vec::Vec;
use systole_core::soc::*;
use systole_core::{regmap, AcceleratorBus, ArrayConfig};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    R(u32, u32),
    W(u32, u32),
}

/// Registers with scripted read values: a queue per address (its last value repeats once the
/// queue is down to one), 0 for an address without a script.
#[derive(Default)]
struct FakeRegs {
    script: BTreeMap<u32, VecDeque<u32>>,
    log: Vec<Access>,
}

impl FakeRegs {
    fn on_read(mut self, addr: u32, values: &[u32]) -> Self {
        self.script.insert(addr, values.iter().copied().collect());
        self
    }
    fn writes(&self) -> Vec<(u32, u32)> {
        let w = |a: &Access| match *a {
            Access::W(addr, v) => Some((addr, v)),
            Access::R(..) => None,
        };
        self.log.iter().filter_map(w).collect()
    }
}

impl Regs for FakeRegs {
    fn read32(&mut self, addr: u32) -> u32 {
        let v = match self.script.get_mut(&addr) {
            Some(q) if q.len() > 1 => q.pop_front().unwrap_or(0),
            Some(q) => q.front().copied().unwrap_or(0),
            None => 0,
        };
        self.log.push(Access::R(addr, v));
        v
    }
    fn write32(&mut self, addr: u32, value: u32) {
        self.log.push(Access::W(addr, value));
    }
}

fn bus(size: usize, regs: &mut FakeRegs) -> MmioBus<&mut FakeRegs> {
    MmioBus::new(regs, ArrayConfig::square(size)).expect("fits the stage")
}

#[test]
fn a_row_write_stages_packed_lanes_then_commits() {
    let mut regs = FakeRegs::default();
    bus(3, &mut regs)
        .write_b_row(1, 5, &[1, -2, 0x7FFF])
        .unwrap();
    assert_eq!(
        regs.writes(),
        [
            (0x8002_0000, 0xFFFE_0001),
            (0x8002_0004, 0x0000_7FFF),
            // row 5, bank 1 (bit 16), kind 1 = write B (bits 21:20)
            (0x8002_0100, 0x0011_0005),
        ]
    );
}

#[test]
fn a_c_read_commands_then_unpacks_the_stage() {
    let mut regs = FakeRegs::default()
        .on_read(C_STAGE, &[0x8000_7FFF])
        .on_read(C_STAGE + 4, &[0x0001_FFFF]);
    let mut out = [0i16; 4];
    bus(4, &mut regs).read_c_row(1, 2, &mut out).unwrap();
    assert_eq!(out, [0x7FFF, -0x8000, -1, 1]);
    assert_eq!(
        regs.log,
        [
            Access::W(0x8002_0100, 0x0021_0002),
            Access::R(0x8002_0200, 0x8000_7FFF),
            Access::R(0x8002_0204, 0x0001_FFFF),
        ]
    );
}

#[test]
fn registers_sit_at_acc_regs_plus_four_per_index() {
    let mut regs = FakeRegs::default().on_read(ACC_REGS + 4 * 2, &[0x1234]);
    let mut b = bus(4, &mut regs);
    b.write_reg(0x0B, 7).unwrap();
    assert_eq!(b.read_reg(2).unwrap(), 0x1234);
    assert_eq!(
        regs.log,
        [Access::W(0x8001_002C, 7), Access::R(0x8001_0008, 0x1234)]
    );
}

#[test]
fn feature_map_rows_go_one_command_each() {
    // 6 lanes: feature-map rows of 4 words.
    let mut regs = FakeRegs::default();
    let cfg = ArrayConfig {
        fm_depth: 512,
        ..ArrayConfig::square(6)
    };
    let mut b = MmioBus::new(&mut regs, cfg).unwrap();
    b.write_fm(8, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    assert_eq!(
        b.write_fm(6, &[0; 4]),
        Err(MmioError::FmRange {
            addr: 6,
            len: 4,
            row_words: 4,
            fm_depth: 512
        })
    );
    assert!(b.write_fm(508, &[0; 8]).is_err(), "past fm_depth");
    assert_eq!(
        regs.writes(),
        [
            (ROW_STAGE, 0x0002_0001),
            (ROW_STAGE + 4, 0x0004_0003),
            (ROW_CMD, 0x0030_0002),
            (ROW_STAGE, 0x0006_0005),
            (ROW_STAGE + 4, 0x0008_0007),
            (ROW_CMD, 0x0030_0003),
        ]
    );
}

#[test]
fn bad_rows_are_refused_before_any_store() {
    let mut regs = FakeRegs::default();
    let mut b = bus(4, &mut regs);
    assert_eq!(
        b.write_a_row(0, 0, &[1, 2, 3]),
        Err(MmioError::RowLength { len: 3, size: 4 })
    );
    assert_eq!(b.write_a_row(2, 0, &[0; 4]), Err(MmioError::Bank(2)));
    let mut short = [0i16; 2];
    assert!(b.read_c_row(0, 0, &mut short).is_err());
    assert!(regs.log.is_empty(), "{:?}", regs.log);
}

#[test]
fn probe_reads_the_config_register() {
    let cfg = ArrayConfig::new(8, 8, 512).unwrap();
    let regs = FakeRegs::default().on_read(
        ACC_REGS + 4 * u32::from(regmap::CONFIG),
        &[cfg.config_word()],
    );
    let b = MmioBus::probe(regs).unwrap();
    assert_eq!(b.config().size, 8);
    assert_eq!(b.config().buffer_depth, 512);
    let e = MmioBus::probe(FakeRegs::default()).err().unwrap();
    assert!(matches!(e, MmioError::Config(_)), "{e:?}");
    assert!(
        core::error::Error::source(&e).is_some(),
        "the cause is kept"
    );
}

#[test]
fn idle_waits_for_the_cycle_counter() {
    let mut regs = FakeRegs::default().on_read(TIMER_LO, &[u32::MAX - 5, 2, 9, 14, 40]);
    bus(4, &mut regs).idle(20).unwrap();
    // start at 2^32 - 6 (wrapping), 8 and 15 cycles later: too early; 20 later: done.
    assert_eq!(regs.log.len(), 4);
}

#[test]
fn a_byte_sent_waits_for_tx_ready() {
    let mut regs = FakeRegs::default().on_read(UART_STATUS, &[0, 0, 1]);
    Uart::new(&mut regs).write_all(b"A").unwrap();
    assert_eq!(
        regs.log,
        [
            Access::R(0x8000_0004, 0),
            Access::R(0x8000_0004, 0),
            Access::R(0x8000_0004, 1),
            Access::W(0x8000_0000, 0x41),
        ]
    );
}

#[test]
fn a_read_takes_what_has_arrived_and_reports_an_overrun_once() {
    // valid, valid + overrun, then nothing waiting.
    let mut regs = FakeRegs::default()
        .on_read(UART_STATUS, &[0b010, 0b110, 0])
        .on_read(UART_DATA, &[0x1A5, 0x5A]);
    let mut uart = Uart::new(&mut regs);
    let mut buf = [0u8; 8];
    assert_eq!(uart.read(&mut buf), Ok(2));
    assert_eq!(&buf[..2], &[0xA5, 0x5A], "bits 7:0 only");
    assert_eq!(uart.read(&mut buf), Err(UartError::Overrun));
    assert_eq!(uart.overruns(), 1);
}

#[test]
fn delay_rounds_up_to_whole_cycles() {
    // 100 MHz: 25 ns = 2.5 cycles -> 3.
    let mut regs = FakeRegs::default()
        .on_read(SYS_CLOCK_HZ, &[100_000_000])
        .on_read(TIMER_LO, &[10, 12, 13])
        .on_read(TIMER_HI, &[0]);
    let mut t = Timer::new(&mut regs).unwrap();
    t.delay_ns(25);
    let lo_reads = regs
        .log
        .iter()
        .filter(|a| matches!(a, Access::R(TIMER_LO, _)))
        .count();
    assert_eq!(lo_reads, 3);
    assert_eq!(
        Timer::new(FakeRegs::default()).err(),
        Some(TimerError::NoClock)
    );
}

#[test]
fn reset_writes_the_key() {
    let mut regs = FakeRegs::default();
    reset(&mut regs);
    assert_eq!(regs.writes(), [(SYS_RESET, SYS_RESET_KEY)]);
}
