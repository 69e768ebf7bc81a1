//! Faults on the board-operation path (`WRITE_TENSOR`, `MATMUL`, `READ_TENSOR` run by the
//! firmware on the Verilated SoC), through the UART pins only: a truncated and a corrupted
//! request, a reset of the SoC and a firmware panic in the middle of a board operation, a
//! receiver overrun forced while the firmware is busy, and a pty closed mid-operation. Each
//! ends in a typed host error or a resend that succeeds, never in a wrong or partial result,
//! and after a restart the host uploads the operands again instead of naming tensors the board
//! lost. Skipped with a note when this build has no SoC model.

use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use systole_core::soc::RX_FIFO_BYTES;
use systole_core::Rounding;
use systole_device::backend::BusDevice;
use systole_device::serial::{LinkError, SerialBus};
use systole_device::{Device, DeviceError};
use systole_firmware::frame::{self, Decoder, FRAME_CAPACITY, HEADER, MAX_PAYLOAD, SYNC};
use systole_firmware::protocol::panic::PANIC_TEST_OP_SEED;
use systole_firmware::protocol::{cmd, ErrorCode, RemoteError, Request, ERROR};
use systole_golden::{OutputSpec, QMatrix};
use systole_sim::{SimError, VerilatedSoc};

/// What the line does to the host's next request frame of command `cmd` (`None`: any).
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Flips a payload bit of the next `times` such frames.
    Corrupt { cmd: Option<u8>, times: usize },
    /// Presses the SoC's reset button `cycles` clock cycles after that frame reached it.
    ResetAfter { cmd: Option<u8>, cycles: u64 },
    /// Presses the reset button just before that frame goes out.
    ResetBefore { cmd: Option<u8> },
    /// Sends an `IDLE` of [`OVERRUN_IDLE`] cycles and a full-size frame just ahead of that
    /// frame (of at least [`OVERRUN_FRAME`] bytes): more than the UART's receive FIFO holds
    /// arrives while the firmware is busy, and the end of the host's frame is lost.
    Overrun { cmd: Option<u8> },
}

/// Cycles the firmware idles in [`Fault::Overrun`]: longer than the line takes for the two
/// frames behind it (at most 2 x 1,032 bytes at 160 cycles a byte).
const OVERRUN_IDLE: u32 = 400_000;

/// The shortest host frame [`Fault::Overrun`] acts on: with the full-size frame ahead of it,
/// 8 bytes more than the FIFO holds.
const OVERRUN_FRAME: usize = RX_FIFO_BYTES + 8 - FRAME_CAPACITY;

/// The SoC's serial pins with a [`Fault`] armed by the test; it notes every error code the
/// board answered.
struct Line {
    soc: VerilatedSoc,
    fault: Arc<Mutex<Option<Fault>>>,
    answers: Decoder,
    refusals: Arc<Mutex<Vec<ErrorCode>>>,
}

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut frame = buf.to_vec();
        let frame_cmd = (buf.len() > HEADER && buf[..2] == SYNC).then(|| buf[5]);
        let mut fault = self.fault.lock().unwrap();
        let hit = |c: Option<u8>| frame_cmd.is_some() && (c.is_none() || c == frame_cmd);
        let mut reset_after = None;
        match *fault {
            Some(Fault::Corrupt { cmd, times }) if hit(cmd) => {
                frame[HEADER] ^= 0x10;
                *fault = (times > 1).then_some(Fault::Corrupt {
                    cmd,
                    times: times - 1,
                });
            }
            Some(Fault::ResetAfter { cmd, cycles }) if hit(cmd) => {
                reset_after = Some(cycles);
                *fault = None;
            }
            Some(Fault::ResetBefore { cmd }) if hit(cmd) => {
                self.soc.press_reset();
                *fault = None;
            }
            Some(Fault::Overrun { cmd }) if hit(cmd) && buf.len() >= OVERRUN_FRAME => {
                let mut idle = [0u8; 4];
                Request::Idle {
                    cycles: OVERRUN_IDLE,
                }
                .encode_payload(&mut idle)
                .unwrap();
                let mut bytes = [0u8; FRAME_CAPACITY];
                let n = frame::encode(0xE0, cmd::IDLE, &idle, &mut bytes).unwrap();
                self.soc.write_all(&bytes[..n])?;
                // A PING with a payload, refused as malformed once it has all arrived.
                let n = frame::encode(0xE1, cmd::PING, &[0x33; MAX_PAYLOAD], &mut bytes).unwrap();
                self.soc.write_all(&bytes[..n])?;
                *fault = None;
            }
            _ => {}
        }
        drop(fault);
        self.soc.write_all(&frame)?;
        if let Some(cycles) = reset_after {
            self.soc.flush()?;
            self.soc.run(cycles);
            self.soc.press_reset();
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.soc.flush()
    }
}

