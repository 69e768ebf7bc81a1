//! Register map of the accelerator. Registers are 32 bits wide and addressed by an 8-bit word
//! index. Reads have no side effects; writing a read-only register is ignored.
//!
//! | addr | name | access | meaning |
//! |------|------|--------|---------|
//! | 0x00 | `ID` | RO | [`ID_VALUE`] ("SYST") |
//! | 0x01 | `CONFIG` | RO | `ArrayConfig::config_word()`: size, word bits, acc bits, log2 depth |
//! | 0x02 | `STATUS` | RO | [`STATUS_BUSY`], [`STATUS_QUEUE_FULL`], [`STATUS_ERROR`] |
//! | 0x03 | `DONE_COUNT` | RO | tiles whose converted outputs are in the C buffer (wraps) |
//! | 0x04 | `CYCLES` | RO | clock cycles since reset (wraps) |
//! | 0x05 | `MAC_CYCLES` | RO | cycles in which the array consumed one K step (utilization) |
//! | 0x08 | `SHIFT` | RW | output right shift, `0..=32` (`frac_a + frac_b - frac_out`) |
//! | 0x09 | `ROUNDING` | RW | `Rounding::code()`: 0 truncate, 1 nearest-even, 2 stochastic |
//! | 0x0A | `SEED` | RW | tile seed (`numeric::tile_seed`) latched by the next `COMMAND` |
//! | 0x0B | `K_LEN` | RW | rows `0..K_LEN` of the A and B banks the next `COMMAND` consumes, `1..=depth` |
//! | 0x0C | `COMMAND` | WO | enqueues one tile command, fields below |
//! | 0x0D | `ERROR_CLEAR` | WO | any write clears [`STATUS_ERROR`] |
//! | 0x10 | `GA_CFG` | WO | shifts one word into gather engine A's configuration ([`crate::gather`]) |
//! | 0x11 | `GA_CMD` | WO | starts gather engine A: fills rows `0..klen` of an A bank ([`gather_command`]) |
//! | 0x12 | `GB_CFG` | WO | the same for gather engine B |
//! | 0x13 | `GB_CMD` | WO | starts gather engine B: fills rows `0..klen` of a B bank |
//!
//! A command streams rows `0..K_LEN` of A bank and B bank through the array. With `CMD_CLEAR`
//! the accumulators start from zero, otherwise they continue (a dot product longer than the
//! buffer runs as several commands). With `CMD_EMIT` the tile is converted (using `SHIFT`,
//! `ROUNDING` and the latched `SEED`) into C bank and `DONE_COUNT` increments once all `size`
//! rows are written. One command may wait while another runs (`STATUS_QUEUE_FULL`); writing
//! `COMMAND` while the queue is full sets `STATUS_ERROR` and drops the command. `SHIFT` and
//! `ROUNDING` must not change while `STATUS_BUSY` is set.
//!
//! Buffer rows are moved through dedicated row-wide ports, one row per clock, alongside the
//! register bus (see `bus::AcceleratorBus`): A row `k` holds `A[i0 + r][k]` in lane `r`,
//! B row `k` holds `B[k][j0 + c]` in lane `c`, C row `r` holds `C[i0 + r][j0 + c]` in lane `c`.
//!
//! The conv unit adds a feature-map write port (one word per clock, see `bus::AcceleratorBus::
//! write_fm`) and two gather engines that fill A and B bank rows from the feature map on chip,
//! generating the im2col addresses themselves (see [`crate::gather`] for the walk they follow).
//! A bank being gathered must not be read by a command nor written by the host until the
//! engine's busy bit clears. A `GA_CMD`/`GB_CMD` written while that engine is busy, or with
//! `klen` 0 or above the buffer depth, sets [`STATUS_ERROR`] and is dropped.

