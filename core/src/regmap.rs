//! Register map of the accelerator: register addresses, and every bit field of the words the
//! hardware decodes, as [`Field`] constants (the one definition; the hardware guide
//! docs/HARDWARE.md tabulates them from [`REGISTERS`] and the field lists below, and explains
//! the rules: out-of-range writes, command queue, gather timing).
//!
//! Registers are 32 bits wide and addressed by an 8-bit word index. Reads are combinational and
//! have no side effects; reading an unmapped address returns 0; writing a read-only or unmapped
//! register is ignored.

use crate::field::Field;

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

/// Who may access a register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read only (writes ignored).
    Ro,
    /// Read and write (reads return the stored bits).
    Rw,
    /// Write only (reads return 0): a write is an action.
    Wo,
}

impl Access {
    /// `RO`, `RW` or `WO`.
    pub const fn name(self) -> &'static str {
        match self {
            Access::Ro => "RO",
            Access::Rw => "RW",
            Access::Wo => "WO",
        }
    }
}

/// One register of the map, as the guide tabulates it.
#[derive(Clone, Copy, Debug)]
pub struct Register {
    /// Word index.
    pub addr: u8,
    /// Name (the constant of the same name holds `addr`).
    pub name: &'static str,
    /// Access.
    pub access: Access,
    /// Value after reset, as text (some depend on the configuration).
    pub reset: &'static str,
    /// What it holds or does.
    pub meaning: &'static str,
    /// Its bit fields (the value the hardware stores or decodes).
    pub fields: &'static [Field],
}

/// Fields of the `CONFIG` word (`ArrayConfig::config_word`).
pub mod config {
    use crate::field::Field;
    /// Array size `n`.
    pub const SIZE: Field = Field::new("size", 0, 8, "array size n (n x n PEs)");
    /// Word width.
    pub const WORD_BITS: Field = Field::new(
        "word_bits",
        8,
        8,
        "word width W in bits (8..=16; 16 by default)",
    );
    /// Accumulator width.
    pub const ACC_BITS: Field = Field::new(
        "acc_bits",
        16,
        8,
        "accumulator width in bits (2W + 16: 48 at W = 16)",
    );
    /// log2 of the buffer depth.
    pub const LOG2_DEPTH: Field =
        Field::new("log2_depth", 24, 5, "log2(buffer_depth): rows per A/B bank");
    /// Feature-map code.
    pub const FM_CODE: Field = Field::new(
        "fm_code",
        29,
        3,
        "0: no conv unit; else fm_depth = 2^(fm_code + 8) words",
    );
    /// All fields, low bits first.
    pub const FIELDS: [Field; 5] = [SIZE, WORD_BITS, ACC_BITS, LOG2_DEPTH, FM_CODE];
}

/// Fields of the `STATUS` register.
pub mod status {
    use crate::field::Field;
    /// A command runs, waits, or its tile is not yet all in the C bank.
    pub const BUSY: Field = Field::new(
        "busy",
        0,
        1,
        "a command runs or waits, or an emitted tile is not yet all in its C bank",
    );
    /// The waiting slot is taken.
    pub const QUEUE_FULL: Field = Field::new(
        "queue_full",
        1,
        1,
        "a command waits behind the running one: do not write COMMAND",
    );
    /// Sticky error.
    pub const ERROR: Field = Field::new(
        "error",
        2,
        1,
        "sticky: a command was dropped or an out-of-range value written; ERROR_CLEAR clears it",
    );
    /// Gather engine A runs.
    pub const GATHER_A: Field = Field::new(
        "gather_a",
        3,
        1,
        "gather engine A runs a command or its last row is not yet written",
    );
    /// Gather engine B runs.
    pub const GATHER_B: Field = Field::new("gather_b", 4, 1, "the same for gather engine B");
    /// All fields, low bits first.
    pub const FIELDS: [Field; 5] = [BUSY, QUEUE_FULL, ERROR, GATHER_A, GATHER_B];
}

/// Fields of a `COMMAND` word.
pub mod cmd {
    use crate::field::Field;
    /// A bank read.
    pub const A_BANK: Field = Field::new("a_bank", 0, 1, "A bank whose rows 0..K_LEN are read");
    /// B bank read.
    pub const B_BANK: Field = Field::new("b_bank", 1, 1, "B bank whose rows 0..K_LEN are read");
    /// C bank written.
    pub const C_BANK: Field = Field::new("c_bank", 2, 1, "C bank the emitted tile is written to");
    /// Start from zero.
    pub const CLEAR: Field = Field::new(
        "clear",
        3,
        1,
        "1: the accumulators start from zero; 0: they continue the previous command's sums",
    );
    /// Convert when done.
    pub const EMIT: Field = Field::new(
        "emit",
        4,
        1,
        "1: convert the tile into the C bank after the last K row (SEED of this command)",
    );
    /// All fields, low bits first (bits 5..31 are ignored).
    pub const FIELDS: [Field; 5] = [A_BANK, B_BANK, C_BANK, CLEAR, EMIT];
}

