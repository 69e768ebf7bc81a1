//! FrameServer tests with literal request and response bytes (computed with an independent script),
//! plus damaged input: the board must answer with an error frame and keep serving.

extern crate std;
use super::*;
use std::vec::Vec;

/// A recording accelerator double: registers hold `0x100 + addr` until written, C row `r` of
/// bank `b` holds `100 b + 10 r + lane`.
#[derive(Default)]
struct MockBus {
    regs: [u32; 16],
    /// Writes in the order they reached the bus: (kind `R`/`A`/`B`/`F`, register, bank or
    /// feature-map address, row, words).
    log: Vec<(char, u32, u16, Vec<i16>)>,
    idle: u64,
    fail: bool,
}

impl MockBus {
    fn new(config: &ArrayConfig) -> Self {
        let mut regs = [0u32; 16];
        for (i, r) in regs.iter_mut().enumerate() {
            *r = 0x100 + i as u32;
        }
        regs[usize::from(regmap::ID)] = regmap::ID_VALUE;
        regs[usize::from(regmap::CONFIG)] = config.config_word();
        regs[usize::from(regmap::STATUS)] = 0;
        MockBus {
            regs,
            ..Default::default()
        }
    }
}

impl AcceleratorBus for MockBus {
    type Error = ();
    fn read_reg(&mut self, addr: u8) -> Result<u32, ()> {
        if self.fail {
            return Err(());
        }
        Ok(self.regs.get(usize::from(addr)).copied().unwrap_or(0))
    }
    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), ()> {
        if self.fail {
            return Err(());
        }
        self.log
            .push(('R', u32::from(addr), 0, Vec::from([value as i16])));
        if let Some(r) = self.regs.get_mut(usize::from(addr)) {
            *r = value;
        }
        Ok(())
    }
    fn beat(&mut self, beat: &systole_core::bus::Beat<'_>, c_out: &mut [i16]) -> Result<(), ()> {
        if self.fail {
            return Err(());
        }
        if let Some(a) = beat.a {
            self.log
                .push(('A', u32::from(a.bank), a.row, Vec::from(a.data)));
        }
        if let Some(b) = beat.b {
            self.log
                .push(('B', u32::from(b.bank), b.row, Vec::from(b.data)));
        }
        if let Some(c) = beat.c {
            for (lane, w) in c_out.iter_mut().enumerate() {
                *w = (100 * u16::from(c.bank) + 10 * c.row + lane as u16) as i16;
            }
        }
        Ok(())
    }
    fn idle(&mut self, cycles: u32) -> Result<(), ()> {
        self.idle += u64::from(cycles);
        Ok(())
    }
    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), ()> {
        if self.fail {
            return Err(());
        }
        self.log.push(('F', addr, 0, Vec::from(words)));
        Ok(())
    }
}

/// An in-memory link: reads come from `input` in chunks of `chunk` bytes, then 0 (closed).
struct Pipe {
    input: Vec<u8>,
    pos: usize,
    chunk: usize,
    output: Vec<u8>,
}

