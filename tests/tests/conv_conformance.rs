//! One convolution test body, [`conv_conformance`], run on every `Device` backend: the three
//! training ops on random geometries (channels and sizes that are not multiples of the array
//! size, kernels 1, 3 and 5, strides, padding, batches), every rounding mode, extreme values,
//! each result compared bit for bit with the golden model's convolution, at the device's word
//! width `W` (the conv unit is built at every `W`: its feature map holds `W`-bit words).
//!
//! Backends that were not built (no Verilator on this machine) are skipped with a message.

use systole_core::numeric::max_frac;
use systole_core::{ArrayConfig, Rounding};
use systole_device::{self as device, Device, DeviceError};
use systole_golden::conv::{self, Conv2dGeom, ConvGeom};
use systole_golden::OutputSpec;
use systole_golden::QMatrix;

mod common;
use common::Rng;

#[derive(Clone, Copy, Debug)]
enum Op {
    Forward,
    BackwardInput,
    BackwardWeights,
}

/// The test body every backend runs: `cases` random convolutions per op, at the device's `W`
/// (operands, formats and the golden model's `conv2d_*_at` at `W`; at 16 bits the draws of
/// before).
fn conv_conformance(dev: &mut dyn Device, cases: usize, seed: u64) {
    let tile = dev.config().size;
    let wb = dev.config().word_bits;
    let mut rng = Rng(seed);
    for case in 0..cases {
        for op in [Op::Forward, Op::BackwardInput, Op::BackwardWeights] {
            let kernel = [1, 3, 5][rng.below(3)];
            let pad = rng.below(kernel / 2 + 2);
            let min = kernel.saturating_sub(2 * pad).max(1);
            let g = Conv2dGeom {
                batch: 1 + rng.below(3),
                shape: ConvGeom {
                    in_ch: 1 + rng.below(2 * tile + 1),
                    in_h: min + rng.below(8),
                    in_w: min + rng.below(8),
                    out_ch: 1 + rng.below(2 * tile + 1),
                    kernel,
                    stride: 1 + rng.below(3),
                    pad,
                },
            };
            let frac_draw = 14.min(wb as usize);
            let (fa, fb) = (rng.below(frac_draw) as u32, rng.below(frac_draw) as u32);
            // x has fa fractional bits, dy and w have fb: the op's product has frac_in.
            let frac_in = match op {
                Op::Forward | Op::BackwardWeights => fa + fb,
                Op::BackwardInput => 2 * fb,
            };
            let spec = OutputSpec {
                frac: frac_in
                    .min(max_frac(wb))
                    .saturating_sub(rng.below(4) as u32),
                rounding: Rounding::ALL[(case + op as usize) % 3],
                seed: rng.next() as u32,
            };
            let x = rng.matrix_at(g.batch, g.in_ch * g.in_h * g.in_w, fa, wb);
            let dy = rng.matrix_at(g.batch, g.out_ch * g.out_h() * g.out_w(), fb, wb);
            let w = rng.matrix_at(g.out_ch, g.in_ch * kernel * kernel, fb, wb);
            let (want, got) = match op {
                Op::Forward => (
                    conv::conv2d_forward_at(&x, &w, &g, &spec, tile, wb),
                    dev.conv2d_forward(&x, &w, &g, &spec),
                ),
                Op::BackwardInput => (
                    conv::conv2d_backward_input_at(&dy, &w, &g, &spec, tile, wb),
                    dev.conv2d_backward_input(&dy, &w, &g, &spec),
                ),
                Op::BackwardWeights => (
                    conv::conv2d_backward_weights_at(&x, &dy, &g, &spec, tile, wb),
                    dev.conv2d_backward_weights(&x, &dy, &g, &spec),
                ),
            };
            let want = want.unwrap();
            let got = got
                .unwrap_or_else(|e| panic!("{}: {op:?} {g:?}: {}", dev.name(), common::chain(&e)));
            assert_eq!(
                (got.rows, got.cols, got.frac),
                (want.rows, want.cols, want.frac)
            );
            if let Some(i) = (0..want.data.len()).find(|&i| want.data[i] != got.data[i]) {
                panic!(
                    "{}: case {case} {op:?} {g:?} {:?}: output word {i} is {} but the golden model says {}",
                    dev.name(),
                    spec.rounding,
                    got.data[i],
                    want.data[i]
                );
            }
        }
    }
    // Bad shapes are errors, not panics.
    let g = Conv2dGeom {
        batch: 1,
        shape: ConvGeom {
            in_ch: 2,
            in_h: 5,
            in_w: 5,
            out_ch: 3,
            kernel: 3,
            stride: 1,
            pad: 1,
        },
    };
    let x = rng.matrix_at(1, 2 * 25, 4, wb);
    let w = rng.matrix_at(3, 2 * 9 + 1, 4, wb);
    let spec = OutputSpec {
        frac: 4,
        rounding: Rounding::NearestEven,
        seed: 1,
    };
    let bad = dev.conv2d_forward(&x, &w, &g, &spec);
    assert!(
        matches!(bad, Err(DeviceError::Numeric(_))),
        "{}: {bad:?}",
        dev.name()
    );
}

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