impl Read for Line {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.soc.read(buf)?;
        self.answers.push(&buf[..n]);
        while let Some(f) = self.answers.next_frame() {
            let Ok(f) = f else { continue };
            let code = RemoteError::parse(f.payload).and_then(|e| e.code);
            // Start announcements and panic reports answer no request.
            if let (ERROR, Some(code)) = (f.cmd, code) {
                if !matches!(code, ErrorCode::Restarted | ErrorCode::Panic) {
                    self.refusals.lock().unwrap().push(code);
                }
            }
        }
        Ok(n)
    }
}

/// The serial device on a faulty line to the SoC, the handle that arms faults, and the board's
/// refusals as the line saw them.
struct Rig {
    dev: BusDevice<SerialBus<Line>>,
    fault: Arc<Mutex<Option<Fault>>>,
    refusals: Arc<Mutex<Vec<ErrorCode>>>,
}

fn rig(panic_test: bool) -> Option<Rig> {
    let soc = match if panic_test {
        VerilatedSoc::with_panic_test_firmware()
    } else {
        VerilatedSoc::with_firmware()
    } {
        Ok(s) => s,
        Err(SimError::SocNotBuilt(why)) => {
            eprintln!("no SoC model in this build: {why}");
            return None;
        }
        Err(e) => panic!("{e}"),
    };
    let config = soc.config();
    let fault = Arc::new(Mutex::new(None));
    let refusals = Arc::new(Mutex::new(Vec::new()));
    let line = Line {
        soc,
        fault: fault.clone(),
        answers: Decoder::new(),
        refusals: refusals.clone(),
    };
    let mut dev = BusDevice::on_port(line, config, "the faulty line").unwrap();
    // Only a lost frame waits out a timeout; the simulated SoC is slow.
    dev.set_retry_policy(Duration::from_secs(20), 3);
    Some(Rig {
        dev,
        fault,
        refusals,
    })
}

impl Rig {
    fn arm(&self, fault: Fault) {
        *self.fault.lock().unwrap() = Some(fault);
    }
}

/// Operands of an `m x k x n` product (words within +-2048, 8 fractional bits).
fn operands(m: usize, k: usize, n: usize, salt: i16) -> (QMatrix, QMatrix) {
    let a = (0..m * k).map(|i| (i as i16).wrapping_mul(37) ^ salt);
    let b = (0..k * n).map(|i| (i as i16).wrapping_mul(-11) ^ salt);
    (
        QMatrix::from_vec(m, k, 8, a.map(|w| w >> 4).collect()).unwrap(),
        QMatrix::from_vec(k, n, 8, b.map(|w| w >> 4).collect()).unwrap(),
    )
}

/// The product the tests run: its operands take 1,920 bytes, so the first upload frame is
/// full (as [`Fault::Overrun`] needs) and the pty test's board closes mid-upload.
const SHAPE: (usize, usize, usize) = (12, 40, 12);