impl embedded_io::ErrorType for Pipe {
    type Error = core::convert::Infallible;
}
impl Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        let n = buf.len().min(self.chunk).min(self.input.len() - self.pos);
        buf[..n].copy_from_slice(&self.input[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// A 2x2 array with 16-row banks and a 4096-word feature map (set here, not taken from the
/// default, because the literal frames below depend on it).
fn config() -> ArrayConfig {
    ArrayConfig {
        fm_depth: 4096,
        ..ArrayConfig::new(2, 8, 16).unwrap()
    }
}

/// Runs a board over `input` until the stream closes; returns what it sent and the bus.
fn run(input: &[u8], chunk: usize) -> (Vec<u8>, MockBus, LinkStats) {
    run_with(config(), input, chunk)
}

/// [`run`] on a board of configuration `cfg`.
fn run_with(cfg: ArrayConfig, input: &[u8], chunk: usize) -> (Vec<u8>, MockBus, LinkStats) {
    let pipe = Pipe {
        input: Vec::from(input),
        pos: 0,
        chunk,
        output: Vec::new(),
    };
    let mut board = FrameServer::new(pipe, MockBus::new(&cfg), cfg);
    assert_eq!(board.serve(), ServerError::Closed);
    let stats = board.stats();
    let (pipe, bus) = board.into_parts();
    (pipe.output, bus, stats)
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

const PING: &[u8] = &[0xA5, 0x5A, 0x00, 0x00, 0x01, 0x01, 0xD0, 0xA7];
const PING_OK: &[u8] = &[
    0xA5, 0x5A, 0x0B, 0x00, 0x01, 0x81, 0x54, 0x53, 0x59, 0x53, 0x02, 0x10, 0x30, 0x84, 0x01, 0x00,
    0x04, 0xE6, 0xAA,
];
const WRITE_REG: &[u8] = &[
    0xA5, 0x5A, 0x05, 0x00, 0x03, 0x03, 0x0A, 0x78, 0x56, 0x34, 0x12, 0x88, 0xEF,
];
const WRITE_REG_OK: &[u8] = &[0xA5, 0x5A, 0x00, 0x00, 0x03, 0x83, 0x78, 0x70];

#[test]
fn ping_literal() {
    let (out, _, _) = run(PING, 64);
    assert_eq!(out, PING_OK);
}

#[test]
fn read_reg_literal() {
    let req = [0xA5, 0x5A, 0x01, 0x00, 0x02, 0x02, 0x08, 0x57, 0x32];
    let (out, _, _) = run(&req, 64);
    let ok = [
        0xA5, 0x5A, 0x04, 0x00, 0x02, 0x82, 0x08, 0x01, 0x00, 0x00, 0xB3, 0x61,
    ];
    assert_eq!(out, ok);
}

#[test]
fn write_reg_literal() {
    let (out, bus, _) = run(WRITE_REG, 64);
    assert_eq!(out, WRITE_REG_OK);
    assert_eq!(bus.regs[0x0A], 0x1234_5678);
}

#[test]
fn write_rows_literal() {
    let req = [
        0xA5, 0x5A, 0x0E, 0x00, 0x04, 0x04, 0x00, 0x01, 0x03, 0x00, 0x02, 0x00, 0x01, 0x00, 0xFE,
        0xFF, 0x03, 0x00, 0xFC, 0xFF, 0xD5, 0xEE,
    ];
    let (out, bus, _) = run(&req, 5);
    assert_eq!(out, [0xA5, 0x5A, 0x00, 0x00, 0x04, 0x84, 0x08, 0x99]);
    assert_eq!(
        bus.log,
        [
            ('A', 1, 3, Vec::from([1, -2])),
            ('A', 1, 4, Vec::from([3, -4]))
        ]
    );
}

#[test]
fn read_rows_literal() {
    let req = [
        0xA5, 0x5A, 0x05, 0x00, 0x05, 0x05, 0x01, 0x00, 0x00, 0x02, 0x00, 0x2B, 0x99,
    ];
    let (out, _, _) = run(&req, 64);
    let ok = [
        0xA5, 0x5A, 0x08, 0x00, 0x05, 0x85, 0x64, 0x00, 0x65, 0x00, 0x6E, 0x00, 0x6F, 0x00, 0x0F,
        0xEB,
    ];
    assert_eq!(out, ok);
}

#[test]
fn status_literal() {
    let req = [0xA5, 0x5A, 0x00, 0x00, 0x06, 0x06, 0xA0, 0x4E];
    let (out, _, _) = run(&req, 64);
    let mut ok = Vec::from([0xA5, 0x5A, 0x10, 0x00, 0x06, 0x86]);
    ok.extend_from_slice(&[0; 16]);
    ok.extend_from_slice(&[0x4B, 0x0F]);
    assert_eq!(out, ok);
}

#[test]
fn idle_literal() {
    let req = [
        0xA5, 0x5A, 0x04, 0x00, 0x07, 0x07, 0xE8, 0x03, 0x00, 0x00, 0xBF, 0xC9,
    ];
    let (out, bus, _) = run(&req, 64);
    assert_eq!(out, [0xA5, 0x5A, 0x00, 0x00, 0x07, 0x87, 0x38, 0xFC]);
    assert_eq!(bus.idle, 1000);
}

#[test]
fn batch_literal_runs_entries_in_order() {
    let req = [
        0xA5, 0x5A, 0x1C, 0x00, 0x08, 0x08, 0x03, 0x05, 0x00, 0x0B, 0x10, 0x00, 0x00, 0x00, 0x04,
        0x0A, 0x00, 0x01, 0x00, 0x0F, 0x00, 0x01, 0x00, 0x00, 0x80, 0xFF, 0x7F, 0x07, 0x04, 0x00,
        0x03, 0x00, 0x00, 0x00, 0x82, 0xDE,
    ];
    let (out, bus, _) = run(&req, 7);
    assert_eq!(out, [0xA5, 0x5A, 0x00, 0x00, 0x08, 0x88, 0xE9, 0x1D]);
    assert_eq!(
        bus.log,
        [
            ('R', 0x0B, 0, Vec::from([16])),
            ('B', 0, 15, Vec::from([-32768, 32767])),
        ]
    );
    assert_eq!(bus.idle, 3);
}

/// Each refused request gets its typed error frame and changes nothing on the bus.
#[test]
fn refused_requests_literal() {
    let cases: [(&[u8], &[u8]); 5] = [
        // Unknown command 0x42.
        (
            &[0xA5, 0x5A, 0x00, 0x00, 0x09, 0x42, 0xDE, 0x56],
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x09, 0xFF, 0x03, 0x42, 0x00, 0x00, 0x0F, 0xC4,
            ],
        ),
        // READ_REG with two payload bytes: malformed.
        (
            &[0xA5, 0x5A, 0x02, 0x00, 0x0A, 0x02, 0x08, 0x00, 0x32, 0x0A],
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x0A, 0xFF, 0x04, 0x02, 0x00, 0x00, 0x6F, 0x46,
            ],
        ),
        // Rows 15..17 of a 16-row bank: out of range.
        (
            &[
                0xA5, 0x5A, 0x0E, 0x00, 0x0B, 0x04, 0x00, 0x00, 0x0F, 0x00, 0x02, 0x00, 0x01, 0x00,
                0x02, 0x00, 0x03, 0x00, 0x04, 0x00, 0xB8, 0x80,
            ],
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x0B, 0xFF, 0x05, 0x04, 0x00, 0x00, 0xDB, 0xC7,
            ],
        ),
        // One row of four words on a 2x2 array: wrong row length.
        (
            &[
                0xA5, 0x5A, 0x0E, 0x00, 0x0C, 0x04, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00,
                0x02, 0x00, 0x03, 0x00, 0x04, 0x00, 0x0B, 0x4A,
            ],
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x0C, 0xFF, 0x06, 0x04, 0x00, 0x00, 0x46, 0x94,
            ],
        ),
        // A batch whose entry 1 is a PING: refused as a whole (the IDLE before it never runs).
        (
            &[
                0xA5, 0x5A, 0x0A, 0x00, 0x0D, 0x08, 0x07, 0x04, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01,
                0x00, 0x00, 0xE3, 0x6C,
            ],
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x0D, 0xFF, 0x08, 0x08, 0x01, 0x00, 0xEC, 0x35,
            ],
        ),
    ];
    for (req, resp) in cases {
        let (out, bus, stats) = run(&cat(&[req, PING]), 64);
        assert_eq!(out, cat(&[resp, PING_OK]), "request {req:02X?}");
        assert!(bus.log.is_empty() && bus.idle == 0);
        assert_eq!((stats.frames_ok, stats.frames_rejected), (1, 1));
    }
}

