//! Memory map of the SoC: a soft RISC-V CPU (VexRiscv, RV32IMAC) beside the accelerator on one
//! board, the firmware running on the CPU. The one definition of every address the SoC's bus
//! decodes; the SoC's HDL, the firmware's MMIO layer and the hardware guide all read it.
//!
//! * On-chip RAM from [`RAM_BASE`]: holds the firmware image (code, data, stack) and the
//!   CPU resets to [`RESET_VECTOR`]. Its size is a build parameter of the SoC (per board:
//!   [`BASE_RAM_BYTES`] or [`TRAINING_RAM_BYTES`]), readable at [`SYS_RAM_BYTES`].
//! * Peripherals at or above [`MMIO_BASE`] (address bit 31 set): VexRiscv's data cache passes
//!   such accesses straight to the bus, so every read and write reaches the device. Every
//!   address in the MMIO range answers (unmapped reads return 0, unmapped writes are ignored):
//!   the core ignores bus errors, so an address that never answered would hang it.
//! * Registers are 32-bit words; firmware uses 32-bit loads and stores only.
//!
//! Moving rows: the accelerator's buffer ports move one row of `size` 16-bit lanes per clock (a
//! `W`-bit word sign-extended in its lane; the array's ports take its low `W` bits).
//! The CPU fills the row stage ([`ROW_STAGE`], two words per 32-bit register, lane `2i` in bits
//! 15:0 and lane `2i + 1` in bits 31:16), then writes [`ROW_CMD`] to commit it into an A or B
//! bank row or a feature-map row in one clock. A C row read is a [`ROW_CMD`] with
//! [`ROW_KIND_READ_C`]; the bus holds that write until the row is captured, and the row is then
//! readable at [`C_STAGE`] in the same packing.

use crate::field::Field;

/// First byte of on-chip RAM.
pub const RAM_BASE: u32 = 0x0000_0000;
/// Where the CPU starts after reset (`externalResetVector`).
pub const RESET_VECTOR: u32 = RAM_BASE;
/// RAM the firmware image is linked for, in bytes: its code, statics and stack lie in the
/// first `BASE_RAM_BYTES` of every SoC's RAM, so the serving image runs on every board (the
/// training image links for [`TRAINING_RAM_BYTES`], its heap between its statics and its stack). The RAM of the SoC on the A7-35T boards (Arty A7-35T, Basys 3), whose block RAM the conv
/// unit's feature maps take (an 8x8 SoC with 4096 map words uses 91 of their 100 RAMB18 with it).
pub const BASE_RAM_BYTES: u32 = 64 * 1024;
/// RAM of the SoC on the boards whose block RAM holds a training run (the A7-100T boards: Arty
/// A7-100T, Nexys A7-100T; 270 RAMB18): 128 RAMB18, so an 8x8 SoC with 4096 map words takes 187
/// of them (with 8192 words 219). Room above the image for the step's heap and the digits
/// training set packed at 5 bits a pixel, 41 B a record (`cargo run -p systole-soc-image --bin step-budget`).
pub const TRAINING_RAM_BYTES: u32 = 256 * 1024;
/// RAM of the simulated SoC (`systole-board-sim --soc`): a board that can hold a training run.
pub const SIM_RAM_BYTES: u32 = TRAINING_RAM_BYTES;

/// Bytes of the firmware's tensor store (operands and results of the board operations,
/// `systole_firmware::store`): a static array in RAM beside the image and the stack, so the
/// image's budget counts it (in `bss`) and the build refuses an image that does not fit.
/// 14.5 KiB (7,424 words) holds a digits-MLP training step's operands and its largest result
/// (at most about 6,800 words at once, batch 32); with the image (about 42 KB with the tile
/// and conv drivers, the row DMA's path and the word-width checks) and the 7.5 KiB stack it
/// fills the image's 64 KiB ([`BASE_RAM_BYTES`]) but for a few hundred bytes.
pub const TENSOR_STORE_BYTES: u32 = 14 * 1024 + 512;

/// Bytes of the training image's tensor store (it links for [`TRAINING_RAM_BYTES`]): 2 KiB, so
/// that its heap holds the digits training set and test split resident beside the MLP's step
/// (8 KiB before the test split moved to the board; a host-driven product larger than the
/// store runs register by register, as on any board).
pub const TRAINING_TENSOR_STORE_BYTES: u32 = 2 * 1024;