/// A product whose C (576 words) is longer than a `MATMUL` answer carries (492): the rest is
/// read with `READ_TENSOR`.
const WIDE: (usize, usize, usize) = (24, 8, 24);

fn spec(seed: u32) -> OutputSpec {
    OutputSpec {
        frac: 8,
        rounding: Rounding::Stochastic,
        seed,
    }
}

/// Runs `a·b` on the device and checks it against the golden model: the board ran it.
fn matmul_equals_golden(rig: &mut Rig, a: &QMatrix, b: &QMatrix) {
    let board_ops = rig.dev.stats().board_ops;
    let c = rig
        .dev
        .matmul(a, b, &spec(7))
        .unwrap_or_else(|e| panic!("{e}"));
    let want = systole_golden::matmul(a, b, &spec(7), rig.dev.config().size).unwrap();
    assert_eq!(c.data, want.data, "bit for bit");
    assert_eq!(rig.dev.stats().board_ops, board_ops + 1, "run on the board");
}

fn link_error(r: Result<QMatrix, DeviceError>) -> LinkError {
    let e = r.expect_err("a result from a failed board operation");
    e.cause::<LinkError>()
        .cloned()
        .unwrap_or_else(|| panic!("no link error under {e:?}"))
}

/// A corrupted `WRITE_TENSOR` batch and a corrupted `MATMUL`, once each: the board refuses
/// each as a CRC error, the host resends it, and the product is right. Corrupted on every try,
/// the `MATMUL` ends as `Damaged` with no result, and the line healed, the next one runs.
#[test]
fn corrupted_board_op_requests_are_resent_or_end_as_damage() {
    let Some(mut rig) = rig(false) else { return };
    let (a, b) = operands(SHAPE.0, SHAPE.1, SHAPE.2, 0);
    rig.arm(Fault::Corrupt {
        cmd: Some(cmd::BATCH),
        times: 1,
    });
    matmul_equals_golden(&mut rig, &a, &b);
    rig.arm(Fault::Corrupt {
        cmd: Some(cmd::MATMUL),
        times: 1,
    });
    matmul_equals_golden(&mut rig, &a, &b);
    assert_eq!(rig.dev.stats().resends, 2);
    assert_eq!(*rig.refusals.lock().unwrap(), [ErrorCode::BadCrc; 2]);
    rig.arm(Fault::Corrupt {
        cmd: Some(cmd::MATMUL),
        times: usize::MAX,
    });
    let e = link_error(rig.dev.matmul(&a, &b, &spec(7)));
    assert!(
        matches!(
            e,
            LinkError::Damaged {
                tries: 4,
                damaged: 4,
                ..
            }
        ),
        "{e:?}"
    );
    *rig.fault.lock().unwrap() = None;
    matmul_equals_golden(&mut rig, &a, &b);
}

/// The reset button pressed while the board computes a `MATMUL`, and again between its answer
/// and the `READ_TENSOR` of the rest of C: each fails the product with `BoardRestarted` and no
/// (partial) result; the same product then runs again, its operands uploaded anew.
#[test]
fn a_reset_mid_board_op_fails_it_and_the_next_one_reuploads() {
    let Some(mut rig) = rig(false) else { return };
    for (fault, (m, k, n)) in [
        (
            Fault::ResetAfter {
                cmd: Some(cmd::MATMUL),
                cycles: 20_000,
            },
            SHAPE,
        ),
        (
            Fault::ResetBefore {
                cmd: Some(cmd::READ_TENSOR),
            },
            WIDE,
        ),
    ] {
        let (a, b) = operands(m, k, n, 1);
        rig.arm(fault);
        let e = link_error(rig.dev.matmul(&a, &b, &spec(7)));
        assert_eq!(e, LinkError::BoardRestarted, "{fault:?}");
        let sent = rig.dev.stats().bytes_to_device;
        matmul_equals_golden(&mut rig, &a, &b);
        let operand_bytes = 2 * (a.data.len() + b.data.len()) as u64;
        assert!(
            rig.dev.stats().bytes_to_device - sent > operand_bytes,
            "{fault:?}: the operands were not uploaded again"
        );
    }
}