#[test]
fn bad_crc_gets_error_frame_then_board_serves() {
    let mut bad = Vec::from(WRITE_REG);
    bad[4] = 0x21; // sequence byte changed, CRC not updated
    let (out, bus, _) = run(&cat(&[&bad, PING]), 3);
    let err = [
        0xA5, 0x5A, 0x04, 0x00, 0x21, 0xFF, 0x01, 0x03, 0x00, 0x00, 0xB0, 0x3B,
    ];
    assert_eq!(out, cat(&[&err, PING_OK]));
    assert!(bus.log.is_empty());
}

#[test]
fn oversized_gets_error_frame_then_board_serves() {
    let huge = [0xA5, 0x5A, 0xFF, 0xFF, 0x22, 0x01];
    let (out, _, _) = run(&cat(&[&huge, PING]), 64);
    let err = [
        0xA5, 0x5A, 0x04, 0x00, 0x22, 0xFF, 0x02, 0x01, 0x00, 0x00, 0xEC, 0x00,
    ];
    assert_eq!(out, cat(&[&err, PING_OK]));
}

#[test]
fn replayed_frame_is_answered_without_running_twice() {
    let (out, bus, stats) = run(&cat(&[WRITE_REG, WRITE_REG, WRITE_REG]), 64);
    assert_eq!(out, cat(&[WRITE_REG_OK, WRITE_REG_OK, WRITE_REG_OK]));
    assert_eq!(bus.log.len(), 1, "the register write ran more than once");
    assert_eq!((stats.frames_ok, stats.replays), (1, 2));
}

