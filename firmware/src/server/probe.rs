//! The read-only answers of [`super::FrameServer`] (`STACK_USE`, `STEP_PROFILE`): served
//! before parsing from a probe the firmware gives, never kept for replay (a resend measures
//! again).

use super::LinkStats;
use crate::frame::{self, Frame, FRAME_CAPACITY};
use crate::protocol::stack::STEP_PROFILE_MAX_REPLY;
use crate::protocol::{ErrorCode, RemoteError, ERROR, RESPONSE};

/// A read-only answer: writes its payload (at most `STEP_PROFILE_MAX_REPLY` bytes), returns
/// its length.
pub type Probe = fn(&mut [u8]) -> usize;

/// A probe as [`answer_probe`] takes it (a [`Probe`] or a closure around another kind).
pub type ProbeRef<'p> = &'p dyn Fn(&mut [u8]) -> usize;

/// Answers a read-only frame (`STACK_USE`, `STEP_PROFILE`) into `tx` with the board's
/// `probe` (refused as unknown without one); returns the frame's length.
pub(super) fn answer_probe(
    f: Frame<'_>,
    probe: Option<ProbeRef<'_>>,
    tx: &mut [u8; FRAME_CAPACITY],
    stats: &mut LinkStats,
) -> usize {
    let mut p = [0u8; STEP_PROFILE_MAX_REPLY];
    let (cmd, n) = match (probe, f.payload.is_empty()) {
        (Some(probe), true) => {
            let n = probe(&mut p);
            stats.frames_ok = stats.frames_ok.wrapping_add(1);
            (f.cmd | RESPONSE, n)
        }
        (probe, _) => {
            let code = match probe {
                None => ErrorCode::UnknownCommand,
                Some(_) => ErrorCode::Malformed,
            };
            p[..4].copy_from_slice(&RemoteError::payload(code, f.cmd, 0));
            stats.frames_rejected = stats.frames_rejected.wrapping_add(1);
            (ERROR, 4)
        }
    };
    frame::encode(f.seq, cmd, &p[..n], tx).unwrap_or(0)
}
