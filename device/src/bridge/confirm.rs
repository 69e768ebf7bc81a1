//! Writes confirmed by their echoes, and sent again when one is not exact.
//!
//! The bridge writes nothing whose CRC fails (it answers `'!'`), and answers `'?'` to an
//! opcode it does not know. After the writes whose echoes came exact, in order, the first write
//! without one was either refused (`'!'`, `'?'`: the bridge was in step at its opcode, so it
//! did not run), or its echo was damaged or lost on the way back (it may have run), or the line
//! went out of step (a damaged opcode made the bridge read the following bytes as other
//! commands, which run only if their CRC matches by chance, 1 in 65,536). The bus then brings
//! the bridge back in step (a quiet line, then filler bytes that complete any command cut short
//! with a failing CRC and are each answered `'?'` after it, then a quiet line again) and sends
//! that write and every write after it again, in order: rows and registers that hold a value
//! end as the host wrote them whatever ran before. A write that must not run twice (`COMMAND`,
//! the gather engines' registers: [`Unconfirmed::replayable`] says no) is only sent when no
//! write is waiting for its echo, so it is always the first of its batch: it is sent again when
//! the bridge refused it. Otherwise, for `COMMAND`, the bus asks the board whether it ran
//! ([`Commands`]): it waits until the array is idle and reads `MAC_CYCLES`, which every command
//! that runs raises by its `K_LEN`; it ran if the count is the one expected after it, and it is
//! sent again if the count is the one expected without it. When the bus cannot tell (no count
//! known, or one that fits neither) and for the gather registers it stops with
//! [`BridgeError::Unconfirmed`]. The tries ([`WRITE_TRIES`]) count rounds in a row that
//! confirmed no write.

use super::{show, BridgeBus, BridgeError, READ_TRIES, WRITE_TRIES};
use std::io::{Read, Write};
use std::time::Instant;
use systole_core::regmap;
use systole_firmware::crc;
use systole_hdl::bridge_top::{
    OP_READ_C, OP_READ_REG, OP_WRITE_A, OP_WRITE_B, OP_WRITE_FM, OP_WRITE_REG, REPLY_DAMAGED,
    REPLY_UNKNOWN,
};

/// The byte the bus sends to bring the bridge back in step: no opcode, so the bridge answers it
/// `'?'` when idle.
const FILLER: u8 = 0xFF;
const _: () = {
    let ops = [
        OP_READ_C,
        OP_READ_REG,
        OP_WRITE_A,
        OP_WRITE_B,
        OP_WRITE_FM,
        OP_WRITE_REG,
    ];
    let mut i = 0;
    while i < ops.len() {
        assert!(ops[i] != FILLER);
        i += 1;
    }
};

/// A write sent, waiting for its echo.
pub(super) struct Unconfirmed {
    /// The command's bytes and its CRC, as sent.
    bytes: Vec<u8>,
}

impl Unconfirmed {
    /// The write `request` (opcode and fields) with its CRC.
    pub(super) fn new(request: &[u8]) -> Self {
        let crc = crc::crc16(request).to_be_bytes();
        Unconfirmed {
            bytes: request.iter().copied().chain(crc).collect(),
        }
    }

    /// The bytes on the line.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn op(&self) -> u8 {
        self.bytes[0]
    }

    /// The register and value of a register write.
    fn reg_write(&self) -> Option<(u8, u32)> {
        let b = &self.bytes;
        (self.op() == OP_WRITE_REG).then(|| (b[1], u32::from_be_bytes([b[2], b[3], b[4], b[5]])))
    }

    /// Running it twice ends as running it once: a row, or a register that holds a value
    /// (`COMMAND` queues a command, the gather registers shift in a word or start a fill; an
    /// unknown register is taken as one of those).
    pub(super) fn replayable(&self) -> bool {
        if self.op() != OP_WRITE_REG {
            return true;
        }
        matches!(
            self.bytes[1],
            regmap::SHIFT | regmap::ROUNDING | regmap::SEED | regmap::K_LEN | regmap::ERROR_CLEAR
        )
    }
}

/// What the bus knows of the array's command count, to learn after an unclear echo whether a
/// `COMMAND` ran. The tile driver reads `MAC_CYCLES` once `STATUS` says the array is idle (at
/// the start of each product): that count, plus the `K_LEN` of each `COMMAND` confirmed since,
/// is what `MAC_CYCLES` reads once the array is idle again.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Commands {
    /// `MAC_CYCLES` once every command confirmed so far has run (`None`: not known).
    macs_when_idle: Option<u32>,
    /// The board's `K_LEN`, as last confirmed (`None`: not known).
    k_len: Option<u32>,
    /// The last `STATUS` read found the array idle, and no `COMMAND` went out since.
    idle: bool,
}