/// The tensor store of the image linked for `ram_bytes` of RAM: [`TRAINING_TENSOR_STORE_BYTES`]
/// for the training image, else [`TENSOR_STORE_BYTES`].
pub const fn tensor_store_bytes(ram_bytes: u32) -> u32 {
    if ram_bytes >= TRAINING_RAM_BYTES {
        TRAINING_TENSOR_STORE_BYTES
    } else {
        TENSOR_STORE_BYTES
    }
}

/// First MMIO address: bit 31 set bypasses the CPU's data cache.
pub const MMIO_BASE: u32 = 0x8000_0000;

/// UART data: a write sends the low byte (only when [`UART_TX_READY`] is set); a read returns the
/// oldest received byte in bits 7:0 and removes it (only meaningful when [`UART_RX_VALID`] is set).
pub const UART_DATA: u32 = 0x8000_0000;
/// UART status (read-only): [`UART_TX_READY`], [`UART_RX_VALID`], [`UART_RX_OVERRUN`].
pub const UART_STATUS: u32 = 0x8000_0004;
/// The transmitter takes a byte now.
pub const UART_TX_READY: Field = Field::new("TX_READY", 0, 1, "a write to UART_DATA is taken now");
/// A received byte waits in [`UART_DATA`].
pub const UART_RX_VALID: Field = Field::new("RX_VALID", 1, 1, "a received byte waits in UART_DATA");
/// A received byte was lost since the last status read (sticky, cleared by reading status).
pub const UART_RX_OVERRUN: Field = Field::new(
    "RX_OVERRUN",
    2,
    1,
    "a received byte was lost (cleared by this read)",
);

/// Bytes the UART's receive FIFO holds (a power of two). The host sends one request frame and
/// waits for its answer, so a FIFO that holds the largest frame (the firmware checks this
/// against its frame capacity at compile time) waits out a firmware busy with the previous
/// request and no byte is lost. One block RAM on an FPGA.
pub const RX_FIFO_BYTES: usize = 2048;

/// Cycle counter, low word (read-only). Reading it latches the high word into [`TIMER_HI`].
pub const TIMER_LO: u32 = 0x8000_1000;
/// Cycle counter, high word as latched by the last read of [`TIMER_LO`].
pub const TIMER_HI: u32 = 0x8000_1004;

/// SoC identification (read-only): [`SOC_ID_VALUE`].
pub const SYS_ID: u32 = 0x8000_2000;
/// On-chip RAM size in bytes (read-only).
pub const SYS_RAM_BYTES: u32 = 0x8000_2004;
/// Clock frequency in Hz (read-only).
pub const SYS_CLOCK_HZ: u32 = 0x8000_2008;
/// Writing [`SYS_RESET_KEY`] resets the CPU (the firmware's panic handler does this after
/// reporting the reason over the UART); any other value is ignored.
pub const SYS_RESET: u32 = 0x8000_200C;
/// Value of [`SYS_ID`]: ASCII "SSOC".
pub const SOC_ID_VALUE: u32 = 0x5353_4F43;
/// The value that [`SYS_RESET`] acts on.
pub const SYS_RESET_KEY: u32 = 0x5245_5354;
/// What this SoC has beyond the base map (read-only): [`SYS_FEATURE_DMA`], [`SYS_FEATURE_MM`]. A SoC built before
/// this register existed reads 0 here (an unmapped MMIO address), so firmware reading a bit as
/// clear falls back to what every SoC has.
pub const SYS_FEATURES: u32 = 0x8000_2010;
/// [`SYS_FEATURES`]: the row DMA ([`DMA_CMD`] and its registers) is built.
pub const SYS_FEATURE_DMA: Field = Field::new("DMA", 0, 1, "the row DMA (DMA_*) is built");

/// Accelerator register `r` (see [`crate::regmap`]) is at `ACC_REGS + 4 * r`.
pub const ACC_REGS: u32 = 0x8001_0000;
/// Row stage, written by the CPU: `MAX_SIZE / 2` 32-bit words, word `i` holding lanes `2i`
/// (bits 15:0) and `2i + 1` (bits 31:16).
pub const ROW_STAGE: u32 = 0x8002_0000;
/// Row command (write-only): [`ROW_CMD_ROW`], [`ROW_CMD_BANK`], [`ROW_CMD_KIND`].
pub const ROW_CMD: u32 = 0x8002_0100;
/// C stage, read by the CPU after a [`ROW_KIND_READ_C`] command, packed as [`ROW_STAGE`].
pub const C_STAGE: u32 = 0x8002_0200;

