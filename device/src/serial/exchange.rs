//! One request and its answer, and how long the host waits for it.
//!
//! **Waits.** Every try waits for the request's and the longest answer's bytes' time on the
//! line at the link's baud rate, plus the frame timeout ([`super::DEFAULT_TIMEOUT`]) for the
//! board's turnaround. A request that makes the board work longer waits for that work too:
//!
//! * `RUN_STEPS` on a board that reports progress (`protocol::train::CAP_PROGRESS`): the board
//!   sends a `WORKING` frame when it accepts the request and one after each step. Until the
//!   first one comes the host waits only the frame's wait (no acknowledgement then means the
//!   request was lost: it is resent); after it, [`SLACK`] times the slowest step measured so
//!   far on this link (or [`super::train::STEP_TIMEOUT`] before any was measured) between two
//!   reports. When a board that acknowledged the request goes quiet for that long the request
//!   is resent (a board that finished answers from its copy at once, as when only its answer
//!   was lost); when no try is answered, the board stopped: [`LinkError::Stalled`].
//! * `EVALUATE` (and `RUN_STEPS` on a board without progress reports) wait [`SLACK`] times the
//!   slowest pace measured so far on this link for that work (per step, per evaluation), or
//!   their fixed bound before the first measurement.
//! * `MATMUL` and `CONV` wait [`SLACK`] times the slowest pace per multiply-accumulate
//!   measured so far on this link for their multiply-accumulates (plus a fixed share for the
//!   request's own cost, `board_ops::OP_FIXED_MACS`), at most their fixed bound
//!   (`board_ops::OP_TIMEOUT`). Before the first measurement the tries share what their work
//!   takes at a conservative pace, at least a floor (`board_ops::first_wait`). So a board that
//!   stops during a product is found in a few times the product's own time, or within seconds
//!   on the first.
//! * Uploads wait a frame's round trip for each chunk but the last, which the board decodes
//!   and checks whole (the fixed bound); a state read the same for each chunk but the first,
//!   for which the board encodes the state.
//!
//! **Known losses.** A resend goes out as soon as the frame is known lost instead of when its
//! wait ends: the board's CRC error (it saw the request damaged), an answer that fails its CRC,
//! or bytes that form no frame followed by a quiet line for the frame timeout (an answer whose
//! sync bytes were hit). A start announcement fails the operation at once
//! ([`LinkError::BoardRestarted`]).
//!
//! **What is said.** When the tries run out the error says what the host saw: the board
//! reporting the requests damaged ([`LinkError::Damaged`]), its answers arriving damaged
//! ([`LinkError::AnswersDamaged`]), or silence ([`LinkError::NoAnswer`]).

use super::{LinkError, SerialBus};
use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};
use systole_firmware::frame::{self, FRAME_CAPACITY};
use systole_firmware::protocol::train::WORKING;
use systole_firmware::protocol::{
    boot, panic, DriverFailure, ErrorCode, RemoteError, ERROR, RESPONSE,
};

/// How many times its measured pace a long request may take before the host gives up on it.
pub const SLACK: u32 = 4;

/// Kinds of long work whose pace is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One training step (`RUN_STEPS`).
    Step = 0,
    /// One evaluation of the test split (`EVALUATE`).
    Evaluate = 1,
    /// One multiply-accumulate of a board operation (`MATMUL`, `CONV`).
    Mac = 2,
}

/// What a request asks of the board beyond a frame's round trip.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Work {
    /// A frame's round trip, plus `extra` of board time (a fixed bound, not measured).
    Frame { extra: Duration },
    /// `units` of `kind`, bounded by `unmeasured` until the pace of `kind` was measured (and
    /// after, with `capped`, never longer).
    Paced {
        kind: Kind,
        units: u32,
        unmeasured: Duration,
        capped: bool,
    },
    /// `RUN_STEPS` of `steps` steps on a board that reports progress.
    Reported { steps: u16 },
}

impl Work {
    /// A frame's round trip.
    pub(crate) const FRAME: Work = Work::Frame {
        extra: Duration::ZERO,
    };
}

/// The slowest pace measured so far of each [`Kind`] on this link.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pace {
    slowest: [Option<Duration>; 3],
}

impl Pace {
    fn note(&mut self, kind: Kind, per_unit: Duration) {
        let s = &mut self.slowest[kind as usize];
        *s = Some(s.map_or(per_unit, |p| p.max(per_unit)));
    }

    /// The slowest pace of `kind` measured so far, if any.
    pub fn slowest(&self, kind: Kind) -> Option<Duration> {
        self.slowest[kind as usize]
    }
}

/// What one try heard.
enum Heard {
    Answer(u8, Vec<u8>),
    /// Nothing usable before the wait ended; `damaged` when damaged bytes or frames came.
    Nothing {
        damaged: Option<&'static str>,
    },
    /// The board reported `done` steps of a long request, then nothing for `quiet`.
    Stalled {
        done: u16,
        quiet: Duration,
    },
}