impl Commands {
    /// The driver read `value` from register `addr`.
    pub(super) fn read(&mut self, addr: u8, value: u32) {
        match addr {
            regmap::STATUS => {
                self.idle = value & (regmap::STATUS_BUSY | regmap::STATUS_QUEUE_FULL) == 0;
            }
            regmap::MAC_CYCLES if self.idle => self.macs_when_idle = Some(value),
            _ => {}
        }
    }

    /// `write` went out.
    pub(super) fn sent(&mut self, write: &Unconfirmed) {
        if write
            .reg_write()
            .is_some_and(|(reg, _)| reg == regmap::COMMAND)
        {
            self.idle = false;
        }
    }

    /// `write`'s echo came exact: it ran.
    fn confirmed(&mut self, write: &Unconfirmed) {
        match write.reg_write() {
            Some((regmap::K_LEN, v)) => self.k_len = Some(regmap::value::K_LEN.get(v)),
            Some((regmap::COMMAND, _)) => {
                self.macs_when_idle = match (self.macs_when_idle, self.k_len) {
                    (Some(m), Some(k)) => Some(m.wrapping_add(k)),
                    _ => None,
                };
            }
            _ => {}
        }
    }

    /// The writes in flight were dropped unconfirmed: the board's state is not known.
    pub(super) fn forget(&mut self) {
        *self = Commands::default();
    }
}

impl<T: Read + Write> BridgeBus<T> {
    /// One round trip: sends `read` (a read command) if given and reads the echoes of the
    /// writes in flight, then its reply into `reply`; writes not confirmed are sent again and
    /// a reply failing its CRC read again, each within its tries.
    pub(super) fn round(
        &mut self,
        read: Option<&[u8]>,
        reply: &mut [u8],
    ) -> Result<(), BridgeError> {
        let checked_len = read.map_or(0, |_| reply.len() + 2);
        let (mut read_tries, mut write_tries) = (0u32, 0u32);
        loop {
            if self.stale {
                self.resync()?;
            }
            let end = Instant::now() + self.deadline;
            if let Some(r) = read {
                self.send(r, end)?;
            }
            self.counters.round_trips += 1;
            let acks = self.unacked.len();
            let mut buf = vec![0u8; acks + checked_len];
            let got = self.receive(&mut buf, end)?;
            let exact = buf[..got.min(acks)]
                .iter()
                .zip(&self.unacked)
                .take_while(|(&ack, w)| ack == w.op())
                .count();
            self.counters.commands += exact as u64;
            for w in self.unacked.drain(..exact) {
                self.track.confirmed(&w);
            }
            if !self.unacked.is_empty() {
                // Tries count rounds that confirmed nothing: a long batch on a noisy line
                // goes through a part a round.
                write_tries = if exact > 0 { 1 } else { write_tries + 1 };
                self.resend(buf.get(exact).filter(|_| got > exact).copied(), write_tries)?;
                continue;
            }
            let Some(request) = read else {
                return Ok(());
            };
            if got < buf.len() {
                // Lost, or the line out of step (a damaged opcode): read again once in step.
                self.stale = true;
                read_tries += 1;
                if read_tries < READ_TRIES {
                    self.counters.retries += 1;
                    continue;
                }
                // A lone '?' is the bridge refusing the opcode; inside a longer reply it could
                // be a data byte, so only a reply that stopped after it is taken as one.
                if got == acks + 1 && buf[acks] == REPLY_UNKNOWN {
                    return Err(unknown(request[0]));
                }
                return Err(self.timeout(char::from(request[0])));
            }
            let (data, crc) = buf[acks..].split_at(reply.len());
            let want = crc::update(crc::crc16(request), data);
            if crc == want.to_be_bytes() {
                reply.copy_from_slice(data);
                self.counters.commands += 1;
                return Ok(());
            }
            // Bytes may have been added or lost, not only flipped: start the retry in step.
            self.counters.retries += 1;
            self.stale = true;
            read_tries += 1;
            if read_tries == READ_TRIES {
                return Err(BridgeError::Corrupt {
                    cmd: char::from(request[0]),
                    tries: READ_TRIES,
                });
            }
        }
    }