/// Fields of a `GA_CMD` / `GB_CMD` word.
pub mod gcmd {
    use crate::field::Field;
    /// Rows to fill.
    pub const KLEN: Field = Field::new(
        "klen",
        0,
        17,
        "fill bank rows 0..klen, 1..=buffer_depth (else refused)",
    );
    /// Bank filled.
    pub const BANK: Field = Field::new("bank", 17, 1, "the A (GA_CMD) or B (GB_CMD) bank filled");
    /// Lane set-up ([`super::LaneMode`]).
    pub const LANES: Field = Field::new(
        "lanes",
        18,
        2,
        "0 load: lane walker to its start, then n steps; 1 next: n more steps; 2 keep: lanes unchanged",
    );
    /// Continue the K walk.
    pub const K_NEXT: Field = Field::new(
        "k_next",
        20,
        1,
        "0: K walker to its start; 1: continue where this engine's last command stopped",
    );
    /// All fields, low bits first (bits 21..31 are ignored).
    pub const FIELDS: [Field; 4] = [KLEN, BANK, LANES, K_NEXT];
}

/// Fields of the read/write registers (the bits stored; wider writes are truncated to them).
pub mod value {
    use crate::field::Field;
    /// `SHIFT`.
    pub const SHIFT: Field = Field::new(
        "shift",
        0,
        6,
        "output right shift 0..=32 (frac_a + frac_b - frac_out)",
    );
    /// `ROUNDING`.
    pub const ROUNDING: Field =
        Field::new("rounding", 0, 2, "0 truncate, 1 nearest-even, 2 stochastic");
    /// `SEED`.
    pub const SEED: Field = Field::new(
        "seed",
        0,
        32,
        "tile seed; column c's LFSR starts at lane_seed(seed, c)",
    );
    /// `K_LEN`.
    pub const K_LEN: Field = Field::new(
        "k_len",
        0,
        17,
        "K rows 0..K_LEN of the banks the next COMMAND reads, 1..=buffer_depth",
    );
}

/// Every register, by address.
pub const REGISTERS: [Register; 16] = [
    Register {
        addr: ID,
        name: "ID",
        access: Access::Ro,
        reset: "0x53595354",
        meaning: "identification: ASCII \"SYST\"",
        fields: &[],
    },
    Register {
        addr: CONFIG,
        name: "CONFIG",
        access: Access::Ro,
        reset: "config_word",
        meaning: "the array configuration (fields below)",
        fields: &config::FIELDS,
    },
    Register {
        addr: STATUS,
        name: "STATUS",
        access: Access::Ro,
        reset: "0",
        meaning: "status bits (fields below)",
        fields: &status::FIELDS,
    },
    Register {
        addr: DONE_COUNT,
        name: "DONE_COUNT",
        access: Access::Ro,
        reset: "0",
        meaning: "emitted tiles whose outputs are all in the C bank (wraps at 2^32)",
        fields: &[],
    },
    Register {
        addr: CYCLES,
        name: "CYCLES",
        access: Access::Ro,
        reset: "0",
        meaning: "clock cycles since reset (wraps)",
        fields: &[],
    },
    Register {
        addr: MAC_CYCLES,
        name: "MAC_CYCLES",
        access: Access::Ro,
        reset: "0",
        meaning: "cycles in which the array consumed one K row (wraps)",
        fields: &[],
    },
    Register {
        addr: SHIFT,
        name: "SHIFT",
        access: Access::Rw,
        reset: "0",
        meaning: "output right shift, read while a tile is converted",
        fields: &[value::SHIFT],
    },
    Register {
        addr: ROUNDING,
        name: "ROUNDING",
        access: Access::Rw,
        reset: "0",
        meaning: "rounding mode, read while a tile is converted",
        fields: &[value::ROUNDING],
    },
    Register {
        addr: SEED,
        name: "SEED",
        access: Access::Rw,
        reset: "0",
        meaning: "tile seed, latched by COMMAND",
        fields: &[value::SEED],
    },
    Register {
        addr: K_LEN,
        name: "K_LEN",
        access: Access::Rw,
        reset: "0 (invalid)",
        meaning: "K rows of the next command, latched by COMMAND",
        fields: &[value::K_LEN],
    },
    Register {
        addr: COMMAND,
        name: "COMMAND",
        access: Access::Wo,
        reset: "-",
        meaning: "enqueues one array command (fields below)",
        fields: &cmd::FIELDS,
    },
    Register {
        addr: ERROR_CLEAR,
        name: "ERROR_CLEAR",
        access: Access::Wo,
        reset: "-",
        meaning: "any write clears STATUS.error",
        fields: &[],
    },
    Register {
        addr: GA_CFG,
        name: "GA_CFG",
        access: Access::Wo,
        reset: "-",
        meaning: "shifts one word into gather engine A's 35 configuration words",
        fields: &[],
    },
    Register {
        addr: GA_CMD,
        name: "GA_CMD",
        access: Access::Wo,
        reset: "-",
        meaning: "starts gather engine A (fields below)",
        fields: &gcmd::FIELDS,
    },
    Register {
        addr: GB_CFG,
        name: "GB_CFG",
        access: Access::Wo,
        reset: "-",
        meaning: "the same for gather engine B",
        fields: &[],
    },
    Register {
        addr: GB_CMD,
        name: "GB_CMD",
        access: Access::Wo,
        reset: "-",
        meaning: "starts gather engine B (fields as GA_CMD)",
        fields: &gcmd::FIELDS,
    },
];