/// Identification register.
pub const ID: u8 = 0x00;
/// Array configuration (read-only copy of `ArrayConfig::config_word`).
pub const CONFIG: u8 = 0x01;
/// Status bits.
pub const STATUS: u8 = 0x02;
/// Count of emitted tiles completed.
pub const DONE_COUNT: u8 = 0x03;
/// Free-running cycle counter.
pub const CYCLES: u8 = 0x04;
/// Cycles the array spent consuming K steps.
pub const MAC_CYCLES: u8 = 0x05;
/// Output shift.
pub const SHIFT: u8 = 0x08;
/// Rounding mode.
pub const ROUNDING: u8 = 0x09;
/// Stochastic-rounding tile seed for the next command.
pub const SEED: u8 = 0x0A;
/// K length for the next command.
pub const K_LEN: u8 = 0x0B;
/// Command queue (write-only).
pub const COMMAND: u8 = 0x0C;
/// Clears the sticky error bit (write-only).
pub const ERROR_CLEAR: u8 = 0x0D;
/// Gather engine A: configuration shift-in (write-only).
pub const GA_CFG: u8 = 0x10;
/// Gather engine A: command (write-only).
pub const GA_CMD: u8 = 0x11;
/// Gather engine B: configuration shift-in (write-only).
pub const GB_CFG: u8 = 0x12;
/// Gather engine B: command (write-only).
pub const GB_CMD: u8 = 0x13;

/// Value of the `ID` register: ASCII "SYST".
pub const ID_VALUE: u32 = 0x5359_5354;

/// `STATUS`: a command is running or its outputs are still being converted.
pub const STATUS_BUSY: u32 = 1 << 0;
/// `STATUS`: a second command is waiting; `COMMAND` must not be written.
pub const STATUS_QUEUE_FULL: u32 = 1 << 1;
/// `STATUS`: sticky error (command dropped, or `K_LEN`/`SHIFT`/`ROUNDING` out of range).
pub const STATUS_ERROR: u32 = 1 << 2;
/// `STATUS`: gather engine A is filling an A bank.
pub const STATUS_GATHER_A: u32 = 1 << 3;
/// `STATUS`: gather engine B is filling a B bank.
pub const STATUS_GATHER_B: u32 = 1 << 4;

/// How a gather command sets up its lanes (bits 18..20 of the command word).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneMode {
    /// Restart the lane walk from its configured start, then take `size` steps.
    Load = 0,
    /// Take the next `size` steps of the lane walk (the next tile).
    Next = 1,
    /// Keep the lanes of the previous command (the same tile, another K chunk or bank).
    Keep = 2,
}

/// Builds a `GA_CMD` / `GB_CMD` word: fill rows `0..klen` of bank `bank`; `k_next` continues
/// the K walk where the previous command of this engine stopped instead of restarting it.
pub const fn gather_command(klen: u32, bank: u8, lanes: LaneMode, k_next: bool) -> u32 {
    (klen & 0x1_FFFF)
        | (((bank & 1) as u32) << 17)
        | ((lanes as u32) << 18)
        | ((k_next as u32) << 20)
}

/// `COMMAND` bit: which A bank to read.
pub const CMD_A_BANK: u32 = 1 << 0;
/// `COMMAND` bit: which B bank to read.
pub const CMD_B_BANK: u32 = 1 << 1;
/// `COMMAND` bit: which C bank to write.
pub const CMD_C_BANK: u32 = 1 << 2;
/// `COMMAND` bit: start the accumulators from zero.
pub const CMD_CLEAR: u32 = 1 << 3;
/// `COMMAND` bit: convert the tile into the C bank when done.
pub const CMD_EMIT: u32 = 1 << 4;

/// Builds a `COMMAND` word.
pub const fn command(a_bank: u8, b_bank: u8, c_bank: u8, clear: bool, emit: bool) -> u32 {
    let mut w = 0;
    if a_bank & 1 == 1 {
        w |= CMD_A_BANK;
    }
    if b_bank & 1 == 1 {
        w |= CMD_B_BANK;
    }
    if c_bank & 1 == 1 {
        w |= CMD_C_BANK;
    }
    if clear {
        w |= CMD_CLEAR;
    }
    if emit {
        w |= CMD_EMIT;
    }
    w
}
