//! One test body, `common::conformance` (random shapes, every rounding mode, saturating
//! values, each result compared bit for bit with the golden model), run on every `Device`
//! backend.
//!
//! Backends that were not built (no Verilator on this machine) are skipped with a message.

use systole_core::{ArrayConfig, Rounding};
use systole_device::{self as device, Device, DeviceError};
use systole_golden::{OutputSpec, QMatrix};

mod common;
use common::conformance::{conformance, Plan, QUICK};

/// Opens `spec` at `size`, or says why the backend is not in this build.
fn open(spec: &str, size: usize) -> Option<Box<dyn Device>> {
    open_config(spec, ArrayConfig::square(size))
}

/// Opens `spec` with `config`, or says why the backend is not in this build.
fn open_config(spec: &str, config: ArrayConfig) -> Option<Box<dyn Device>> {
    let (n, w) = (config.size, config.word_bits);
    match device::open(spec, config) {
        Ok(d) => Some(d),
        Err(e @ DeviceError::NotBuilt { .. }) => {
            eprintln!("SKIPPED {spec} {n}x{n}, {w}-bit words: {e}");
            None
        }
        Err(e) => panic!("{spec}: {}", common::chain(&e)),
    }
}

fn run(spec: &str, size: usize, plan: &Plan) {
    if let Some(mut dev) = open(spec, size) {
        conformance(dev.as_mut(), plan);
    }
}

/// The array of `size` at `W`-bit words with its conv unit (the default 32k-word map, whose
/// words are `W` bits too): the configuration `conv_conformance` runs its body on at `W`, so
/// one model Verilated at run time (and cached) serves both.
fn at_width(size: usize, word_bits: u32) -> ArrayConfig {
    ArrayConfig::square(size).with_word_bits(word_bits)
}

/// The body at `W` on `spec`; returns the device for more checks.
fn run_at(spec: &str, size: usize, word_bits: u32, plan: &Plan) -> Option<Box<dyn Device>> {
    let mut dev = open_config(spec, at_width(size, word_bits))?;
    conformance(dev.as_mut(), plan);
    Some(dev)
}

#[test]
fn golden_4x4() {
    run("golden", 4, &QUICK);
}

#[test]
fn golden_8x8() {
    run("golden", 8, &QUICK);
}

#[test]
fn verilator_4x4() {
    run("verilator", 4, &QUICK);
}

#[test]
fn verilator_8x8() {
    run(
        "verilator",
        8,
        &Plan {
            seed: 0x5EED_0002,
            ..QUICK
        },
    );
}

#[test]
#[ignore = "16x16 model: slower; run with --ignored"]
fn verilator_16x16() {
    run(
        "verilator",
        16,
        &Plan {
            max_mn: 40,
            ..QUICK
        },
    );
}

#[test]
#[ignore = "large shapes: seconds of simulation; run with --ignored"]
fn verilator_large_shapes() {
    let plan = Plan {
        cases: 6,
        max_mn: 100,
        max_k: 1600,
        seed: 0x5EED_0003,
    };
    for size in [4, 8, 16] {
        run("verilator", size, &plan);
    }
}

#[test]
fn golden_4x4_at_8_and_12_bits() {
    for w in [8, 12] {
        run_at("golden", 4, w, &QUICK);
    }
}

/// The array built at 8-bit words, Verilated at run time (cached after its first build),
/// bit for bit against the golden model at 8 bits; its CONFIG word says 8 bits. Then the serial
/// backend at 8 bits on the same model (one Verilation for both): the firmware's frame server
/// on a pty over it, its CONFIG word read by the host.
#[test]
fn verilator_and_serial_board_4x4_at_8_bits() {
    if let Some(dev) = run_at("verilator", 4, 8, &QUICK) {
        assert_eq!(dev.config().word_bits, 8);
    } else {
        return;
    }
    serial_board_at(8, 0x5EED_0804);
}