/// The board restarts while the host drives an operation too large for the store register by
/// register (the start announcement seen outside any board operation): that one fails with
/// `BoardRestarted`, and the host's record of the store goes with it, so the next board
/// operation uploads its operands again instead of naming tensors the board no longer holds.
#[test]
fn a_restart_seen_on_the_register_path_invalidates_the_host_copy_of_the_store() {
    let Some(mut rig) = rig(false) else { return };
    let (a, b) = operands(SHAPE.0, SHAPE.1, SHAPE.2, 2);
    matmul_equals_golden(&mut rig, &a, &b);
    let (big_a, big_b) = operands(4, 2100, 1, 3);
    rig.arm(Fault::ResetBefore { cmd: None });
    let e = link_error(rig.dev.matmul(&big_a, &big_b, &spec(9)));
    assert_eq!(e, LinkError::BoardRestarted);
    matmul_equals_golden(&mut rig, &a, &b);
}

/// The firmware panics in its board driver in the middle of a `MATMUL` (the panic-test image,
/// seed `PANIC_TEST_OP_SEED`): the host reports the panic, no result; the next product runs.
#[test]
fn a_panic_mid_board_op_is_reported_and_the_next_one_runs() {
    let Some(mut rig) = rig(true) else { return };
    let (a, b) = operands(SHAPE.0, SHAPE.1, SHAPE.2, 4);
    let e = link_error(rig.dev.matmul(&a, &b, &spec(PANIC_TEST_OP_SEED)));
    let LinkError::BoardPanicked(m) = &e else {
        panic!("{e:?}")
    };
    assert!(m.contains("panic-test: an operation seeded"), "{m}");
    matmul_equals_golden(&mut rig, &a, &b);
}

/// More bytes than the UART's receive FIFO holds arrive while the firmware idles: the end of
/// the host's first `WRITE_TENSOR` batch is lost, the board answers it `BytesLost`, the host
/// resends it at once (one resend, no timeout) and the product is right.
#[test]
fn a_receiver_overrun_is_answered_bytes_lost_and_the_resend_runs() {
    let Some(mut rig) = rig(false) else { return };
    let (a, b) = operands(SHAPE.0, SHAPE.1, SHAPE.2, 5);
    rig.arm(Fault::Overrun {
        cmd: Some(cmd::BATCH),
    });
    matmul_equals_golden(&mut rig, &a, &b);
    assert!(
        rig.fault.lock().unwrap().is_none(),
        "the overrun was forced"
    );
    // The filler PING is refused as malformed (its SEQ is none of the host's).
    let refusals = rig.refusals.lock().unwrap().clone();
    assert_eq!(refusals, [ErrorCode::Malformed, ErrorCode::BytesLost]);
    assert_eq!(rig.dev.stats().resends, 1);
}

/// The simulated SoC board unplugged (its pty closed) while the operands of a board operation
/// go up: the host reports the lost link at once, with no result.
#[test]
fn a_pty_closed_mid_board_op_is_a_lost_link_with_no_result() {
    use systole_device::board_sim::SimBoard;
    let (board, config) = match SimBoard::spawn_soc_image_closing_after(1000) {
        Ok(b) => b,
        Err(e @ DeviceError::NotBuilt { .. }) => {
            eprintln!("SKIPPED: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let spec_path = format!("serial:{}", board.path().display());
    let mut dev = systole_device::open(&spec_path, config).unwrap();
    let (a, b) = operands(SHAPE.0, SHAPE.1, SHAPE.2, 6);
    let e = link_error(dev.matmul(&a, &b, &spec(7)));
    assert!(matches!(e, LinkError::Gone(_)), "{e:?}");
    assert_eq!(dev.stats().ops, 0);
    drop(board);
}
