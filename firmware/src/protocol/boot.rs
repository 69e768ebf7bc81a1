//! The start announcement: the frame a board's firmware sends once when it starts (power-up, the
//! reset button, or the reset after a panic), before it serves any request. Like the
//! [`super::panic`] report it is an error frame (`CMD` = [`ERROR`]) with `SEQ` 0 that answers no
//! request, its payload the 4 bytes `[`[`ErrorCode::Restarted`]`, 0, 0, 0]`. A host that is
//! not waiting for the board to start (it did not just open the port or see a panic) takes it
//! as "the board lost everything it held": the operation in progress fails, never yields a
//! result.

use super::{ErrorCode, RemoteError, ERROR};
use crate::frame::{self, OVERHEAD};

/// Bytes of the start announcement on the line.
pub const BOOT_FRAME_LEN: usize = OVERHEAD + 4;

/// The start announcement frame.
pub fn boot_frame() -> [u8; BOOT_FRAME_LEN] {
    let mut out = [0u8; BOOT_FRAME_LEN];
    let payload = RemoteError::payload(ErrorCode::Restarted, 0, 0);
    // The payload is 4 bytes: encoding cannot fail.
    let _ = frame::encode(0, ERROR, &payload, &mut out);
    out
}

/// True when a frame (`cmd`, `payload`) is a start announcement.
pub fn is_boot(cmd: u8, payload: &[u8]) -> bool {
    cmd == ERROR
        && RemoteError::parse(payload).is_some_and(|e| e.code == Some(ErrorCode::Restarted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Decoder;

    #[test]
    fn the_announcement_decodes_as_one_and_nothing_else_does() {
        let mut d = Decoder::new();
        d.push(&boot_frame());
        let f = d.next_frame().unwrap().unwrap();
        assert_eq!(f.seq, 0);
        assert!(is_boot(f.cmd, f.payload));
        let panic = RemoteError::payload(ErrorCode::Panic, 0, 0);
        assert!(!is_boot(ERROR, &panic));
        let response = super::super::cmd::PING | super::super::RESPONSE;
        assert!(!is_boot(response, f.payload));
    }
}
