//! The link's questions to the board: who it is (`PING`), its own counters (`COUNTERS`), its
//! stack's deepest use (`STACK_USE`) and the training step's cycles by section
//! (`STEP_PROFILE`). The measuring ones are left out of the link's counters.

use super::*;

impl<T: Read + Write> SerialBus<T> {
    /// The board's own counters (`COUNTERS`): requests executed and the cycles its firmware
    /// spent on them, `None` for the cycles when the board has no cycle counter. Sends every
    /// buffered write first. The exchange is left out of [`Self::counters`]: it only measures.
    pub fn board_counters(&mut self) -> Result<(u32, Option<u64>), LinkError> {
        self.flush()?;
        let kept = self.counters;
        let r = self.transact(cmd::COUNTERS, &[]);
        self.counters = kept;
        let p = r?;
        if p.len() != COUNTERS_REPLY {
            return Err(LinkError::Protocol(format!(
                "COUNTERS answer of {} bytes",
                p.len()
            )));
        }
        let frames = u32::from_le_bytes([p[1], p[2], p[3], p[4]]);
        let mut cycles = [0u8; 8];
        cycles.copy_from_slice(&p[5..13]);
        Ok((frames, (p[0] != 0).then_some(u64::from_le_bytes(cycles))))
    }

    /// The board's stack reserve and the deepest its firmware's stack has been since it
    /// started (`STACK_USE`, `protocol::stack`). Sends every buffered write first; like
    /// [`Self::board_counters`] the exchange is left out of [`Self::counters`].
    pub fn stack_use(&mut self) -> Result<StackUse, LinkError> {
        let p = self.probe(STACK_USE)?;
        StackUse::parse(&p)
            .ok_or_else(|| LinkError::Protocol(format!("STACK_USE answer of {} bytes", p.len())))
    }

    /// The board's step cycles by section since it started (`STEP_PROFILE`, training image).
    pub fn step_profile(&mut self) -> Result<[SectionCycles; SECTIONS], LinkError> {
        let p = self.probe(STEP_PROFILE)?;
        profile::decode(&p)
            .ok_or_else(|| LinkError::Protocol(format!("STEP_PROFILE answer of {} bytes", p.len())))
    }

    /// A read-only request's answer, the exchange left out of [`Self::counters`].
    fn probe(&mut self, cmd: u8) -> Result<Vec<u8>, LinkError> {
        self.flush()?;
        let kept = self.counters;
        let r = self.transact(cmd, &[]);
        self.counters = kept;
        r
    }

    /// Asks the board who it is.
    pub fn ping(&mut self) -> Result<BoardInfo, LinkError> {
        self.flush()?;
        let p = self.transact(cmd::PING, &[])?;
        if ![PING_REPLY, PING_REPLY_WITH_CAPS, PING_REPLY_WITH_TRAIN].contains(&p.len()) {
            return Err(LinkError::Protocol(format!(
                "PING answer of {} bytes",
                p.len()
            )));
        }
        let u32_at = |i: usize| u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        Ok(BoardInfo {
            id: u32_at(0),
            config_word: u32_at(4),
            version: p[8],
            max_payload: u16::from_le_bytes([p[9], p[10]]),
            store_words: (p.len() >= PING_REPLY_WITH_CAPS && p[11] & CAP_BOARD_OPS != 0)
                .then(|| u32_at(12)),
            heap_bytes: (p.len() == PING_REPLY_WITH_TRAIN && p[11] & CAP_TRAIN != 0)
                .then(|| u32_at(16)),
            train_caps: match p.len() == PING_REPLY_WITH_TRAIN && p[11] & CAP_TRAIN != 0 {
                true => {
                    p[11]
                        & (CAP_PACKED_DATA
                            | CAP_HEAP_USE
                            | CAP_STATE_PARTS
                            | CAP_EVALUATE
                            | CAP_PROGRESS
                            | CAP_SATURATION)
                }
                false => 0,
            },
        })
    }
}