/// Row within the bank (A/B: `< buffer_depth`; C: `< size`; feature map: word address / row width).
pub const ROW_CMD_ROW: Field = Field::new(
    "ROW",
    0,
    16,
    "row index (feature map: word address / row width)",
);
/// Bank 0 or 1 (ignored for feature-map rows).
pub const ROW_CMD_BANK: Field = Field::new("BANK", 16, 1, "bank 0 or 1");
/// What the command does: one of the `ROW_KIND_*` values.
pub const ROW_CMD_KIND: Field = Field::new(
    "KIND",
    20,
    2,
    "0 write A, 1 write B, 2 read C, 3 write feature map",
);
/// [`ROW_CMD_KIND`]: write the row stage into an A bank row.
pub const ROW_KIND_WRITE_A: u32 = 0;
/// [`ROW_CMD_KIND`]: write the row stage into a B bank row.
pub const ROW_KIND_WRITE_B: u32 = 1;
/// [`ROW_CMD_KIND`]: read a C row into the C stage.
pub const ROW_KIND_READ_C: u32 = 2;
/// [`ROW_CMD_KIND`]: write the first `fm_row_words` lanes of the row stage into a feature-map row.
pub const ROW_KIND_WRITE_FM: u32 = 3;

/// Row DMA: byte address in RAM of the first element (row 0, lane 0) of the next [`DMA_CMD`];
/// elements are 16-bit words, so bit 0 is ignored. Addresses wrap at the RAM's size, as the
/// CPU's do.
pub const DMA_ADDR: u32 = 0x8003_0000;
/// Row DMA: elements (not bytes) from one row's lane 0 to the next row's, modulo 2^32 (so a
/// negative step is its two's complement).
pub const DMA_ROW_STEP: u32 = 0x8003_0004;
/// Row DMA: elements from one lane to the next within a row, modulo 2^32.
pub const DMA_LANE_STEP: u32 = 0x8003_0008;
/// Row DMA: lanes that move a memory element (bits 15:0; values above the array size act as
/// the size). A row written into a buffer holds 0 in the other lanes; a C row writes only
/// these lanes to RAM.
pub const DMA_LANES: u32 = 0x8003_000C;
/// Row DMA: rows the next [`DMA_CMD`] moves (bits 15:0; 0 moves none).
pub const DMA_ROWS: u32 = 0x8003_0010;
/// Row DMA command (write-only), the layout of [`ROW_CMD`]: [`ROW_CMD_ROW`] is the first
/// buffer row (row `r` of the transfer goes to or comes from buffer row `ROW + r`),
/// [`ROW_CMD_BANK`] the bank and [`ROW_CMD_KIND`] what moves: `ROW_KIND_WRITE_A/B/FM` read
/// elements from RAM into buffer rows, [`ROW_KIND_READ_C`] writes C rows into RAM. Element
/// `(r, l)` is at byte `DMA_ADDR + 2 * (r * DMA_ROW_STEP + l * DMA_LANE_STEP)`. The bus holds
/// this write until the last row has moved (the CPU's data bus waits; the RAM's data port is
/// the DMA's meanwhile), so the next instruction sees the rows in the buffers or in RAM. The
/// registers above keep their values. The row stage and C stage are left holding the DMA's
/// last row.
pub const DMA_CMD: u32 = 0x8003_0014;
/// The row DMA's registers, for tables and tests: `(name, address, what it holds)`.
pub const DMA_REGISTERS: [(&str, u32, &str); 6] = [
    (
        "DMA_ADDR",
        DMA_ADDR,
        "byte address of element (0, 0) in RAM (bit 0 ignored)",
    ),
    (
        "DMA_ROW_STEP",
        DMA_ROW_STEP,
        "elements between rows, modulo 2^32",
    ),
    (
        "DMA_LANE_STEP",
        DMA_LANE_STEP,
        "elements between lanes, modulo 2^32",
    ),
    (
        "DMA_LANES",
        DMA_LANES,
        "lanes moved (15:0, at most the array size)",
    ),
    ("DMA_ROWS", DMA_ROWS, "rows moved (15:0)"),
    (
        "DMA_CMD",
        DMA_CMD,
        "starts a transfer, ROW_CMD's layout; held until done",
    ),
];
/// Bits of [`DMA_LANES`] and [`DMA_ROWS`] the DMA reads.
pub const DMA_COUNT: Field = Field::new("COUNT", 0, 16, "lanes or rows");

