//! The serial bus's retry rules against a fake line.

use super::*;
use std::collections::VecDeque;
use std::io::ErrorKind;
use systole_core::{regmap, AcceleratorBus};
use systole_firmware::frame;
use systole_firmware::protocol::{ErrorCode, RemoteError, ERROR};

/// A line that damages every request: the "board" behind it answers each frame it decodes
/// with a CRC error under that frame's `SEQ` (what the firmware sends for a damaged frame).
struct DamagingLine {
    heard: Box<Decoder>,
    answers: VecDeque<u8>,
    frames_heard: u32,
}

impl Write for DamagingLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.heard.push(bytes);
        while let Some(Ok(f)) = self.heard.next_frame() {
            self.frames_heard += 1;
            let p = RemoteError::payload(ErrorCode::BadCrc, f.cmd, 0);
            let mut buf = [0u8; 16];
            let n = frame::encode(f.seq, ERROR, &p, &mut buf).unwrap();
            self.answers.extend(&buf[..n]);
        }
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Read for DamagingLine {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.answers.is_empty() {
            return Err(ErrorKind::TimedOut.into());
        }
        let n = out.len().min(self.answers.len());
        for (o, b) in out.iter_mut().zip(self.answers.drain(..n)) {
            *o = b;
        }
        Ok(n)
    }
}

/// A request the board hears damaged on every try ends as `Damaged` naming the board's
/// reason, after exactly the allowed tries, not as "no answer".
#[test]
fn a_request_damaged_on_every_try_is_reported_as_damage() {
    let line = DamagingLine {
        heard: Box::new(Decoder::new()),
        answers: VecDeque::new(),
        frames_heard: 0,
    };
    let mut bus = SerialBus::new(line, 4);
    bus.set_retry_policy(Duration::from_millis(50), 2);
    let e = bus.read_reg(regmap::ID).unwrap_err();
    assert_eq!(
        e,
        LinkError::Damaged {
            tries: 3,
            damaged: 3,
            what: ErrorCode::BadCrc.to_string(),
        }
    );
    assert!(e.to_string().contains("corrupts bytes"), "{e}");
    assert_eq!(bus.port.frames_heard, 3);
}

/// The chain a failed operation prints names the link's error once, though the driver's
/// `Bus` message shows it and keeps it as its source too.
#[test]
fn a_link_error_is_printed_once_in_the_chain() {
    use systole_firmware::driver::DriverError;
    let link = LinkError::NoAnswer {
        tries: 4,
        timeout_ms: 500,
    };
    let e = DeviceError::Transport {
        device: "serial 4x4 at /dev/pts/0".into(),
        source: Box::new(DriverError::Bus(link.clone())),
    };
    let text = crate::error_chain(&e);
    assert_eq!(
        text,
        format!("serial 4x4 at /dev/pts/0 failed: accelerator bus failed: {link}")
    );
    assert_eq!(text.matches("no answer").count(), 1, "{text}");
}

#[test]
fn a_lost_port_and_an_unencodable_request_keep_their_cause_as_the_source() {
    use std::error::Error as _;
    let io = std::io::Error::new(ErrorKind::BrokenPipe, "pipe broke");
    let gone = LinkError::Gone(io.into());
    assert_eq!(
        gone.source().map(|s| s.to_string()).as_deref(),
        Some("pipe broke")
    );
    assert_eq!(
        crate::error_chain(&gone),
        "serial link lost: pipe broke",
        "the cause printed once"
    );
    let enc = LinkError::Encode(frame::EncodeError::BufferTooSmall);
    assert!(enc
        .source()
        .is_some_and(|s| s.to_string().contains("too small")));
}

/// A line whose board refuses every request with `code` and `detail`.
struct RefusingLine {
    heard: Box<Decoder>,
    answers: VecDeque<u8>,
    code: ErrorCode,
    detail: u16,
}

impl Write for RefusingLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.heard.push(bytes);
        while let Some(Ok(f)) = self.heard.next_frame() {
            let p = RemoteError::payload(self.code, f.cmd, self.detail);
            let mut buf = [0u8; 16];
            let n = frame::encode(f.seq, ERROR, &p, &mut buf).unwrap();
            self.answers.extend(&buf[..n]);
        }
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Read for RefusingLine {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.answers.is_empty() {
            return Err(ErrorKind::TimedOut.into());
        }
        let n = out.len().min(self.answers.len());
        for (o, b) in out.iter_mut().zip(self.answers.drain(..n)) {
            *o = b;
        }
        Ok(n)
    }
}

/// The tensor store's refusals arrive as typed link errors, each naming what is wrong, on the
/// first try (they are not transient).
#[test]
fn store_refusals_are_typed_link_errors() {
    let cases = [
        (
            ErrorCode::StoreFull,
            321,
            LinkError::StoreFull { free: 321 },
            "321 words free",
        ),
        (
            ErrorCode::UnknownTensor,
            7,
            LinkError::UnknownTensor { id: 7 },
            "no tensor 7",
        ),
        (
            ErrorCode::ShapeMismatch,
            0,
            LinkError::ShapeMismatch { cmd: cmd::READ_REG },
            "shapes do not fit",
        ),
        (
            ErrorCode::Driver,
            1,
            LinkError::BoardDriver {
                what: "the dot product is longer than MAX_K",
            },
            "MAX_K",
        ),
    ];
    for (code, detail, want, text) in cases {
        let line = RefusingLine {
            heard: Box::new(Decoder::new()),
            answers: VecDeque::new(),
            code,
            detail,
        };
        let mut bus = SerialBus::new(line, 4);
        let e = bus.read_reg(regmap::ID).unwrap_err();
        assert_eq!(e, want);
        assert!(e.to_string().contains(text), "{e}");
        assert_eq!(bus.counters().resends, 0);
    }
}