/// The serial backend at `word_bits` over the 4x4 array built at that width: the firmware's
/// frame server on a pty over it, its CONFIG word read by the host.
fn serial_board_at(word_bits: u32, seed: u64) {
    let config = at_width(4, word_bits);
    let board = systole_device::board_sim::SimBoard::spawn_verilated(config)
        .unwrap_or_else(|e| panic!("simulated board: {e}"));
    let spec = format!("serial:{}", board.path().display());
    let mut dev = device::open(&spec, config).unwrap_or_else(|e| panic!("{spec}: {e}"));
    assert_eq!(dev.config().word_bits, word_bits);
    let t = std::time::Instant::now();
    let plan = Plan { seed, ..QUICK };
    conformance(dev.as_mut(), &plan);
    eprintln!(
        "serial board at {word_bits} bits: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    drop(dev);
    board.close().expect("the board reported an error");
}

#[test]
#[ignore = "Verilates the 4x4 array at 12 bits at run time; run with --ignored"]
fn serial_board_4x4_at_12_bits() {
    serial_board_at(12, 0x5EED_0C04);
}

#[test]
#[ignore = "Verilates the 8x8 array at 8 and 12 bits at run time (23 s for both, cold); run with --ignored"]
fn verilator_8x8_at_8_and_12_bits() {
    for (w, seed) in [(8, 0x5EED_0108), (12, 0x5EED_010C)] {
        let plan = Plan { seed, ..QUICK };
        run_at("verilator", 8, w, &plan);
    }
}

#[test]
#[ignore = "Verilates the 4x4 array at 12 bits at run time; run with --ignored"]
fn verilator_4x4_at_12_bits() {
    run_at("verilator", 4, 12, &QUICK);
}

/// The array at 8 bits with two multiplies per DSP48E1 (`ArrayConfig::dsp_pack`, the PE
/// pairs of `systole_hdl::pe_pair`): bit for bit the golden model's results, in exactly the
/// cycles of the unpacked array at 8 bits (the same body and seed on both), 4x4 and 8x8.
#[test]
#[ignore = "Verilates the packed 4x4 and 8x8 and the unpacked 8x8 arrays at 8 bits at run time (about 35 s cold); run with --ignored"]
fn verilator_packed_at_8_bits_in_the_unpacked_cycles() {
    for (size, seed) in [(4, 0x5EED_0A04), (8, 0x5EED_0A08)] {
        let plan = Plan { seed, ..QUICK };
        let packed = at_width(size, 8).with_dsp_pack(true);
        let Some(mut dev) = open_config("verilator", packed) else {
            return;
        };
        assert!(dev.config().dsp_pack);
        conformance(dev.as_mut(), &plan);
        let cycles = dev.stats().cycles;
        let mut plain = open_config("verilator", at_width(size, 8)).unwrap();
        conformance(plain.as_mut(), &plan);
        assert!(cycles > 0);
        assert_eq!(
            cycles,
            plain.stats().cycles,
            "{size}x{size}: packed vs unpacked cycles"
        );
    }
}

/// Words outside the 8-bit range are refused by an 8-bit device before its ports would drop
/// their high bits, as the golden model at 8 bits refuses them.
#[test]
fn an_8_bit_device_refuses_wider_words() {
    let a = QMatrix::from_vec(1, 1, 0, vec![200]).unwrap();
    let spec = OutputSpec {
        frac: 0,
        rounding: Rounding::NearestEven,
        seed: 1,
    };
    for name in ["golden", "verilator"] {
        let Some(mut dev) = open_config(name, at_width(4, 8)) else {
            continue;
        };
        let e = dev.matmul(&a, &a, &spec).unwrap_err();
        assert!(matches!(e, DeviceError::Numeric(_)), "{name}: {e:?}");
        assert!(e.to_string().contains("200"), "{name}: {e}");
    }
}

/// A device that is wrong in one bit of one output: the body must catch it.
struct OneBitOff(Box<dyn Device>);

impl Device for OneBitOff {
    fn name(&self) -> String {
        "one-bit-off".into()
    }
    fn config(&self) -> &ArrayConfig {
        self.0.config()
    }
    fn matmul(
        &mut self,
        a: &QMatrix,
        b: &QMatrix,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        let mut c = self.0.matmul(a, b, out)?;
        let last = c.data.len() - 1;
        c.data[last] ^= 1;
        Ok(c)
    }
    fn stats(&self) -> device::DeviceStats {
        self.0.stats()
    }
    fn reset_stats(&mut self) {
        self.0.reset_stats()
    }
}

#[test]
#[should_panic(expected = "golden model says")]
fn the_body_catches_a_one_bit_error() {
    let inner = device::open("golden", ArrayConfig::square(4)).unwrap();
    conformance(&mut OneBitOff(inner), &QUICK);
}

/// The serial backend end to end: the host's tile driver, frames over a pseudo-terminal, the
/// firmware's frame server and a Verilated 4x4 array behind it.
#[test]
fn serial_sim_board_4x4() {
    let config = ArrayConfig::square(4);
    let board = match systole_device::board_sim::SimBoard::spawn_verilated(config) {
        Ok(b) => b,
        Err(e @ DeviceError::NotBuilt { .. }) => {
            eprintln!("SKIPPED serial 4x4 (simulated board): {e}");
            return;
        }
        Err(e) => panic!("simulated board: {e}"),
    };
    let spec = format!("serial:{}", board.path().display());
    let mut dev = device::open(&spec, config).unwrap_or_else(|e| panic!("{spec}: {e}"));
    conformance(
        dev.as_mut(),
        &Plan {
            seed: 0x5EED_0004,
            ..QUICK
        },
    );
    drop(dev);
    board.close().expect("the board reported an error");
}

/// The CPU-less bridge image (UART, byte bridge and a 4x4 array: the Verilog `systole
/// bitstream` puts on a board) simulated through its serial pins and served on a pty, driven
/// by the bridge backend exactly as a flashed board on /dev/ttyUSB1 would be. The UART moves
/// every operand bit by bit (8 clocks per bit), so the plan is small; K past one bank is kept.
#[test]
fn bridge_image_4x4() {
    let Some((board, mut dev)) = common::bridge_image() else {
        return;
    };
    conformance(
        dev.as_mut(),
        &Plan {
            cases: 4,
            max_mn: 7,
            max_k: 513,
            seed: 0x5EED_0005,
        },
    );
    drop(dev);
    board.close().expect("the bridge image reported an error");
}

/// The SoC image: the firmware's frame server on the Verilated VexRiscv CPU, driven only through
/// the UART pins (16 clocks per bit) over a pty, as `systole-board-sim --soc` serves it.
#[test]
fn soc_firmware_4x4() {
    let Some((board, mut dev)) = common::soc_image() else {
        return;
    };
    let t = std::time::Instant::now();
    let words = conformance(
        &mut dev,
        &Plan {
            seed: 0x5EED_0006,
            ..QUICK
        },
    );
    eprintln!("soc_firmware_4x4: {:.1} s", t.elapsed().as_secs_f64());
    // The firmware ran every product that fits its tensor store itself (board operations);
    // only the larger ones were driven from the host.
    let store = systole_core::soc::TENSOR_STORE_BYTES as usize / 2;
    let fit = words.iter().filter(|&&w| w <= store).count() as u64;
    let st = dev.stats();
    assert!(
        fit > 0 && fit < st.ops,
        "the plan has products on both paths"
    );
    assert_eq!(st.board_ops, fit, "{st:?}");
    common::check_stack(&mut dev, "soc_firmware_4x4");
    drop(dev);
    board.close().expect("the SoC image reported an error");
}

/// The plan of the bridge image (every operand bit by bit over the UART): small, K past one
/// bank kept.
const BRIDGE_PLAN: Plan = Plan {
    cases: 4,
    max_mn: 7,
    max_k: 513,
    seed: 0x5EED_0005,
};

/// The bridge image at `W` bits (its array built at `W`, Verilated at run time; the bridge
/// moves each word sign-extended in 16 bits), through the bridge backend at `W`.
fn bridge_image_at(word_bits: u32, seed: u64) {
    let Some((board, mut dev)) = common::bridge_image_at(word_bits) else {
        return;
    };
    assert_eq!(dev.config().word_bits, word_bits);
    let t = std::time::Instant::now();
    conformance(
        dev.as_mut(),
        &Plan {
            seed,
            ..BRIDGE_PLAN
        },
    );
    eprintln!(
        "bridge image at {word_bits} bits: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    drop(dev);
    board.close().expect("the bridge image reported an error");
}

/// The bridge image with its 4x4 array at 8-bit words, bit for bit against the golden model at
/// 8 bits (the image Verilated at run time, cached after its first build).
#[test]
fn bridge_image_4x4_at_8_bits() {
    bridge_image_at(8, 0x5EED_0805);
}

#[test]
#[ignore = "Verilates the bridge image at 12 bits at run time; run with --ignored"]
fn bridge_image_4x4_at_12_bits() {
    bridge_image_at(12, 0x5EED_0C05);
}

#[test]
#[ignore = "Verilates the SoC image at 8 bits at run time (minutes the first time); run with --ignored"]
fn soc_firmware_4x4_at_8_bits() {
    soc_firmware_at(8, 0x5EED_0806);
}

#[test]
#[ignore = "Verilates the SoC image at 12 bits at run time (minutes the first time); run with --ignored"]
fn soc_firmware_4x4_at_12_bits() {
    soc_firmware_at(12, 0x5EED_0C06);
}

/// The SoC image with its 4x4 array at `word_bits`: the firmware (the same image; it reads W
/// from CONFIG) serving products on the CPU (by the row DMA), its C stage sign-extending each
/// W-bit word into a 16-bit lane, bit for bit against the golden model at W.
fn soc_firmware_at(word_bits: u32, seed: u64) {
    let name = format!("soc_firmware_4x4_at_{word_bits}_bits");
    let Some((board, mut dev)) = common::soc_image_at(word_bits) else {
        return;
    };
    assert_eq!(dev.config().word_bits, word_bits);
    let t = std::time::Instant::now();
    let plan = Plan { seed, ..QUICK };
    conformance(&mut dev, &plan);
    eprintln!("{name}: {:.1} s", t.elapsed().as_secs_f64());
    assert!(dev.stats().board_ops > 0, "no product ran on the board");
    common::check_stack(&mut dev, &name);
    drop(dev);
    board.close().expect("the SoC image reported an error");
}

/// A board of another word width than the one asked for is refused naming both (its CONFIG
/// word carries W): the 16-bit bridge image and the 16-bit serial board opened at 8 bits.
#[test]
fn a_board_of_another_word_width_is_refused() {
    use systole_device::board_sim::SimBoard;
    let boards = [
        ("bridge", SimBoard::spawn_bridge_image()),
        ("serial", SimBoard::spawn_verilated(ArrayConfig::square(4))),
    ];
    for (kind, board) in boards {
        let board = match board {
            Ok(b) => b,
            Err(e) => {
                eprintln!("SKIPPED {kind}: {e}");
                continue;
            }
        };
        let spec = format!("{kind}:{}", board.path().display());
        let Err(e) = device::open(&spec, at_width(4, 8)) else {
            panic!("{spec}: a 16-bit board opened as an 8-bit one");
        };
        let text = common::chain(&e);
        assert!(
            text.contains("array of 16-bit words") && text.contains("array of 8-bit words"),
            "{spec}: {text}"
        );
        board.close().expect("the board reported an error");
    }
}