/// The `size` x `size` array with its conv unit (the default 32k-word map) at `W`-bit words:
/// the same configuration as `device_conformance`'s arrays at `W`, so one model Verilated at
/// run time (and cached) serves both.
fn at_width(size: usize, word_bits: u32) -> ArrayConfig {
    ArrayConfig::square(size).with_word_bits(word_bits)
}

/// The body on `spec` at `W`. On a device with the conv unit every op runs on it: the body's
/// largest maps (3 images of `2n + 1` channels of at most 12 x 12) fit the 32k-word map.
fn conv_at(spec: &str, size: usize, word_bits: u32, seed: u64) {
    let Some(mut dev) = open_config(spec, at_width(size, word_bits)) else {
        return;
    };
    assert_eq!(dev.config().word_bits, word_bits);
    conv_conformance(dev.as_mut(), 3, seed);
}

#[test]
fn golden_conv_4x4() {
    conv_conformance(open("golden", 4).unwrap().as_mut(), 4, 0xC0_0001);
}

#[test]
fn verilator_conv_4x4() {
    if let Some(mut d) = open("verilator", 4) {
        conv_conformance(d.as_mut(), 4, 0xC0_0002);
    }
}

#[test]
fn verilator_conv_8x8() {
    if let Some(mut d) = open("verilator", 8) {
        conv_conformance(d.as_mut(), 3, 0xC0_0003);
    }
}

#[test]
fn golden_conv_4x4_at_8_and_12_bits() {
    for (w, seed) in [(8, 0xC0_0108), (12, 0xC0_010C)] {
        conv_at("golden", 4, w, seed);
    }
}

/// The conv unit built at 8-bit words (feature-map words of 8 bits, the gathered words
/// sign-extended into the banks), Verilated at run time, bit for bit against the golden
/// model at 8 bits.
#[test]
fn verilator_conv_4x4_at_8_bits() {
    conv_at("verilator", 4, 8, 0xC0_0208);
}

#[test]
#[ignore = "Verilates the 4x4 array and conv unit at 12 bits at run time; run with --ignored"]
fn verilator_conv_4x4_at_12_bits() {
    conv_at("verilator", 4, 12, 0xC0_020C);
}

#[test]
#[ignore = "Verilates the 8x8 array and conv unit at 8 and 12 bits at run time; run with --ignored"]
fn verilator_conv_8x8_at_8_and_12_bits() {
    for (w, seed) in [(8, 0xC0_0308), (12, 0xC0_030C)] {
        conv_at("verilator", 8, w, seed);
    }
}

#[test]
#[ignore = "16x16 model: slower; run with --ignored"]
fn verilator_conv_16x16() {
    if let Some(mut d) = open("verilator", 16) {
        conv_conformance(d.as_mut(), 3, 0xC0_0004);
    }
}

/// A device whose forward convolution is wrong in one bit: the body must catch it.
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
        self.0.matmul(a, b, out)
    }
    fn conv2d_forward(
        &mut self,
        x: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        let mut y = self.0.conv2d_forward(x, w, g, out)?;
        y.data[0] ^= 1;
        Ok(y)
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
fn the_conv_body_catches_a_one_bit_error() {
    conv_conformance(&mut OneBitOff(open("golden", 4).unwrap()), 1, 0xC0_0005);
}

/// The serial backend: the conv driver on the host, frames over a pseudo-terminal, the
/// firmware's frame server and a Verilated 4x4 array with its conv unit behind it.
#[test]
fn serial_conv_sim_board_4x4() {
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
    conv_conformance(dev.as_mut(), 2, 0xC0_0006);
    drop(dev);
    board.close().expect("the board reported an error");
}

/// The bridge image built with a conv unit (`systole bitstream --fm-depth 4096`), simulated
/// through its serial pins: feature maps travel as the bridge's `'F'` rows, and ops whose maps
/// do not fit 4096 words fall back to the host-lowered product. Both paths must be bit-exact.
#[test]
fn bridge_image_conv_4x4() {
    let Some((board, mut dev)) = common::bridge_image() else {
        return;
    };
    assert_eq!(
        dev.config().fm_depth,
        4096,
        "the board's own feature-map size"
    );
    dev.reset_stats();
    conv_conformance(dev.as_mut(), 2, 0xC0_0007);
    assert!(
        dev.stats().bytes_to_device > 0,
        "the conv ops crossed the UART"
    );
    drop(dev);
    board.close().expect("the bridge image reported an error");
}

/// The SoC image: the conv driver on the host, the firmware's frame server on the Verilated
/// VexRiscv CPU writing feature maps and rows through its MMIO windows into the 4x4 array's
/// 4096-word conv unit, driven only through the UART pins over a pty.
#[test]
fn soc_firmware_conv_4x4() {
    let Some((board, mut dev)) = common::soc_image() else {
        return;
    };
    let t = std::time::Instant::now();
    conv_conformance(&mut dev, 2, 0xC0_0008);
    eprintln!("soc_firmware_conv_4x4: {:.1} s", t.elapsed().as_secs_f64());
    // The firmware ran every operation itself (board operations), none driven from the host.
    let st = dev.stats();
    assert!(st.ops > 0);
    assert_eq!(st.board_ops, st.ops, "{st:?}");
    common::check_stack(&mut dev, "soc_firmware_conv_4x4");
    drop(dev);
    board.close().expect("the SoC image reported an error");
}