/// [`SYS_FEATURES`]: the product sequencer ([`MM_CMD`] and its registers) is built.
pub const SYS_FEATURE_MM: Field = Field::new("MM", 1, 1, "the product sequencer (MM_*) is built");

/// Product sequencer: byte address in RAM of `op(A)[0][0]`, the `m x k` left operand (bit 0
/// ignored). Element `op(A)[i][k]` is at byte `MM_A_ADDR + 2 * (i * MM_A_STRIDE_I + k *
/// MM_A_STRIDE_K)`, so `A` stored transposed is the same product with the two strides swapped.
pub const MM_A_ADDR: u32 = 0x8004_0000;
/// Product sequencer: elements between `op(A)`'s rows (`i`), modulo 2^32.
pub const MM_A_STRIDE_I: u32 = 0x8004_0004;
/// Product sequencer: elements between `op(A)`'s columns (`k`), modulo 2^32.
pub const MM_A_STRIDE_K: u32 = 0x8004_0008;
/// Product sequencer: byte address of `op(B)[0][0]`, the `k x n` right operand.
pub const MM_B_ADDR: u32 = 0x8004_000C;
/// Product sequencer: elements between `op(B)`'s rows (`k`).
pub const MM_B_STRIDE_K: u32 = 0x8004_0010;
/// Product sequencer: elements between `op(B)`'s columns (`j`).
pub const MM_B_STRIDE_J: u32 = 0x8004_0014;
/// Product sequencer: byte address of `C[0][0]`, the `m x n` result.
pub const MM_C_ADDR: u32 = 0x8004_0018;
/// Product sequencer: elements between `C`'s rows (`i`).
pub const MM_C_STRIDE_I: u32 = 0x8004_001C;
/// Product sequencer: elements between `C`'s columns (`j`).
pub const MM_C_STRIDE_J: u32 = 0x8004_0020;
/// Product sequencer: rows `m` of `op(A)` and `C` ([`MM_SIZE_MN`]).
pub const MM_M: u32 = 0x8004_0024;
/// Product sequencer: columns `n` of `op(B)` and `C` ([`MM_SIZE_MN`]).
pub const MM_N: u32 = 0x8004_0028;
/// Product sequencer: the dot-product length `k` ([`MM_SIZE_K`]).
pub const MM_K: u32 = 0x8004_002C;
/// Product sequencer: the output conversion, [`MM_SHIFT`] and [`MM_ROUNDING`].
pub const MM_CONVERT: u32 = 0x8004_0030;
/// Product sequencer: the operation seed; tile `(i0, j0)` is converted with
/// `tile_seed(MM_SEED, i0, j0)` (`crate::numeric::tile_seed`), computed by the sequencer.
pub const MM_SEED: u32 = 0x8004_0034;
/// Product sequencer command (write-only, any value): runs the whole product the registers
/// above describe. The bus holds this store until the product is in RAM (or refused): the
/// CPU's data bus waits, so no other command can reach the sequencer, the DMA or the array
/// while it runs.
pub const MM_CMD: u32 = 0x8004_0038;
/// Product sequencer status (read-only): the outcome of the last [`MM_CMD`], its error bits
/// ([`MM_ERR_SIZE`], [`MM_ERR_CONVERT`], [`MM_ERR_DEVICE`]) all 0 when the product is in RAM.
pub const MM_STATUS: u32 = 0x8004_003C;
/// [`MM_M`], [`MM_N`]: the size, 1..=65535.
pub const MM_SIZE_MN: Field = Field::new("SIZE", 0, 16, "m or n, 1..=65535");
/// [`MM_K`]: the dot-product length, 1..=`MAX_K`.
pub const MM_SIZE_K: Field = Field::new("SIZE", 0, 17, "k, 1..=MAX_K (131071)");
/// [`MM_CONVERT`]: the output right shift `frac_a + frac_b - frac_out`, 0..=32.
pub const MM_SHIFT: Field = Field::new("SHIFT", 0, 8, "output right shift 0..=32");
/// [`MM_CONVERT`]: the rounding code (0 truncate, 1 nearest-even, 2 stochastic).
pub const MM_ROUNDING: Field =
    Field::new("ROUNDING", 8, 8, "0 truncate, 1 nearest-even, 2 stochastic");