impl<T: Read + Write> SerialBus<T> {
    /// Time `bytes` take on the line (10 bit times a byte).
    pub(crate) fn line_time(&self, bytes: usize) -> Duration {
        Duration::from_secs_f64(bytes as f64 * 10.0 / f64::from(self.baud))
    }

    /// Sends one request (retrying with the same sequence number) and returns the payload of
    /// its successful answer, waiting a frame's round trip.
    pub(crate) fn transact(&mut self, command: u8, payload: &[u8]) -> Result<Vec<u8>, LinkError> {
        self.transact_for(command, payload, Work::FRAME)
    }

    /// [`Self::transact`] of a request that makes the board do `work`.
    pub(crate) fn transact_for(
        &mut self,
        command: u8,
        payload: &[u8],
        work: Work,
    ) -> Result<Vec<u8>, LinkError> {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let mut buf = [0u8; FRAME_CAPACITY];
        let len = frame::encode(seq, command, payload, &mut buf).map_err(LinkError::Encode)?;
        self.counters.frames += 1;
        // Tries the board answered as damaged in transit, and its last reason; tries whose
        // answers came damaged, and how.
        let (mut damaged, mut damage) = (0u32, None);
        let (mut garbled, mut garble) = (0u32, None);
        let mut waited = Duration::ZERO;
        // The last progress report of a long request that then went quiet.
        let mut stall = None;
        for attempt in 0..=self.retries {
            if attempt > 0 {
                self.counters.resends += 1;
            }
            self.port
                .write_all(&buf[..len])
                .and_then(|()| self.port.flush())
                .map_err(|e| LinkError::Gone(e.into()))?;
            self.counters.bytes_out += len as u64;
            let sent = Instant::now();
            let round_trip = self.timeout + self.line_time(len + FRAME_CAPACITY);
            let wait = match work {
                Work::Frame { extra } => round_trip + extra,
                Work::Paced {
                    kind,
                    units,
                    unmeasured,
                    capped,
                } => {
                    let paced = self.pace.slowest(kind).map(|p| p * SLACK * units);
                    round_trip
                        + match (paced, capped) {
                            (Some(p), true) => p.min(unmeasured),
                            (Some(p), false) => p,
                            (None, _) => unmeasured,
                        }
                }
                Work::Reported { .. } => round_trip,
            };
            waited = wait;
            let heard = self.await_answer(seq, wait)?;
            match heard {
                Heard::Answer(c, p) if c == ERROR => {
                    let e = RemoteError::parse(&p)
                        .ok_or_else(|| LinkError::Protocol("short error frame".into()))?;
                    if let Some(code) = e.code.filter(|c| ErrorCode::is_transient(*c)) {
                        damaged += 1;
                        damage = Some(code.to_string());
                        continue;
                    }
                    return Err(refusal(e));
                }
                Heard::Answer(c, p) if c == command | RESPONSE => {
                    if attempt == 0 {
                        if let Work::Paced { kind, units, .. } = work {
                            // The bytes' time on the line is waited for apart from the work.
                            let line = self.line_time(len + p.len() + frame::OVERHEAD);
                            let busy = sent.elapsed().saturating_sub(line);
                            self.pace.note(kind, busy / units.max(1));
                        }
                    }
                    return Ok(p);
                }
                Heard::Answer(c, _) => {
                    return Err(LinkError::Protocol(format!(
                        "answer code {c:#04x} to command {command:#04x}"
                    )))
                }
                Heard::Nothing { damaged: Some(how) } => {
                    garbled += 1;
                    garble = Some(how);
                }
                Heard::Nothing { damaged: None } => {}
                // Resent: a board that finished answers from its copy at once; one that
                // stopped does not acknowledge it either.
                Heard::Stalled { done, quiet } => stall = Some((done, quiet)),
            }
        }
        let tries = self.retries + 1;
        if let (Some((done, quiet)), Work::Reported { steps }) = (stall, work) {
            return Err(LinkError::Stalled {
                cmd: command,
                done,
                steps,
                quiet_ms: quiet.as_millis(),
                step_ms: self.pace.slowest(Kind::Step).map(|d| d.as_millis()),
            });
        }
        // The board heard the request but never whole, or answered but never whole: say so,
        // not that it stayed silent.
        if let Some(what) = damage {
            return Err(LinkError::Damaged {
                tries,
                damaged,
                what,
            });
        }
        if let Some(how) = garble {
            return Err(LinkError::AnswersDamaged {
                tries,
                damaged: garbled,
                what: how.into(),
            });
        }
        Err(LinkError::NoAnswer {
            tries,
            timeout_ms: waited.as_millis(),
        })
    }

