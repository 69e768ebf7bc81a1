//! The firmware image (`soc-firmware/`) on the Verilated CPU, spoken to in frames through the
//! UART pins only.

use super::*;
use systole_firmware::frame::{encode, Decoder, FRAME_CAPACITY};
use systole_firmware::protocol::boot::is_boot;
use systole_firmware::protocol::{cmd, panic::PANIC_TEST_IDLE_CYCLES, ErrorCode, ERROR, RESPONSE};

/// The firmware's SoC, or `None` (and why) when this build has no model or no image.
fn firmware_soc(panic_test: bool) -> Option<VerilatedSoc> {
    let soc = if panic_test {
        VerilatedSoc::with_panic_test_firmware()
    } else {
        VerilatedSoc::with_firmware()
    };
    match soc {
        Ok(s) => Some(s),
        Err(SimError::SocNotBuilt(why)) => {
            eprintln!("skipped: {why}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Sends one request frame and returns the next frame's `(seq, cmd, payload)`.
fn request(soc: &mut VerilatedSoc, seq: u8, command: u8, payload: &[u8]) -> (u8, u8, Vec<u8>) {
    let mut buf = [0u8; FRAME_CAPACITY];
    let len = encode(seq, command, payload, &mut buf).unwrap();
    soc.write_all(&buf[..len]).unwrap();
    soc.flush().unwrap();
    let mut dec = Decoder::new();
    loop {
        if let Some(f) = dec.next_frame() {
            let f = f.unwrap();
            // The firmware's start announcement answers no request.
            if is_boot(f.cmd, f.payload) {
                continue;
            }
            return (f.seq, f.cmd, f.payload.to_vec());
        }
        let mut byte = [0u8; 1];
        soc.read_exact(&mut byte).unwrap();
        dec.push(&byte);
    }
}

/// Boot: the firmware answers `PING` with the accelerator's `ID` and `CONFIG` within
/// `systole_soc_image::PING_AFTER_RESET_CYCLES` of the reset's release (the bound's parts are
/// stated there; measured 31,280).
#[test]
fn the_firmware_answers_ping_within_its_bound_after_reset() {
    let Some(mut soc) = firmware_soc(false) else {
        return;
    };
    let (seq, command, payload) = request(&mut soc, 7, cmd::PING, &[]);
    let cycles = soc.cycles();
    eprintln!("PING answered {cycles} cycles after reset");
    assert_eq!((seq, command), (7, cmd::PING | RESPONSE));
    let word = |i: usize| u32::from_le_bytes(payload[i..i + 4].try_into().unwrap());
    assert_eq!(word(0), regmap::ID_VALUE);
    assert_eq!(word(4), soc.config().config_word());
    let bound = systole_soc_image::PING_AFTER_RESET_CYCLES;
    assert!(
        cycles <= bound,
        "PING answered after {cycles} cycles, bound {bound}"
    );
}

/// A panic on the CPU: the report frame comes over the UART, then the SoC resets itself and
/// the firmware answers again.
#[test]
fn a_firmware_panic_is_reported_and_the_soc_restarts() {
    let Some(mut soc) = firmware_soc(true) else {
        return;
    };
    let (_, command, _) = request(&mut soc, 1, cmd::PING, &[]);
    assert_eq!(command, cmd::PING | RESPONSE);
    let (seq, command, payload) = request(
        &mut soc,
        2,
        cmd::IDLE,
        &PANIC_TEST_IDLE_CYCLES.to_le_bytes(),
    );
    assert_eq!((seq, command), (0, ERROR), "{payload:02x?}");
    assert_eq!(payload[0], ErrorCode::Panic as u8);
    eprintln!("panic report: {}", String::from_utf8_lossy(&payload[4..]));
    // The SoC resets once the report's last bit is out; a request sent at once waits in the
    // UART's FIFO, which the software reset leaves alone.
    let (seq, command, _) = request(&mut soc, 3, cmd::PING, &[]);
    assert_eq!(
        (seq, command),
        (3, cmd::PING | RESPONSE),
        "no answer after the reset"
    );
}