/// [`MM_STATUS`]: refused, `m`, `n` or `k` was 0 or past its field (the whole 32-bit value
/// is checked, so `k` above `MAX_K` is refused); nothing moved.
pub const MM_ERR_SIZE: Field = Field::new(
    "ERR_SIZE",
    0,
    1,
    "refused: m, n or k is 0 or past its field (k > MAX_K); nothing moved",
);
/// [`MM_STATUS`]: refused, a shift above 32 or a rounding code above 2 (bits 7:0 and 15:8 of
/// [`MM_CONVERT`] checked whole); nothing moved.
pub const MM_ERR_CONVERT: Field = Field::new(
    "ERR_CONVERT",
    1,
    1,
    "refused: shift > 32 or rounding > 2; nothing moved",
);
/// [`MM_STATUS`]: the array refused a command (its `STATUS.error`); the product stopped there
/// and `C` is incomplete.
pub const MM_ERR_DEVICE: Field = Field::new(
    "ERR_DEVICE",
    2,
    1,
    "the array set STATUS.error: stopped, C incomplete",
);
/// The product sequencer's registers, for tables and tests: `(name, address, what it holds)`.
pub const MM_REGISTERS: [(&str, u32, &str); 16] = [
    (
        "MM_A_ADDR",
        MM_A_ADDR,
        "byte address of op(A)[0][0] (bit 0 ignored)",
    ),
    (
        "MM_A_STRIDE_I",
        MM_A_STRIDE_I,
        "elements between op(A)'s rows i",
    ),
    (
        "MM_A_STRIDE_K",
        MM_A_STRIDE_K,
        "elements between op(A)'s columns k",
    ),
    ("MM_B_ADDR", MM_B_ADDR, "byte address of op(B)[0][0]"),
    (
        "MM_B_STRIDE_K",
        MM_B_STRIDE_K,
        "elements between op(B)'s rows k",
    ),
    (
        "MM_B_STRIDE_J",
        MM_B_STRIDE_J,
        "elements between op(B)'s columns j",
    ),
    ("MM_C_ADDR", MM_C_ADDR, "byte address of C[0][0]"),
    (
        "MM_C_STRIDE_I",
        MM_C_STRIDE_I,
        "elements between C's rows i",
    ),
    (
        "MM_C_STRIDE_J",
        MM_C_STRIDE_J,
        "elements between C's columns j",
    ),
    ("MM_M", MM_M, "rows m of op(A) and C (15:0)"),
    ("MM_N", MM_N, "columns n of op(B) and C (15:0)"),
    ("MM_K", MM_K, "dot-product length k (16:0)"),
    ("MM_CONVERT", MM_CONVERT, "SHIFT (7:0), ROUNDING (15:8)"),
    ("MM_SEED", MM_SEED, "operation seed"),
    ("MM_CMD", MM_CMD, "runs the product; held until done"),
    (
        "MM_STATUS",
        MM_STATUS,
        "read-only: the last product's error bits",
    ),
];

/// Number of 32-bit words of the row and C stages.
pub const STAGE_WORDS: u32 = (crate::config::MAX_SIZE as u32).div_ceil(2);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_do_not_overlap_and_mmio_bypasses_the_cache() {
        let regions = [
            (UART_DATA, 8),
            (TIMER_LO, 8),
            (SYS_ID, 16),
            (ACC_REGS, 4 * 256),
            (ROW_STAGE, 4 * STAGE_WORDS),
            (ROW_CMD, 4),
            (C_STAGE, 4 * STAGE_WORDS),
            (SYS_FEATURES, 4),
            (DMA_ADDR, 4 * DMA_REGISTERS.len() as u32),
            (MM_A_ADDR, 4 * MM_REGISTERS.len() as u32),
        ];
        for (i, (_, addr, _)) in MM_REGISTERS.iter().enumerate() {
            assert_eq!(
                *addr,
                MM_A_ADDR + 4 * i as u32,
                "MM registers are consecutive words"
            );
        }
        for (i, (_, addr, _)) in DMA_REGISTERS.iter().enumerate() {
            assert_eq!(
                *addr,
                DMA_ADDR + 4 * i as u32,
                "DMA registers are consecutive words"
            );
        }
        for (i, &(a, la)) in regions.iter().enumerate() {
            assert!(a >= MMIO_BASE, "{a:#x} is below MMIO_BASE");
            for &(b, lb) in &regions[i + 1..] {
                assert!(a + la <= b || b + lb <= a, "{a:#x} overlaps {b:#x}");
            }
        }
        const { assert!(RAM_BASE + TRAINING_RAM_BYTES <= MMIO_BASE) };
        const { assert!(BASE_RAM_BYTES <= SIM_RAM_BYTES && SIM_RAM_BYTES.is_power_of_two()) };
    }
}
