//! The UART driver and the frame server together against an emulated UART whose receive FIFO
//! overflows while the firmware is busy (an `IDLE`), as on the SoC.

extern crate std;

use super::uart::{Uart, UartError};
use crate::frame::{self, Decoder};
use crate::mmio::Regs;
use crate::protocol::{cmd, Request};
use crate::server::{FrameServer, ServerError};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::vec::Vec;
use systole_core::soc::{RX_FIFO_BYTES, UART_DATA, UART_STATUS};
use systole_core::ArrayConfig;

#[derive(Default)]
struct Hw {
    fifo: VecDeque<u8>,
    overrun: bool,
    /// Bytes on the line, arriving during the next idle.
    line: VecDeque<u8>,
    tx: Vec<u8>,
    /// Status reads in a row that found nothing to receive.
    idle_reads: u32,
}

#[derive(Clone, Default)]
struct Shared(Rc<RefCell<Hw>>);

impl Regs for Shared {
    fn read32(&mut self, addr: u32) -> u32 {
        let mut hw = self.0.borrow_mut();
        match addr {
            UART_STATUS => {
                // A firmware waiting for bytes that will not come: the test is over.
                hw.idle_reads = if hw.fifo.is_empty() {
                    hw.idle_reads + 1
                } else {
                    0
                };
                if hw.idle_reads > 100 {
                    std::panic!("the line is idle");
                }
                let s = 1 | u32::from(!hw.fifo.is_empty()) << 1 | u32::from(hw.overrun) << 2;
                hw.overrun = false;
                s
            }
            UART_DATA => hw.fifo.pop_front().map_or(0, u32::from),
            _ => 0,
        }
    }
    fn write32(&mut self, addr: u32, value: u32) {
        if addr == UART_DATA {
            self.0.borrow_mut().tx.push(value as u8);
        }
    }
}

/// A bus whose `idle` lets the line's bytes arrive into the FIFO (dropping what does not fit).
struct IdleBus(Shared);

impl systole_core::AcceleratorBus for IdleBus {
    type Error = ();
    fn read_reg(&mut self, _: u8) -> Result<u32, ()> {
        Ok(0)
    }
    fn write_reg(&mut self, _: u8, _: u32) -> Result<(), ()> {
        Ok(())
    }
    fn beat(&mut self, _: &systole_core::bus::Beat<'_>, _: &mut [i16]) -> Result<(), ()> {
        Ok(())
    }
    fn idle(&mut self, _: u32) -> Result<(), ()> {
        let mut hw = self.0 .0.borrow_mut();
        while let Some(b) = hw.line.pop_front() {
            if hw.fifo.len() < RX_FIFO_BYTES {
                hw.fifo.push_back(b);
            } else {
                hw.overrun = true;
            }
        }
        Ok(())
    }
    fn write_fm(&mut self, _: u32, _: &[i16]) -> Result<(), ()> {
        Ok(())
    }
}

fn frame_of(seq: u8, cmd: u8, payload_len: usize) -> Vec<u8> {
    let mut buf = [0u8; frame::FRAME_CAPACITY];
    let n = frame::encode(seq, cmd, &std::vec![0x33; payload_len], &mut buf).unwrap();
    Vec::from(&buf[..n])
}

/// The board's answers, `(seq, cmd, first payload byte)`, to an `IDLE` during which the
/// frames of `payloads` (`PING`s with payloads of those lengths, `SEQ` 1, 2, ...) arrive.
fn answers(payloads: &[usize]) -> Vec<(u8, u8, Option<u8>)> {
    let hw = Shared::default();
    let mut idle = [0u8; 16];
    let mut p = [0u8; 4];
    let n = Request::Idle { cycles: 1 }.encode_payload(&mut p).unwrap();
    let len = frame::encode(0x70, cmd::IDLE, &p[..n], &mut idle).unwrap();
    hw.0.borrow_mut().fifo.extend(&idle[..len]);
    for (i, &l) in payloads.iter().enumerate() {
        hw.0.borrow_mut()
            .line
            .extend(frame_of(i as u8 + 1, cmd::PING, l));
    }
    let cfg = ArrayConfig::square(4);
    let mut board = FrameServer::new(Uart::new(hw.clone()), IdleBus(hw.clone()), cfg);
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loop {
        if let ServerError::Io(UartError::Overrun) = board.serve() {
            let _ = board.bytes_lost();
        }
    }));
    let mut d = Decoder::new();
    d.push(&hw.0.borrow().tx);
    let mut out = Vec::new();
    while let Some(Ok(f)) = d.next_frame() {
        out.push((f.seq, f.cmd, f.payload.first().copied()));
    }
    out
}

/// A `PING`, a full frame and a full frame whose last 24 bytes the full FIFO dropped arrive
/// during an `IDLE`: the first two are answered (the second refused for its content, as a
/// `PING` has no payload), the damaged one `BytesLost` under its own `SEQ`, so its sender
/// resends it at once.
#[test]
fn an_overrun_is_answered_against_the_frame_it_damaged() {
    use crate::protocol::{ErrorCode, ERROR, RESPONSE};
    let (malformed, lost) = (ErrorCode::Malformed as u8, ErrorCode::BytesLost as u8);
    assert_eq!(
        answers(&[0, 1024, 1024]),
        [
            (0x70, cmd::IDLE | RESPONSE, None),
            (1, cmd::PING | RESPONSE, Some(0)),
            (2, ERROR, Some(malformed)),
            (3, ERROR, Some(lost)),
        ]
    );
}