    /// Waits for the answer with sequence `seq` for `wait` (or, once the board reports progress,
    /// between its reports). Answers with other sequence numbers are late copies and are
    /// skipped.
    fn await_answer(&mut self, seq: u8, wait: Duration) -> Result<Heard, LinkError> {
        let start = Instant::now();
        let mut deadline = start + wait;
        // Progress so far: steps reported done and when the last report came.
        let mut reported: Option<(u16, Instant)> = None;
        let mut damaged: Option<&'static str> = None;
        let garbage0 = self.decoder.garbage_bytes();
        let mut last_bytes = start;
        loop {
            while let Some(r) = self.decoder.next_frame() {
                match r {
                    Ok(f) => {
                        // Unsolicited, so recognised whatever `seq` it carries.
                        if let Some(m) = panic::parse_panic(f.cmd, f.payload) {
                            let m = String::from_utf8_lossy(m).into_owned();
                            // It restarts next and announces that.
                            self.start_expected = true;
                            self.forget_board_store();
                            return Err(LinkError::BoardPanicked(m));
                        }
                        if boot::is_boot(f.cmd, f.payload) {
                            self.forget_board_store();
                            if std::mem::take(&mut self.start_expected) {
                                continue;
                            }
                            return Err(LinkError::BoardRestarted);
                        }
                        if f.seq != seq {
                            continue;
                        }
                        self.start_expected = false;
                        if f.cmd == WORKING {
                            let done = f
                                .payload
                                .get(..2)
                                .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
                            let now = Instant::now();
                            if let Some((before, at)) = reported {
                                if done > before {
                                    let per = (now - at) / u32::from(done - before);
                                    self.pace.note(Kind::Step, per);
                                }
                            }
                            reported = Some((done, now));
                            damaged = None;
                            deadline = now + self.step_patience();
                            continue;
                        }
                        return Ok(Heard::Answer(f.cmd, f.payload.to_vec()));
                    }
                    Err(_) => {
                        // Damaged: the answer is lost, so resend now; while a request reports
                        // progress it may have been a report, so wait the quiet time first.
                        damaged = Some("an answer failed its CRC check");
                        let quiet = match reported {
                            Some(_) => self.timeout,
                            None => Duration::ZERO,
                        };
                        deadline = deadline.min(Instant::now() + quiet);
                    }
                }
            }
            if self.decoder.garbage_bytes() != garbage0 && damaged.is_none() {
                damaged = Some("bytes that formed no frame (a damaged frame start)");
                deadline = deadline.min(Instant::now() + self.timeout);
            }
            // The start of a frame and then a quiet line: the rest was lost or its length hit.
            if self.decoder.buffered() > 0 && last_bytes.elapsed() >= self.timeout {
                self.decoder.clear();
                damaged = Some("a frame that stopped short");
                deadline = Instant::now();
            }
            if Instant::now() >= deadline {
                if let (Some((done, at)), None) = (reported, damaged) {
                    let quiet = at.elapsed();
                    return Ok(Heard::Stalled { done, quiet });
                }
                return Ok(Heard::Nothing { damaged });
            }
            match self.port.read(self.decoder.spare()) {
                Ok(0) => {
                    let closed = std::io::Error::new(ErrorKind::UnexpectedEof, "the port closed");
                    return Err(LinkError::Gone(closed.into()));
                }
                Ok(n) => {
                    self.counters.bytes_in += n as u64;
                    self.decoder.commit(n);
                    last_bytes = Instant::now();
                }
                Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(LinkError::Gone(e.into())),
            }
        }
    }

    /// How long the host waits between two progress reports of `RUN_STEPS`.
    fn step_patience(&self) -> Duration {
        self.timeout
            + self
                .pace
                .slowest(Kind::Step)
                .map_or(super::train::STEP_TIMEOUT, |p| p * SLACK)
    }

    /// The measured pace of this link's long requests.
    pub fn pace(&self) -> Pace {
        self.pace
    }
}

/// The error for a request the board refused (an error frame that is not a transient one).
fn refusal(e: RemoteError) -> LinkError {
    match e.code {
        Some(ErrorCode::StoreFull) => LinkError::StoreFull { free: e.detail },
        Some(ErrorCode::UnknownTensor) => LinkError::UnknownTensor { id: e.detail as u8 },
        Some(ErrorCode::ShapeMismatch) => LinkError::ShapeMismatch { cmd: e.cmd },
        Some(
            c @ (ErrorCode::NotLoaded
            | ErrorCode::BadTrainState
            | ErrorCode::OutOfMemory
            | ErrorCode::BadData
            | ErrorCode::StepFailed),
        ) => LinkError::Training {
            what: super::train::describe_refusal(c, e.detail),
        },
        Some(ErrorCode::Driver) => LinkError::BoardDriver {
            what: DriverFailure::describe(e.detail),
        },
        _ => LinkError::Refused {
            cmd: e.cmd,
            what: e
                .code
                .map_or_else(|| format!("code {}", e.raw), |c| c.to_string()),
            detail: e.detail,
        },
    }
}