#[test]
fn garbage_between_frames_is_skipped() {
    let junk = [0x00, 0xA5, 0x13, 0xFF, 0x5A, 0xA5];
    let (out, _, stats) = run(&cat(&[&junk, PING, &junk, WRITE_REG]), 1);
    assert_eq!(out, cat(&[PING_OK, WRITE_REG_OK]));
    assert_eq!(stats.garbage_bytes, 12);
}

#[test]
fn truncated_frame_then_retries_recover() {
    // Half a WRITE_REG, then the host times out and sends PING twice: the first PING completes
    // the bogus frame (bad CRC), resync finds both PINGs.
    let (out, bus, _) = run(&cat(&[&WRITE_REG[..7], PING, PING]), 64);
    let err = [0xA5, 0x5A, 0x04, 0x00, 0x03, 0xFF, 0x01, 0x03, 0x00, 0x00];
    assert_eq!(&out[..10], err);
    assert_eq!(&out[12..], cat(&[PING_OK, PING_OK]));
    assert!(bus.log.is_empty());
}

#[test]
fn bus_fault_is_reported() {
    let pipe = Pipe {
        input: Vec::from(WRITE_REG),
        pos: 0,
        chunk: 64,
        output: Vec::new(),
    };
    let mut bus = MockBus::new(&config());
    bus.fail = true;
    let mut board = FrameServer::new(pipe, bus, config());
    assert_eq!(board.serve(), ServerError::Closed);
    let (pipe, _) = board.into_parts();
    let code = RemoteError::parse(&pipe.output[HEADER..HEADER + 4]).unwrap();
    assert_eq!((code.code, code.cmd), (Some(ErrorCode::Bus), 0x03));
}