    /// The first write in flight got `ack` (`None`: nothing) instead of its echo: brings the
    /// bridge back in step and sends it and the writes after it again, or says why not.
    fn resend(&mut self, ack: Option<u8>, tries: u32) -> Result<(), BridgeError> {
        let first = &self.unacked[0];
        let (op, reg, replayable) = (first.op(), first.bytes[1], first.replayable());
        let cmd = char::from(op);
        // Refused whole: the bridge was in step at its opcode, so it did not run.
        let refused = matches!(ack, Some(REPLY_DAMAGED | REPLY_UNKNOWN));
        let what = match ack {
            None => "nothing".to_string(),
            Some(REPLY_DAMAGED) => "'!' (the write arrived damaged)".to_string(),
            Some(b) => show(b),
        };
        if !self.unacked[1..].iter().all(|w| w.replayable()) {
            return Err(BridgeError::Unconfirmed { cmd, reg, what });
        }
        if !(replayable || refused) {
            match self.command_ran()? {
                // It ran: the writes after it go again.
                Some(true) => {
                    let first = self.unacked.remove(0);
                    self.counters.commands += 1;
                    self.track.confirmed(&first);
                    if self.unacked.is_empty() {
                        return Ok(());
                    }
                }
                Some(false) => {}
                None => return Err(BridgeError::Unconfirmed { cmd, reg, what }),
            }
        }
        if tries >= WRITE_TRIES {
            return Err(match ack {
                None => self.timeout(cmd),
                Some(REPLY_UNKNOWN) => unknown(op),
                Some(_) => BridgeError::WritesDamaged { cmd, tries, what },
            });
        }
        self.resync()?;
        let bytes: Vec<u8> = self.unacked.iter().flat_map(|w| w.bytes.clone()).collect();
        self.counters.retries += self.unacked.len() as u64;
        for w in &self.unacked {
            self.track.sent(w);
        }
        self.send(&bytes, Instant::now() + self.deadline)
    }

    /// Whether the `COMMAND` first in flight ran, as [`Commands`] tells: the line brought back
    /// in step, the array waited for until idle, then `MAC_CYCLES` read. `None` when the bus
    /// cannot tell (another write, no count known, a count that fits neither, an array that
    /// stays busy past the deadline).
    fn command_ran(&mut self) -> Result<Option<bool>, BridgeError> {
        let is_command = self.unacked[0]
            .reg_write()
            .is_some_and(|(reg, _)| reg == regmap::COMMAND);
        let (Some(before), Some(k), true) =
            (self.track.macs_when_idle, self.track.k_len, is_command)
        else {
            return Ok(None);
        };
        // The writes in flight stay aside: these reads must not wait for their echoes.
        let pending = std::mem::take(&mut self.unacked);
        self.stale = true;
        let macs = self.macs_once_idle();
        self.unacked = pending;
        Ok(match macs? {
            Some(m) if m == before.wrapping_add(k) => Some(true),
            Some(m) if m == before => Some(false),
            _ => None,
        })
    }

    /// `MAC_CYCLES` once `STATUS` says the array is idle; `None` if it stays busy until the
    /// deadline.
    fn macs_once_idle(&mut self) -> Result<Option<u32>, BridgeError> {
        let end = Instant::now() + self.deadline;
        let read = |bus: &mut Self, addr: u8| -> Result<u32, BridgeError> {
            let mut data = [0u8; 4];
            bus.round(Some(&[OP_READ_REG, addr]), &mut data)?;
            Ok(u32::from_be_bytes(data))
        };
        loop {
            let status = read(self, regmap::STATUS)?;
            if status & (regmap::STATUS_BUSY | regmap::STATUS_QUEUE_FULL) == 0 {
                return read(self, regmap::MAC_CYCLES).map(Some);
            }
            if Instant::now() >= end {
                return Ok(None);
            }
        }
    }

    /// Brings the bridge back in step: waits for a quiet line, completes any command it is in
    /// the middle of with filler (a write so completed fails its CRC and writes nothing; every
    /// filler byte after it is answered `'?'`), and waits for a quiet line again.
    pub(super) fn resync(&mut self) -> Result<(), BridgeError> {
        self.drain()?;
        // The longest command: a row write of `n` words and its CRC.
        let filler = vec![FILLER; 4 + 2 * self.n + 2];
        self.send(&filler, Instant::now() + self.deadline)?;
        self.drain()
    }
}

/// The bridge does not know `op`.
fn unknown(op: u8) -> BridgeError {
    BridgeError::Protocol(format!(
        "the bridge answered '?' to '{}': it does not know the opcode (is the board flashed with a current `systole bitstream` build? one built before writes carried a CRC answers '?' to it)",
        char::from(op)
    ))
}
