//! `STACK_USE` (`0x18`): how deep the firmware's stack has been since it started, against the
//! stack reserve it was linked with.
//!
//! The SoC's firmware paints its stack reserve with [`PAINT`] before anything runs (riscv-rt's
//! `__pre_init` hook, in assembly, so no stack is in use yet); a stack frame overwrites the
//! paint, and nothing else writes there. The high-water mark is the distance from the top of
//! the stack to the lowest word no longer holding [`PAINT`] ([`high_water`]).
//!
//! | CMD | name | request payload | response payload |
//! |-----|------|-----------------|------------------|
//! | 0x18 | `STACK_USE` | — | reserve bytes u32, deepest use in bytes u32 ([`StackUse`]) |
//!
//! A board without the paint (the pty board simulator) refuses it as an unknown command.
//! Kept outside [`super::Request`]: the frame server answers it before parsing, from the
//! probe the firmware gives it (`FrameServer::with_stack_use`).

/// The request's command code.
pub const STACK_USE: u8 = 0x18;

/// Bytes of the response payload.
pub const STACK_USE_REPLY: usize = 8;

/// `STEP_PROFILE` (`0x19`, answered like `STACK_USE`, before parsing): where the training
/// step's CPU cycles went since the board started, by section (`systole_step::profile`: per
/// section cycles u32 and entries u32; decoded by `systole_step::profile::decode`). Only the
/// training SoC image answers it (`FrameServer::with_step_profile`); others refuse it as an
/// unknown command.
pub const STEP_PROFILE: u8 = 0x19;

/// Largest `STEP_PROFILE` answer a board sends.
pub const STEP_PROFILE_MAX_REPLY: usize = 128;

/// The word the stack reserve is painted with at boot (below `2^31`, so the assembler's `li`
/// takes it on RV32).
pub const PAINT: u32 = 0x5AC3_3CA5;

/// The stack reserve and the deepest the stack has reached in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackUse {
    /// Bytes reserved for the stack at the top of RAM.
    pub reserve: u32,
    /// Bytes from the top of the stack down to the lowest word written since the start. Equal
    /// to `reserve` when even the reserve's last word was written: the stack may have run past
    /// it, into the statics below.
    pub used: u32,
}

impl StackUse {
    /// Whether the deepest use stayed inside the reserve (at least its last word untouched).
    pub fn fits(&self) -> bool {
        self.used < self.reserve
    }

    /// The response payload.
    pub fn encode(&self) -> [u8; STACK_USE_REPLY] {
        let mut out = [0u8; STACK_USE_REPLY];
        out[..4].copy_from_slice(&self.reserve.to_le_bytes());
        out[4..].copy_from_slice(&self.used.to_le_bytes());
        out
    }

    /// Reads a response payload; `None` when it is not one.
    pub fn parse(p: &[u8]) -> Option<StackUse> {
        let p: &[u8; STACK_USE_REPLY] = p.try_into().ok()?;
        let word = |i: usize| u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        Some(StackUse {
            reserve: word(0),
            used: word(4),
        })
    }
}

/// The stack use of a reserve from `bottom` to `top` (byte addresses, word-aligned, the stack
/// growing down from `top`) painted with [`PAINT`] at the start: `read(addr)` reads the word at
/// `addr`. Scans up from `bottom` to the first word that is not paint.
pub fn high_water(bottom: u32, top: u32, mut read: impl FnMut(u32) -> u32) -> StackUse {
    let mut addr = bottom;
    while addr < top && read(addr) == PAINT {
        addr += 4;
    }
    StackUse {
        reserve: top - bottom,
        used: top - addr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reserve of 16 words at 0x1000 whose top `depth` words were written.
    fn scan(depth: usize) -> StackUse {
        let mut ram = [PAINT; 16];
        for w in &mut ram[16 - depth..] {
            *w = 0;
        }
        high_water(0x1000, 0x1040, |a| ram[(a as usize - 0x1000) / 4])
    }

    #[test]
    fn the_high_water_mark_is_the_lowest_word_written() {
        assert_eq!(
            scan(3),
            StackUse {
                reserve: 64,
                used: 12
            }
        );
        assert!(scan(15).fits());
        // The reserve's last word written: it may have overflowed.
        assert_eq!(scan(16).used, 64);
        assert!(!scan(16).fits());
        assert_eq!(scan(0).used, 0);
    }

    #[test]
    fn the_answer_round_trips() {
        let s = StackUse {
            reserve: 8192,
            used: 1234,
        };
        assert_eq!(StackUse::parse(&s.encode()), Some(s));
        assert_eq!(StackUse::parse(&[0; 7]), None);
    }
}