/// Bytes of a frame lost in the receiver: the board drops what it has of that frame, answers
/// its `SEQ` with `BytesLost` (a transient code: the host resends at once), runs nothing of it,
/// and serves the resent frame.
#[test]
fn lost_bytes_are_answered_with_a_resend_request() {
    let cfg = config();
    let pipe = Pipe {
        input: Vec::from(&WRITE_REG[..9]),
        pos: 0,
        chunk: 64,
        output: Vec::new(),
    };
    let mut board = FrameServer::new(pipe, MockBus::new(&cfg), cfg);
    assert_eq!(board.step(), Ok(()));
    board.bytes_lost().unwrap();
    // The rest of the damaged frame, then the whole frame again.
    board.io.input.extend_from_slice(&WRITE_REG[9..]);
    board.io.input.extend_from_slice(WRITE_REG);
    assert_eq!(board.serve(), ServerError::Closed);
    let (pipe, bus) = board.into_parts();
    let mut lost = [0u8; frame::OVERHEAD + 4];
    let p = RemoteError::payload(ErrorCode::BytesLost, crate::protocol::cmd::WRITE_REG, 0);
    let n = frame::encode(WRITE_REG[4], ERROR, &p, &mut lost).unwrap();
    assert_eq!(pipe.output, cat(&[&lost[..n], WRITE_REG_OK]));
    assert!(ErrorCode::BytesLost.is_transient());
    // Written once, by the resent frame.
    assert_eq!(bus.log.len(), 1);
}

/// Nothing of a frame arrived yet (no header): no answer, as there is no `SEQ` to give.
#[test]
fn lost_bytes_before_a_header_are_not_answered() {
    let cfg = config();
    let pipe = Pipe {
        input: Vec::from(&WRITE_REG[..3]),
        pos: 0,
        chunk: 64,
        output: Vec::new(),
    };
    let mut board = FrameServer::new(pipe, MockBus::new(&cfg), cfg);
    assert_eq!(board.step(), Ok(()));
    board.bytes_lost().unwrap();
    assert!(board.io.output.is_empty());
}

/// A fake cycle counter for [`counters_report_the_cycles_requests_cost`]: each read advances it
/// by 7 cycles (only that test uses it).
static FAKE_CLOCK: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

fn fake_clock() -> u64 {
    FAKE_CLOCK.fetch_add(7, core::sync::atomic::Ordering::Relaxed)
}

/// `COUNTERS` answers the executed requests and the cycles they cost, measured by the board's
/// clock around each request (two reads of the fake clock: 7 cycles each); without a clock it
/// says so with a 0 flag.
#[test]
fn counters_report_the_cycles_requests_cost() {
    let mut counters = [0u8; 16];
    let n = frame::encode(4, crate::protocol::cmd::COUNTERS, &[], &mut counters).unwrap();
    let input = cat(&[PING, WRITE_REG, &counters[..n]]);
    let cfg = config();
    let pipe = Pipe {
        input,
        pos: 0,
        chunk: 64,
        output: Vec::new(),
    };
    let mut board = FrameServer::new(pipe, MockBus::new(&cfg), cfg).with_clock(fake_clock);
    assert_eq!(board.serve(), ServerError::Closed);
    let stats = board.stats();
    let (pipe, _) = board.into_parts();
    let mut d = Decoder::new();
    d.push(&pipe.output);
    let mut replies = Vec::new();
    while let Some(Ok(f)) = d.next_frame() {
        replies.push((f.cmd, Vec::from(f.payload)));
    }
    assert_eq!(replies.len(), 3);
    let (cmd, p) = &replies[2];
    assert_eq!(*cmd, crate::protocol::cmd::COUNTERS | RESPONSE);
    // PING and WRITE_REG ran before: 2 frames, 7 cycles each.
    let mut want = [0u8; COUNTERS_REPLY];
    want[0] = 1;
    want[1..5].copy_from_slice(&2u32.to_le_bytes());
    want[5..13].copy_from_slice(&14u64.to_le_bytes());
    assert_eq!(p.as_slice(), want);
    // COUNTERS itself is not counted.
    assert_eq!(stats.busy_cycles, Some(14));

    let (out, _, stats) = run(&counters[..n], 64);
    let mut d = Decoder::new();
    d.push(&out);
    let f = d.next_frame().unwrap().unwrap();
    assert_eq!(f.payload, &[0u8; COUNTERS_REPLY]);
    assert_eq!(stats.busy_cycles, None);
}

