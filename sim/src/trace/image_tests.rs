//! Traces of the serial-pin images read back: the bridge image (and, with `--ignored`,
//! the SoC image) writes its pins' values on their cycles, inside the window only.

use super::tests::Vcd;
use super::*;
use crate::{ImagePins, VerilatedSoc};
use std::io::{Read, Write};

/// Checks the trace of `log`'s cycles in `path`: the window's bounds, then `uart_tx` on every
/// traced cycle as the pin read after that cycle's rising edge; returns the bytes a UART
/// receiver decodes from the trace's `uart_tx` (`clocks_per_bit` samples a bit).
fn check_tx(
    path: &Path,
    log: &[(u64, bool)],
    from: u64,
    cycles: u64,
    clocks_per_bit: u32,
) -> Vec<u8> {
    let vcd = Vcd::read(path);
    assert_eq!(
        vcd.times.first(),
        Some(&(2 * from)),
        "the window's first cycle"
    );
    assert_eq!(
        vcd.times.last(),
        Some(&(2 * (from + cycles) - 1)),
        "its last"
    );
    let pin = "top.top.uart_tx";
    let mut decoder = crate::pins::TxDecoder::new(clocks_per_bit);
    let mut bytes = Vec::new();
    let traced_cycles = log
        .iter()
        .filter(|(c, _)| (from..from + cycles).contains(c));
    for &(c, level) in traced_cycles {
        let traced = vcd.at(pin, 2 * c + 1);
        assert_eq!(traced, Some(u64::from(level)), "cycle {c}");
        bytes.extend(decoder.sample(traced == Some(1)));
    }
    bytes
}

/// The bridge answers the `ID` read ("SYST" and a CRC) inside the window: the trace holds
/// `uart_tx` on exactly the cycles the pin was read, and the reply decodes from it.
#[test]
fn board_image_trace_holds_its_pins_on_their_cycles() {
    if crate::linked::BRIDGE_IMAGE.is_none() {
        eprintln!("no board model in this build: skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("board.vcd");
    let (from, cycles) = (100, 800);
    let w = TraceWindow::new(&path, None, from, Some(cycles)).unwrap();
    let mut board = ImagePins::with_trace(w).unwrap();
    assert_eq!(board.trace_state(), Some(TraceState::Waiting));
    board.tx_log = Some(Vec::new());
    board.write_all(&[b'R', systole_core::regmap::ID]).unwrap();
    let mut reply = [0u8; 6];
    board.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[..4], b"SYST");
    while board.cycles() < from + cycles {
        board.step().unwrap();
    }
    assert_eq!(board.trace_state(), Some(TraceState::Closed));
    let log = board.tx_log.take().unwrap();
    let cpb = crate::images::BRIDGE_CLOCK_HZ / crate::images::BRIDGE_BAUD;
    assert_eq!(check_tx(&path, &log, from, cycles, cpb), reply.to_vec());
}

/// The SoC image traced while its firmware boots: the boot announcement's bytes leave on
/// `uart_tx` on the traced cycles. Verilating the traced SoC takes minutes.
#[test]
#[ignore = "Verilates the traced SoC (minutes); run with --ignored"]
fn soc_image_trace_holds_its_pins_on_their_cycles() {
    let Ok(image) = crate::linked::SOC_FIRMWARE else {
        eprintln!("no SoC firmware in this build: skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("soc.vcd");
    let (from, cycles) = (2_000, 40_000);
    let w = TraceWindow::new(&path, None, from, Some(cycles)).unwrap();
    let mut soc = VerilatedSoc::with_trace(image, w).unwrap();
    soc.board_mut().tx_log = Some(Vec::new());
    let mut byte = [0u8; 1];
    soc.read_exact(&mut byte).unwrap();
    soc.run(from + cycles);
    assert_eq!(soc.trace_state(), Some(TraceState::Closed));
    let log = soc.board_mut().tx_log.take().unwrap();
    let cpb = crate::images::SOC_CLOCK_HZ / crate::images::SOC_BAUD;
    let sent = check_tx(&path, &log, from, cycles, cpb);
    assert!(!sent.is_empty(), "no byte left the SoC inside the window");
}
