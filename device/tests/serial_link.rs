//! The serial backend over a real pseudo-terminal against the firmware's frame server, with a
//! software accelerator model behind it (the Verilated board is covered by the workspace's
//! device conformance test): results equal the golden model bit for bit, a dropped link gives
//! an error and no result, a wrong board is refused, and feature-map writes arrive whole and in
//! order.

use std::sync::{Arc, Mutex};
use systole_core::bus::Beat;
use systole_core::numeric::{convert, lane_seed, Lfsr32};
use systole_core::{regmap, AcceleratorBus, ArrayConfig, Rounding};
use systole_device::board_sim::SimBoard;
use systole_device::serial::{LinkError, SerialBus, SerialDevice};
use systole_device::{Device, DeviceError};
use systole_firmware::driver::DriverError;
use systole_golden::QMatrix;
use systole_golden::{self as golden, OutputSpec};

/// A write as it reached the model.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    Reg(u8, u32),
    /// Buffer (`'A'`/`'B'`), bank, row.
    Row(char, u8, u16),
    /// Feature-map address and word count.
    Fm(u32, usize),
}

/// What the model saw, shared with the test (the model itself lives on the board's thread).
#[derive(Default)]
struct Seen {
    /// The feature-map buffer (`fm_depth` words).
    fm: Vec<i16>,
    events: Vec<Event>,
}

/// A functional model of the accelerator: every command completes at once.
struct ModelBus {
    cfg: ArrayConfig,
    regs: [u32; 16],
    a: Vec<i16>,
    b: Vec<i16>,
    c: Vec<i16>,
    acc: Vec<i64>,
    seen: Arc<Mutex<Seen>>,
}

impl ModelBus {
    fn new(cfg: ArrayConfig) -> Self {
        Self::watched(cfg, Arc::default())
    }

    /// A model that records into `seen`.
    fn watched(cfg: ArrayConfig, seen: Arc<Mutex<Seen>>) -> Self {
        seen.lock().unwrap().fm = vec![0; cfg.fm_depth];
        let (n, d) = (cfg.size, cfg.buffer_depth);
        let mut regs = [0u32; 16];
        regs[usize::from(regmap::ID)] = regmap::ID_VALUE;
        regs[usize::from(regmap::CONFIG)] = cfg.config_word();
        ModelBus {
            cfg,
            regs,
            a: vec![0; 2 * d * n],
            b: vec![0; 2 * d * n],
            c: vec![0; 2 * n * n],
            acc: vec![0; n * n],
            seen,
        }
    }

    fn command(&mut self, w: u32) {
        let (n, d) = (self.cfg.size, self.cfg.buffer_depth);
        let bank = |bit: u32| usize::from(w & bit != 0);
        let (ab, bb, cb) = (
            bank(regmap::CMD_A_BANK),
            bank(regmap::CMD_B_BANK),
            bank(regmap::CMD_C_BANK),
        );
        if w & regmap::CMD_CLEAR != 0 {
            self.acc.fill(0);
        }
        for k in 0..self.regs[usize::from(regmap::K_LEN)] as usize {
            for r in 0..n {
                for c in 0..n {
                    let x = i64::from(self.a[(ab * d + k) * n + r]);
                    let y = i64::from(self.b[(bb * d + k) * n + c]);
                    self.acc[r * n + c] += x * y;
                }
            }
        }
        if w & regmap::CMD_EMIT != 0 {
            let shift = self.regs[usize::from(regmap::SHIFT)];
            let rounding = Rounding::from_code(self.regs[usize::from(regmap::ROUNDING)]).unwrap();
            let seed = self.regs[usize::from(regmap::SEED)];
            for c in 0..n {
                let mut lfsr = Lfsr32::new(lane_seed(seed, c as u32));
                for r in 0..n {
                    let u = lfsr.step();
                    self.c[(cb * n + r) * n + c] =
                        convert(self.acc[r * n + c], shift, rounding, u, 16) as i16;
                }
            }
            self.regs[usize::from(regmap::DONE_COUNT)] += 1;
        }
    }
}