/// `STATUS`: a command is running or its outputs are still being converted.
pub const STATUS_BUSY: u32 = status::BUSY.mask();
/// `STATUS`: a second command is waiting; `COMMAND` must not be written.
pub const STATUS_QUEUE_FULL: u32 = status::QUEUE_FULL.mask();
/// `STATUS`: sticky error (command dropped, or `K_LEN`/`SHIFT`/`ROUNDING` out of range).
pub const STATUS_ERROR: u32 = status::ERROR.mask();
/// `STATUS`: gather engine A is filling an A bank.
pub const STATUS_GATHER_A: u32 = status::GATHER_A.mask();
/// `STATUS`: gather engine B is filling a B bank.
pub const STATUS_GATHER_B: u32 = status::GATHER_B.mask();

/// How a gather command sets up its lanes ([`gcmd::LANES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneMode {
    /// Restart the lane walk from its configured start, then take `size` steps.
    Load = 0,
    /// Take the next `size` steps of the lane walk (the next tile).
    Next = 1,
    /// Keep the lanes of the previous command (the same tile, another K chunk or bank).
    Keep = 2,
}

impl LaneMode {
    /// Decodes [`gcmd::LANES`]; `None` for 3 (which the hardware treats as `Next`: it neither
    /// loads nor keeps).
    pub const fn from_code(code: u32) -> Option<LaneMode> {
        match code {
            0 => Some(LaneMode::Load),
            1 => Some(LaneMode::Next),
            2 => Some(LaneMode::Keep),
            _ => None,
        }
    }
}

/// Builds a `GA_CMD` / `GB_CMD` word: fill rows `0..klen` of bank `bank`; `k_next` continues
/// the K walk where the previous command of this engine stopped instead of restarting it.
pub const fn gather_command(klen: u32, bank: u8, lanes: LaneMode, k_next: bool) -> u32 {
    gcmd::KLEN.put(klen)
        | gcmd::BANK.put(bank as u32)
        | gcmd::LANES.put(lanes as u32)
        | gcmd::K_NEXT.put(k_next as u32)
}

/// `COMMAND` bit: which A bank to read.
pub const CMD_A_BANK: u32 = cmd::A_BANK.mask();
/// `COMMAND` bit: which B bank to read.
pub const CMD_B_BANK: u32 = cmd::B_BANK.mask();
/// `COMMAND` bit: which C bank to write.
pub const CMD_C_BANK: u32 = cmd::C_BANK.mask();
/// `COMMAND` bit: start the accumulators from zero.
pub const CMD_CLEAR: u32 = cmd::CLEAR.mask();
/// `COMMAND` bit: convert the tile into the C bank when done.
pub const CMD_EMIT: u32 = cmd::EMIT.mask();

/// Builds a `COMMAND` word.
pub const fn command(a_bank: u8, b_bank: u8, c_bank: u8, clear: bool, emit: bool) -> u32 {
    cmd::A_BANK.put(a_bank as u32)
        | cmd::B_BANK.put(b_bank as u32)
        | cmd::C_BANK.put(c_bank as u32)
        | cmd::CLEAR.put(clear as u32)
        | cmd::EMIT.put(emit as u32)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::field::disjoint;
    use std::format;

    #[test]
    fn layouts_do_not_overlap_and_registers_are_unique() {
        assert!(disjoint(&config::FIELDS));
        assert!(disjoint(&status::FIELDS));
        assert!(disjoint(&cmd::FIELDS));
        assert!(disjoint(&gcmd::FIELDS));
        for (i, a) in REGISTERS.iter().enumerate() {
            assert!(REGISTERS[i + 1..]
                .iter()
                .all(|b| b.addr != a.addr && b.name != a.name));
        }
    }

    #[test]
    fn shift_field_states_the_contracts_shift_range() {
        // The guide's register table prints this text: it must name `numeric::MAX_SHIFT`, and
        // the field must hold it.
        let range = format!("0..={}", crate::numeric::MAX_SHIFT);
        assert!(
            value::SHIFT.meaning.contains(&range),
            "{}",
            value::SHIFT.meaning
        );
        assert!(value::SHIFT.max() >= crate::numeric::MAX_SHIFT);
    }

    #[test]
    fn words_are_built_from_the_fields() {
        assert_eq!(command(1, 0, 1, true, false), 0b0_1101);
        assert_eq!(
            gather_command(300, 1, LaneMode::Keep, true),
            300 | 1 << 17 | 2 << 18 | 1 << 20
        );
        assert_eq!(STATUS_GATHER_B, 16);
    }
}
