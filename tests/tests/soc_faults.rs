//! Bad input and faults against the firmware on the Verilated SoC, through the UART pins only:
//! a truncated and a corrupted request are refused without running, a reset of the SoC and a
//! firmware panic in the middle of an operation and a pty closed under the host each end in a
//! clear host error and no result. Skipped with a note when this build has no SoC model.

use std::io::{self, Read, Write};
use std::time::Duration;
use systole_core::{regmap, AcceleratorBus, Rounding};
use systole_device::serial::{LinkError, SerialBus};
use systole_firmware::driver::{self, DriverError, MatmulJob};
use systole_firmware::frame::{self, Decoder, FRAME_CAPACITY};
use systole_firmware::protocol::boot::is_boot;
use systole_firmware::protocol::panic::PANIC_TEST_IDLE_CYCLES;
use systole_firmware::protocol::{cmd, ErrorCode, RemoteError, Request, ERROR, RESPONSE};
use systole_sim::{SimError, VerilatedSoc};

fn soc(panic_test: bool) -> Option<VerilatedSoc> {
    let soc = if panic_test {
        VerilatedSoc::with_panic_test_firmware()
    } else {
        VerilatedSoc::with_firmware()
    };
    match soc {
        Ok(s) => Some(s),
        Err(SimError::SocNotBuilt(why)) => {
            eprintln!("no SoC model in this build: {why}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

fn encode(seq: u8, request: &Request<'_>) -> Vec<u8> {
    let mut payload = [0u8; FRAME_CAPACITY];
    let n = request.encode_payload(&mut payload).unwrap();
    let mut buf = [0u8; FRAME_CAPACITY];
    let len = frame::encode(seq, request.cmd(), &payload[..n], &mut buf).unwrap();
    buf[..len].to_vec()
}

/// The next frame other than the start announcement: `(seq, cmd, payload)`.
fn next_frame(soc: &mut VerilatedSoc) -> (u8, u8, Vec<u8>) {
    let mut decoder = Decoder::new();
    loop {
        if let Some(f) = decoder.next_frame() {
            let f = f.expect("an intact frame from the SoC");
            if !is_boot(f.cmd, f.payload) {
                return (f.seq, f.cmd, f.payload.to_vec());
            }
            continue;
        }
        let mut b = [0u8; 1];
        soc.read_exact(&mut b).expect("the SoC answers");
        decoder.push(&b);
    }
}

fn shift_register(soc: &mut VerilatedSoc, seq: u8) -> u32 {
    soc.write_all(&encode(
        seq,
        &Request::ReadReg {
            addr: regmap::SHIFT,
        },
    ))
    .unwrap();
    let (s, c, p) = next_frame(soc);
    assert_eq!((s, c), (seq, cmd::READ_REG | RESPONSE));
    u32::from_le_bytes(p.try_into().unwrap())
}

/// A request cut short and then a whole one: the cut one (completed by the next one's bytes)
/// fails its CRC and is refused under its own `SEQ`, the next one is found and answered, and the
/// cut write never ran.
#[test]
fn a_truncated_request_is_refused_and_the_next_one_answered() {
    let Some(mut soc) = soc(false) else { return };
    let before = shift_register(&mut soc, 1);
    let write = encode(
        2,
        &Request::WriteReg {
            addr: regmap::SHIFT,
            value: before ^ 5,
        },
    );
    soc.write_all(&write[..write.len() - 4]).unwrap();
    soc.write_all(&encode(3, &Request::Ping)).unwrap();
    let (seq, c, p) = next_frame(&mut soc);
    let e = RemoteError::parse(&p).unwrap();
    assert_eq!((seq, c, e.code), (2, ERROR, Some(ErrorCode::BadCrc)));
    let (seq, c, _) = next_frame(&mut soc);
    assert_eq!((seq, c), (3, cmd::PING | RESPONSE));
    assert_eq!(shift_register(&mut soc, 4), before, "the cut write ran");
}

/// One bit flipped in a request's payload: refused as a CRC error, nothing written; the same
/// request resent whole runs.
#[test]
fn a_corrupted_request_is_refused_and_runs_when_resent() {
    let Some(mut soc) = soc(false) else { return };
    let before = shift_register(&mut soc, 1);
    let write = encode(
        2,
        &Request::WriteReg {
            addr: regmap::SHIFT,
            value: before ^ 5,
        },
    );
    let mut bad = write.clone();
    bad[frame::HEADER + 1] ^= 0x04;
    soc.write_all(&bad).unwrap();
    let (seq, c, p) = next_frame(&mut soc);
    let e = RemoteError::parse(&p).unwrap();
    assert_eq!((seq, c, e.code), (2, ERROR, Some(ErrorCode::BadCrc)));
    assert_eq!(shift_register(&mut soc, 3), before, "the damaged write ran");
    soc.write_all(&write).unwrap();
    assert_eq!(next_frame(&mut soc).1, cmd::WRITE_REG | RESPONSE);
    assert_eq!(shift_register(&mut soc, 4), before ^ 5);
}

/// The SoC's byte stream, with a reset button pressed once `press_after` bytes were written.
struct ResetAfter {
    soc: VerilatedSoc,
    press_after: usize,
}

impl Write for ResetAfter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.soc.write(buf)?;
        if self.press_after > 0 && n >= self.press_after {
            // The bytes written so far reach the SoC, then the button is pressed.
            self.soc.flush()?;
            self.soc.press_reset();
            self.press_after = 0;
        } else if self.press_after > 0 {
            self.press_after -= n;
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.soc.flush()
    }
}

impl Read for ResetAfter {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.soc.read(buf)
    }
}

/// A matmul job whose operands take several frames.
fn job_operands(m: usize, k: usize, n: usize) -> (Vec<i16>, Vec<i16>) {
    let a = (0..m * k).map(|i| (i as i16).wrapping_mul(37)).collect();
    let b = (0..k * n).map(|i| (i as i16).wrapping_mul(-11)).collect();
    (a, b)
}

fn matmul<B: AcceleratorBus>(
    bus: &mut B,
    cfg: &systole_core::ArrayConfig,
    a: &[i16],
    b: &[i16],
    (m, k, n): (usize, usize, usize),
) -> Result<Vec<i16>, DriverError<B::Error>> {
    let job = MatmulJob {
        a,
        b,
        m,
        k,
        n,
        shift: 4,
        rounding: Rounding::NearestEven,
        seed: 1,
    };
    let mut c = vec![0i16; m * n];
    driver::matmul(bus, cfg, &job, &mut c)?;
    Ok(c)
}

/// The reset button pressed while a matmul's operands are on the way: the firmware restarts
/// and announces it, and the host fails the matmul with `BoardRestarted` (no result) instead of
/// going on with a board that lost its state; the next operation runs.
#[test]
fn a_reset_mid_operation_fails_it_with_no_result() {
    let Some(soc) = soc(false) else { return };
    let cfg = soc.config();
    let shape = (9, 300, 5);
    let (a, b) = job_operands(shape.0, shape.1, shape.2);
    let port = ResetAfter {
        soc,
        press_after: 1500,
    };
    let mut bus = SerialBus::new(port, cfg.size);
    bus.ping().unwrap();
    let r = matmul(&mut bus, &cfg, &a, &b, shape);
    assert!(
        matches!(r, Err(DriverError::Bus(LinkError::BoardRestarted))),
        "{r:?}"
    );
    // The board serves again, and the whole operation now runs.
    assert!(matmul(&mut bus, &cfg, &a, &b, shape).is_ok());
}

/// The firmware panics in the middle of a batch: the host reports the panic (its message), and
/// a request sent right after, into the SoC's restart, is answered on its first try.
#[test]
fn a_panic_mid_operation_is_an_error_and_the_next_request_answers_at_once() {
    let Some(soc) = soc(true) else { return };
    let cfg = soc.config();
    let mut bus = SerialBus::new(soc, cfg.size);
    // Retries would hide a lost request: one try only.
    bus.set_retry_policy(Duration::from_secs(5), 0);
    bus.ping().unwrap();
    bus.write_reg(regmap::SHIFT, 3).unwrap();
    bus.idle(PANIC_TEST_IDLE_CYCLES).unwrap();
    let e = bus.flush().unwrap_err();
    let LinkError::BoardPanicked(m) = &e else {
        panic!("{e:?}")
    };
    assert!(m.contains("panic-test"), "{m}");
    assert_eq!(bus.read_reg(regmap::ID).unwrap(), regmap::ID_VALUE);
    assert_eq!(bus.counters().resends, 0);
}

/// The pty closes (the simulated SoC board stops) while a long matmul runs through it: the
/// device reports a lost link or no answer, and no result.
#[test]
fn a_pty_closed_mid_operation_is_an_error_with_no_result() {
    use systole_device::board_sim::SimBoard;
    use systole_device::DeviceError;
    let (board, config) = match SimBoard::spawn_soc_image() {
        Ok(b) => b,
        Err(e @ DeviceError::NotBuilt { .. }) => {
            eprintln!("SKIPPED: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let spec = format!("serial:{}", board.path().display());
    let mut dev = systole_device::open(&spec, config).unwrap();
    let (a, b) = job_operands(20, 600, 9);
    let a = systole_golden::QMatrix::from_vec(20, 600, 4, a).unwrap();
    let b = systole_golden::QMatrix::from_vec(600, 9, 4, b).unwrap();
    let spec = systole_golden::OutputSpec {
        frac: 4,
        rounding: Rounding::NearestEven,
        seed: 1,
    };
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        drop(board);
    });
    let r = dev.matmul(&a, &b, &spec);
    closer.join().unwrap();
    let e = r.expect_err("a result from a board that went away");
    let link = e.cause::<LinkError>();
    assert!(
        matches!(link, Some(LinkError::Gone(_) | LinkError::NoAnswer { .. })),
        "{e:?}"
    );
}

/// The tensor store on the SoC refuses what does not fit and ids it does not hold, each with
/// its own error code and detail, and goes on serving with its tensors intact.
#[test]
fn a_full_store_and_an_unknown_tensor_are_refused_with_their_codes() {
    use systole_firmware::protocol::{MatmulRequest, Words};
    let Some(mut soc) = soc(false) else { return };
    let words = (systole_core::soc::TENSOR_STORE_BYTES / 2) as u16;
    let mut ask = |seq: u8, r: &Request<'_>| {
        soc.write_all(&encode(seq, r)).unwrap();
        next_frame(&mut soc)
    };
    let two = [1u8, 0, 2, 0];
    let store = |id, rows, cols, bytes| Request::WriteTensor {
        id,
        rows,
        cols,
        offset: 0,
        words: Words::from_le_bytes(bytes),
    };
    assert_eq!(
        ask(1, &store(1, 1, 2, &two)),
        (1, cmd::WRITE_TENSOR | RESPONSE, vec![])
    );
    // One word more than the store has left: StoreFull, detail the free words.
    let free = (words - 2).to_le_bytes();
    assert_eq!(
        ask(2, &store(2, 1, words - 1, &[])),
        (
            2,
            ERROR,
            vec![
                ErrorCode::StoreFull as u8,
                cmd::WRITE_TENSOR,
                free[0],
                free[1]
            ]
        )
    );
    // A product naming a tensor that is not there: UnknownTensor, detail the id.
    let product = MatmulRequest {
        a: 1,
        b: 9,
        out: 0,
        flags: 0,
        shift: 0,
        rounding: Rounding::Truncate,
        seed: 0,
    };
    assert_eq!(
        ask(3, &Request::Matmul(product)),
        (
            3,
            ERROR,
            vec![ErrorCode::UnknownTensor as u8, cmd::MATMUL, 9, 0]
        )
    );
    let read = Request::ReadTensor {
        id: 1,
        offset: 0,
        count: 2,
    };
    assert_eq!(
        ask(4, &read),
        (4, cmd::READ_TENSOR | RESPONSE, two.to_vec())
    );
}

/// Board operations cut short: a `WRITE_TENSOR` batch truncated (and completed by the next
/// request's bytes) is refused under its `SEQ` and the stored tensor keeps its words; a
/// `MATMUL` cut short never runs (its output tensor does not appear); resent whole it runs.
#[test]
fn truncated_board_op_requests_are_refused_and_never_run() {
    use systole_firmware::protocol::{MatmulRequest, Words};
    let Some(mut soc) = soc(false) else { return };
    let mut seq = 0u8;
    let mut send = |soc: &mut VerilatedSoc, r: &Request<'_>, cut: usize| {
        seq += 1;
        let bytes = encode(seq, r);
        soc.write_all(&bytes[..bytes.len() - cut]).unwrap();
        seq
    };
    let words = |w: &[i16]| w.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
    let (a, b, other) = (words(&[1, 2, 3, 4]), words(&[5, 6, 7, 8]), words(&[9; 4]));
    let store = |id, bytes| {
        let mut batch = [0u8; 64];
        let n = Request::WriteTensor {
            id,
            rows: 2,
            cols: 2,
            offset: 0,
            words: Words::from_le_bytes(bytes),
        }
        .encode_batch_entry(&mut batch)
        .unwrap();
        batch[..n].to_vec()
    };
    let (store_a, store_b, store_other) = (store(1, &a), store(2, &b), store(1, &other));
    for entry in [&store_a, &store_b] {
        let s = send(&mut soc, &Request::Batch(entry), 0);
        assert_eq!(next_frame(&mut soc), (s, cmd::BATCH | RESPONSE, vec![]));
    }
    let product = |out| MatmulRequest {
        a: 1,
        b: 2,
        out,
        flags: 0,
        shift: 0,
        rounding: Rounding::Truncate,
        seed: 0,
    };
    let read = |id| Request::ReadTensor {
        id,
        offset: 0,
        count: 4,
    };
    let refused = |soc: &mut VerilatedSoc, cut_seq: u8| {
        let (s, c, p) = next_frame(soc);
        let e = RemoteError::parse(&p).unwrap();
        assert_eq!((s, c, e.code), (cut_seq, ERROR, Some(ErrorCode::BadCrc)));
        let (_, c, _) = next_frame(soc);
        assert_eq!(c, cmd::PING | RESPONSE, "the next request answered");
    };
    // The rewrite of tensor 1 cut short: refused, tensor 1 unchanged.
    let cut = send(&mut soc, &Request::Batch(&store_other), 4);
    send(&mut soc, &Request::Ping, 0);
    refused(&mut soc, cut);
    let s = send(&mut soc, &read(1), 0);
    assert_eq!(next_frame(&mut soc), (s, cmd::READ_TENSOR | RESPONSE, a));
    // A product into tensor 3 cut short: refused, tensor 3 never made.
    let cut = send(&mut soc, &Request::Matmul(product(3)), 3);
    send(&mut soc, &Request::Ping, 0);
    refused(&mut soc, cut);
    let s = send(&mut soc, &read(3), 0);
    let (rs, c, p) = next_frame(&mut soc);
    let code = RemoteError::parse(&p).unwrap().code;
    assert_eq!((rs, c, code), (s, ERROR, Some(ErrorCode::UnknownTensor)));
    // Whole, it runs: C = A·B = [[19, 22], [43, 50]] after the answer's header.
    let s = send(&mut soc, &Request::Matmul(product(3)), 0);
    let (rs, c, p) = next_frame(&mut soc);
    assert_eq!((rs, c), (s, cmd::MATMUL | RESPONSE));
    let header = systole_firmware::protocol::board_ops::OP_REPLY_HEADER;
    assert_eq!(p[header..], words(&[19, 22, 43, 50]));
}