impl AcceleratorBus for ModelBus {
    type Error = String;
    fn read_reg(&mut self, addr: u8) -> Result<u32, String> {
        Ok(self.regs.get(usize::from(addr)).copied().unwrap_or(0))
    }
    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), String> {
        self.seen
            .lock()
            .unwrap()
            .events
            .push(Event::Reg(addr, value));
        match addr {
            regmap::COMMAND => self.command(value),
            regmap::SHIFT | regmap::ROUNDING | regmap::SEED | regmap::K_LEN => {
                self.regs[usize::from(addr)] = value
            }
            _ => {}
        }
        Ok(())
    }
    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), String> {
        let (n, d) = (self.cfg.size, self.cfg.buffer_depth);
        let mut seen = self.seen.lock().unwrap();
        if let Some(w) = beat.a {
            let at = (usize::from(w.bank) * d + usize::from(w.row)) * n;
            self.a[at..at + n].copy_from_slice(w.data);
            seen.events.push(Event::Row('A', w.bank, w.row));
        }
        if let Some(w) = beat.b {
            let at = (usize::from(w.bank) * d + usize::from(w.row)) * n;
            self.b[at..at + n].copy_from_slice(w.data);
            seen.events.push(Event::Row('B', w.bank, w.row));
        }
        if let Some(r) = beat.c {
            let at = (usize::from(r.bank) * n + usize::from(r.row)) * n;
            c_out.copy_from_slice(&self.c[at..at + n]);
        }
        self.regs[usize::from(regmap::CYCLES)] += 1;
        Ok(())
    }
    fn idle(&mut self, cycles: u32) -> Result<(), String> {
        self.regs[usize::from(regmap::CYCLES)] += cycles;
        Ok(())
    }
    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), String> {
        let mut seen = self.seen.lock().unwrap();
        let at = addr as usize;
        let Some(dst) = seen.fm.get_mut(at..at + words.len()) else {
            // The board must have refused this request before it reached the bus.
            return Err(format!(
                "feature-map write {at}+{} out of range",
                words.len()
            ));
        };
        dst.copy_from_slice(words);
        seen.events.push(Event::Fm(addr, words.len()));
        self.regs[usize::from(regmap::CYCLES)] += words.len() as u32;
        Ok(())
    }
}

fn board(cfg: ArrayConfig, drop_after: Option<usize>) -> SimBoard {
    SimBoard::spawn(cfg, move || ModelBus::new(cfg), drop_after).unwrap()
}

fn matrix(rows: usize, cols: usize, frac: u32, salt: u32) -> QMatrix {
    let mut x = salt.wrapping_mul(0x9E37_79B9) | 1;
    let data = (0..rows * cols)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as i16
        })
        .collect();
    QMatrix::from_vec(rows, cols, frac, data).unwrap()
}

#[test]
fn serial_matmul_equals_golden_over_a_pty() {
    let cfg = ArrayConfig::new(4, 8, 16).unwrap();
    let b = board(cfg, None);
    let path = b.path().to_str().unwrap().to_string();
    let mut dev = SerialDevice::open(&path, cfg).unwrap();
    // K = 37 > depth 16: several chunks per tile; ragged edges exercise the padding.
    for (m, k, n, rounding) in [
        (5, 37, 7, Rounding::Stochastic),
        (9, 3, 4, Rounding::NearestEven),
        (1, 16, 1, Rounding::Truncate),
    ] {
        let x = matrix(m, k, 7, m as u32);
        let y = matrix(k, n, 6, k as u32);
        let spec = OutputSpec {
            frac: 5,
            rounding,
            seed: 1234,
        };
        let got = dev.matmul(&x, &y, &spec).unwrap();
        assert_eq!(
            got,
            golden::matmul(&x, &y, &spec, cfg.size).unwrap(),
            "{m}x{k}x{n}"
        );
    }
    let st = dev.stats();
    assert_eq!(st.ops, 3);
    assert!(st.bytes_to_device > 0 && st.bytes_from_device > 0);
    drop(dev);
    b.close().unwrap();
}

#[test]
fn link_drop_mid_operation_is_an_error_without_result() {
    let cfg = ArrayConfig::new(4, 8, 16).unwrap();
    // The PING exchange is 8 bytes; the link dies 300 bytes into the first product.
    let b = board(cfg, Some(308));
    let path = b.path().to_str().unwrap().to_string();
    let mut dev = SerialDevice::open(&path, cfg).unwrap();
    dev.set_retry_policy(std::time::Duration::from_millis(100), 2);
    let x = matrix(12, 40, 8, 1);
    let y = matrix(40, 12, 8, 2);
    let spec = OutputSpec {
        frac: 8,
        rounding: Rounding::NearestEven,
        seed: 0,
    };
    let r = dev.matmul(&x, &y, &spec);
    match r {
        Err(e @ DeviceError::Transport { .. }) => {
            assert_eq!(e.to_string(), format!("serial 4x4 at {path} failed"));
            // The typed cause is kept: the driver's bus error, and under it the link's.
            let driver = e.cause::<DriverError<LinkError>>();
            assert!(matches!(driver, Some(DriverError::Bus(_))), "{e:?}");
            let link = e.cause::<LinkError>();
            assert!(
                matches!(link, Some(LinkError::NoAnswer { .. } | LinkError::Gone(_))),
                "{e:?}"
            );
        }
        other => panic!("expected a device failure, got {other:?}"),
    }
    // Still an error (never a stale result) on the next operation.
    assert!(dev.matmul(&x, &y, &spec).is_err());
}