mod board_ops;
mod train;
mod word_width;
mod write_fm;

fn fake_stack() -> StackUse {
    StackUse {
        reserve: 8192,
        used: 1500,
    }
}

type ProbeBoard = FrameServer<Pipe, MockBus>;

/// The answers of a board set up by `setup` to a read-only request `cmd` without a payload,
/// the same with one byte of payload, and a `PING`.
fn probe_answers(cmd: u8, setup: impl Fn(ProbeBoard) -> ProbeBoard) -> Vec<(u8, u8, Vec<u8>)> {
    let frame_of = |seq: u8, payload: &[u8]| {
        let mut buf = [0u8; 16];
        let n = frame::encode(seq, cmd, payload, &mut buf).unwrap();
        Vec::from(&buf[..n])
    };
    let input = cat(&[&frame_of(1, &[]), &frame_of(2, &[0]), PING]);
    let cfg = config();
    {
        let pipe = Pipe {
            input,
            pos: 0,
            chunk: 64,
            output: Vec::new(),
        };
        let mut board = setup(FrameServer::new(pipe, MockBus::new(&cfg), cfg));
        assert_eq!(board.serve(), ServerError::Closed);
        let (pipe, _) = board.into_parts();
        let mut d = Decoder::new();
        d.push(&pipe.output);
        let mut replies = Vec::new();
        while let Some(Ok(f)) = d.next_frame() {
            replies.push((f.seq, f.cmd, Vec::from(f.payload)));
        }
        replies
    }
}

/// `STACK_USE` is answered from the board's probe, with a payload refused as malformed, and
/// refused as unknown by a board without a probe; the board serves on after each.
#[test]
fn stack_use_is_answered_from_the_probe_and_refused_without_one() {
    let refusal = |code: ErrorCode| Vec::from(RemoteError::payload(code, STACK_USE, 0));
    let with = probe_answers(STACK_USE, |b| b.with_stack_use(fake_stack));
    assert_eq!(
        with[0],
        (1, STACK_USE | RESPONSE, Vec::from(fake_stack().encode()))
    );
    assert_eq!(with[1], (2, ERROR, refusal(ErrorCode::Malformed)));
    assert_eq!(with[2].1, crate::protocol::cmd::PING | RESPONSE);
    let without = probe_answers(STACK_USE, |b| b);
    assert_eq!(without[0], (1, ERROR, refusal(ErrorCode::UnknownCommand)));
    assert_eq!(without[2].1, crate::protocol::cmd::PING | RESPONSE);
}

/// `STEP_PROFILE` likewise, from its own probe (not `STACK_USE`'s).
#[test]
fn step_profile_is_answered_from_its_probe_and_refused_without_one() {
    fn profile(out: &mut [u8]) -> usize {
        out[..3].copy_from_slice(&[7, 8, 9]);
        3
    }
    let refusal = |code: ErrorCode| Vec::from(RemoteError::payload(code, STEP_PROFILE, 0));
    let with = probe_answers(STEP_PROFILE, |b| b.with_step_profile(profile));
    assert_eq!(with[0], (1, STEP_PROFILE | RESPONSE, Vec::from([7, 8, 9])));
    assert_eq!(with[1], (2, ERROR, refusal(ErrorCode::Malformed)));
    assert_eq!(with[2].1, crate::protocol::cmd::PING | RESPONSE);
    let only_stack = probe_answers(STEP_PROFILE, |b| b.with_stack_use(fake_stack));
    assert_eq!(
        only_stack[0],
        (1, ERROR, refusal(ErrorCode::UnknownCommand))
    );
    assert_eq!(only_stack[2].1, crate::protocol::cmd::PING | RESPONSE);
}