#[test]
fn wrong_board_size_is_refused() {
    let cfg = ArrayConfig::new(4, 8, 16).unwrap();
    let b = board(cfg, None);
    let path = b.path().to_str().unwrap().to_string();
    let asked = ArrayConfig::new(8, 8, 16).unwrap();
    match SerialDevice::open(&path, asked) {
        Err(DeviceError::WrongArray { source, .. }) => {
            assert_eq!((source.found.size, source.asked.size), (4, 8));
            assert!(source.to_string().contains("4x4"), "{source}");
        }
        other => panic!("expected a refusal, got {:?}", other.err()),
    }
}

/// Merges consecutive feature-map events that continue at the next address (the board may
/// split one request into several bus calls).
fn merge_fm(events: &[Event]) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for e in events {
        match (out.last_mut(), e) {
            (Some(Event::Fm(a, n)), Event::Fm(b, m)) if *a as usize + *n == *b as usize => *n += m,
            _ => out.push(e.clone()),
        }
    }
    out
}

#[test]
fn long_write_fm_arrives_in_order_around_other_writes() {
    let cfg = ArrayConfig::new(4, 8, 16).unwrap();
    assert!(cfg.fm_depth >= 3100);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let probe = seen.clone();
    let b = SimBoard::spawn(cfg, move || ModelBus::watched(cfg, probe), None).unwrap();
    let port = serialport::new(b.path().to_str().unwrap(), 3_000_000)
        .timeout(std::time::Duration::from_millis(20))
        .open()
        .unwrap();
    let mut bus = SerialBus::new(port, cfg.size);
    let words: Vec<i16> = (0..3000).map(|i: i32| (i * 7919 - 12345) as i16).collect();
    bus.write_a_row(1, 2, &[1, 2, 3, 4]).unwrap();
    bus.write_fm(100, &words).unwrap();
    bus.write_reg(regmap::SHIFT, 3).unwrap();
    // Whole 4-word rows (the 4x4 array's row width).
    bus.write_fm(48, &[0, 0, 1, 2]).unwrap();
    // Overwrites addresses 48..52: only correct if the two writes arrive in order.
    bus.write_fm(48, &[4, 5, 9, 3]).unwrap();
    bus.write_b_row(0, 5, &[5, 6, 7, 8]).unwrap();
    bus.flush().unwrap();
    {
        let seen = seen.lock().unwrap();
        assert_eq!(&seen.fm[100..3100], &words[..]);
        assert_eq!(&seen.fm[48..52], &[4, 5, 9, 3]);
        assert_eq!(
            merge_fm(&seen.events),
            [
                Event::Row('A', 1, 2),
                Event::Fm(100, 3000),
                Event::Reg(regmap::SHIFT, 3),
                Event::Fm(48, 4),
                Event::Fm(48, 4),
                Event::Row('B', 0, 5),
            ]
        );
    }
    // 6000 bytes of words cannot fit in fewer than 6 frames of at most 1024 payload bytes.
    let c = bus.counters();
    assert!(c.frames >= 6 && c.bytes_out > 6000, "{c:?}");

    // Past the end of the buffer: the board refuses the batch and nothing is written.
    bus.write_fm(cfg.fm_depth as u32 - 4, &[1, 2, 3, 4, 5, 6, 7, 8])
        .unwrap();
    match bus.flush() {
        Err(LinkError::Refused { what, .. }) => assert!(what.contains("out of range"), "{what}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(merge_fm(&seen.lock().unwrap().events).len(), 6);
    drop(bus);
    b.close().unwrap();
}

#[test]
fn missing_port_is_a_clear_error() {
    let r = systole_device::open("serial:/dev/does-not-exist-systole", ArrayConfig::square(4));
    let e = r.err().expect("opened a missing port");
    assert!(e.to_string().contains("/dev/does-not-exist-systole"), "{e}");
}

/// Prints link numbers (run with `--ignored --nocapture`): bytes the protocol moves for one
/// training step of the digits MLP (64-32-10, batch 32) on an 8x8 array, and pty throughput.
#[test]
#[ignore = "measurement; prints numbers"]
fn measure_digits_mlp_step_traffic() {
    let cfg = ArrayConfig::square(8);
    let b = board(cfg, None);
    let path = b.path().to_str().unwrap().to_string();
    let mut dev = SerialDevice::open(&path, cfg).unwrap();
    let spec = OutputSpec {
        frac: 8,
        rounding: Rounding::Stochastic,
        seed: 9,
    };
    // Forward X·W1, H·W2; backward Hᵀ·dY, dY·W2ᵀ, Xᵀ·dH.
    let shapes = [
        (32, 64, 32),
        (32, 32, 10),
        (32, 32, 10),
        (32, 10, 32),
        (64, 32, 32),
    ];
    let t0 = std::time::Instant::now();
    let before = dev.link_counters();
    let mut array_cycles = 0u64;
    for (i, &(m, k, n)) in shapes.iter().enumerate() {
        let x = matrix(m, k, 8, i as u32 + 1);
        let y = matrix(k, n, 8, i as u32 + 7);
        dev.matmul(&x, &y, &spec).unwrap();
        // Pure array time: every output tile streams its K rows.
        array_cycles += (m.div_ceil(8) * n.div_ceil(8) * k) as u64;
    }
    let dt = t0.elapsed().as_secs_f64();
    let c = dev.link_counters();
    let bytes = (c.bytes_out - before.bytes_out) + (c.bytes_in - before.bytes_in);
    let frames = c.frames - before.frames;
    println!(
        "digits MLP step on 8x8: {bytes} bytes in {frames} frames (out {}, in {})",
        c.bytes_out - before.bytes_out,
        c.bytes_in - before.bytes_in
    );
    println!(
        "at 3 Mbaud 8N1 (300000 B/s): {:.2} ms transfer",
        bytes as f64 / 300.0
    );
    println!(
        "array K-step cycles {array_cycles}: {:.3} ms at 100 MHz",
        array_cycles as f64 / 1e5
    );
    println!(
        "pty: {:.0} bytes/s, {:.0} frames/s (software model board)",
        bytes as f64 / dt,
        frames as f64 / dt
    );
    // Bulk throughput: one large product.
    let x = matrix(64, 512, 8, 3);
    let y = matrix(512, 64, 8, 4);
    let before = dev.link_counters();
    let t0 = std::time::Instant::now();
    dev.matmul(&x, &y, &spec).unwrap();
    let dt = t0.elapsed().as_secs_f64();
    let c = dev.link_counters();
    let bytes = (c.bytes_out - before.bytes_out) + (c.bytes_in - before.bytes_in);
    println!(
        "bulk 64x512x64: {bytes} bytes, {} frames, {:.0} bytes/s over the pty",
        c.frames - before.frames,
        bytes as f64 / dt
    );
}

/// A port on a board whose firmware panics: the first request is answered by `report`,
/// after that the line is silent.
struct PanickingBoard {
    report: Vec<u8>,
    asked: bool,
}

impl std::io::Read for PanickingBoard {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.asked || self.report.is_empty() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        let n = buf.len().min(self.report.len());
        buf[..n].copy_from_slice(&self.report[..n]);
        self.report.drain(..n);
        Ok(n)
    }
}

impl std::io::Write for PanickingBoard {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.asked = true;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_firmware_panic_report_is_a_clear_error_and_no_result() {
    use std::fmt::Write as _;
    use systole_firmware::protocol::panic::{PanicMessage, PANIC_FRAME_CAPACITY};
    let mut message = PanicMessage::new();
    write!(message, "index out of bounds at src/board.rs:7").unwrap();
    let mut frame = [0u8; PANIC_FRAME_CAPACITY];
    let n = message.encode(&mut frame);
    let port = PanickingBoard {
        report: frame[..n].to_vec(),
        asked: false,
    };
    let mut bus = SerialBus::new(port, 4);
    bus.set_retry_policy(std::time::Duration::from_millis(20), 1);
    match bus.read_reg(regmap::STATUS) {
        Err(e @ LinkError::BoardPanicked(_)) => {
            let text = e.to_string();
            assert!(text.contains("panicked"), "{text}");
            assert!(
                text.contains("index out of bounds at src/board.rs:7"),
                "{text}"
            );
        }
        other => panic!("expected the panic report, got {other:?}"),
    }
}
