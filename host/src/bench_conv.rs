//! The conv unit measured on a LeNet-style layer (6 -> 16 channels, 5x5 kernel, 14x14 input):
//! simulated cycles against the ideal `MACs / size²`, and the bytes moved host -> device
//! against the host-im2col alternative (the same device running the lowered product with
//! the expanded matrix sent over the row ports). Both runs are checked against the golden
//! model; `systole bench` prints [`ConvTable`].

use crate::bench::operand;
use std::fmt;
use systole_core::{ArrayConfig, Rounding};
use systole_device::verilator::VerilatorDevice;
use systole_device::{self as device, Device, DeviceError};
use systole_golden::conv::{self, Conv2dGeom, ConvGeom};
use systole_golden::OutputSpec;

/// The LeNet layer of the issue, for `batch` images.
pub fn lenet_layer(batch: usize) -> Conv2dGeom {
    Conv2dGeom {
        batch,
        shape: ConvGeom {
            in_ch: 6,
            in_h: 14,
            in_w: 14,
            out_ch: 16,
            kernel: 5,
            stride: 1,
            pad: 0,
        },
    }
}

/// One op on one array size, on the conv unit and with host im2col.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvRow {
    /// Array size.
    pub size: usize,
    /// `forward`, `input grad` or `weight grad`.
    pub op: &'static str,
    /// Multiply-accumulates of the op.
    pub macs: u64,
    /// `macs / size²`.
    pub ideal_cycles: f64,
    /// Cycles on the conv unit (the device's `CYCLES` counter).
    pub cycles: u64,
    /// Bytes host -> device on the conv unit (feature maps once, weight rows, registers).
    pub bytes_to_device: u64,
    /// Cycles with host im2col.
    pub im2col_cycles: u64,
    /// Bytes host -> device with host im2col.
    pub im2col_bytes_to_device: u64,
}

/// Runs the three ops of the layer `g` on Verilated arrays of each size.
pub fn conv_table(sizes: &[usize], g: &Conv2dGeom) -> Result<Vec<ConvRow>, DeviceError> {
    let x = operand(g.batch, g.in_ch * g.in_h * g.in_w, 1, 10, 4);
    let dy = operand(g.batch, g.out_ch * g.out_h() * g.out_w(), 2, 10, 4);
    let w = operand(g.out_ch, g.in_ch * g.kernel * g.kernel, 3, 10, 4);
    let spec = OutputSpec {
        frac: 8,
        rounding: Rounding::Stochastic,
        seed: 9,
    };
    let mut rows = Vec::new();
    for &size in sizes {
        let mut dev = VerilatorDevice::new(ArrayConfig::square(size))?;
        let ops: [(&str, Conv2dGeom); 3] =
            [("forward", *g), ("input grad", *g), ("weight grad", *g)];
        for (op, g) in ops {
            let mut measure = |im2col: bool| -> Result<(u64, u64), DeviceError> {
                dev.reset_stats();
                let (got, want) = match (op, im2col) {
                    ("forward", false) => (
                        dev.conv2d_forward(&x, &w, &g, &spec)?,
                        conv::conv2d_forward(&x, &w, &g, &spec, size)?,
                    ),
                    ("forward", true) => (
                        device::lowered_forward(&mut dev, &x, &w, &g, &spec)?,
                        conv::conv2d_forward(&x, &w, &g, &spec, size)?,
                    ),
                    ("input grad", false) => (
                        dev.conv2d_backward_input(&dy, &w, &g, &spec)?,
                        conv::conv2d_backward_input(&dy, &w, &g, &spec, size)?,
                    ),
                    ("input grad", true) => (
                        device::lowered_backward_input(&mut dev, &dy, &w, &g, &spec)?,
                        conv::conv2d_backward_input(&dy, &w, &g, &spec, size)?,
                    ),
                    (_, false) => (
                        dev.conv2d_backward_weights(&x, &dy, &g, &spec)?,
                        conv::conv2d_backward_weights(&x, &dy, &g, &spec, size)?,
                    ),
                    (_, true) => (
                        device::lowered_backward_weights(&mut dev, &x, &dy, &g, &spec)?,
                        conv::conv2d_backward_weights(&x, &dy, &g, &spec, size)?,
                    ),
                };
                if got != want {
                    return Err(DeviceError::DiffersFromGolden(format!(
                        "{op} on the {size}x{size} model"
                    )));
                }
                let st = dev.stats();
                Ok((st.cycles, st.bytes_to_device))
            };
            let (cycles, bytes) = measure(false)?;
            let (im2col_cycles, im2col_bytes) = measure(true)?;
            let macs = dev.stats().macs;
            rows.push(ConvRow {
                size,
                op,
                macs,
                ideal_cycles: macs as f64 / (size * size) as f64,
                cycles,
                bytes_to_device: bytes,
                im2col_cycles,
                im2col_bytes_to_device: im2col_bytes,
            });
        }
    }
    Ok(rows)
}

/// A printable table of [`ConvRow`]s.
pub struct ConvTable<'a>(pub &'a [ConvRow]);

impl fmt::Display for ConvTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>5} {:>12} {:>10} {:>9} {:>9} {:>7} {:>11} {:>9} {:>11} {:>7}",
            "array",
            "op",
            "MACs",
            "ideal",
            "cycles",
            "util",
            "bytes->dev",
            "im2col cyc",
            "im2col B->dev",
            "saving"
        )?;
        for r in self.0 {
            writeln!(
                f,
                "{:>5} {:>12} {:>10} {:>9.0} {:>9} {:>6.1}% {:>11} {:>9} {:>11} {:>6.1}x",
                format!("{0}x{0}", r.size),
                r.op,
                r.macs,
                r.ideal_cycles,
                r.cycles,
                100.0 * r.ideal_cycles / r.cycles.max(1) as f64,
                r.bytes_to_device,
                r.im2col_cycles,
                r.im2col_bytes_to_device,
                r.im2col_bytes_to_device as f64 / r.bytes_to_device.max(1) as f64
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The LeNet layer on the 4x4 model: both paths agree with the golden model (checked
    /// inside), and the conv unit moves fewer bytes than host im2col for every op.
    #[test]
    fn lenet_layer_moves_fewer_bytes_on_the_conv_unit() {
        let rows = match conv_table(&[4], &lenet_layer(1)) {
            Err(DeviceError::NotBuilt { .. }) => return eprintln!("verilator not built: skipped"),
            r => r.unwrap(),
        };
        println!("{}", ConvTable(&rows));
        assert_eq!(rows.len(), 3);
        for r in &rows {
            // The input gradient's lowered product also multiplies the zeros of the full
            // (padded) convolution: 196 pixels x 400 x 6.
            let macs = if r.op == "input grad" {
                196 * 400 * 6
            } else {
                100 * 150 * 16
            };
            assert!(r.cycles > 0 && r.macs == macs, "{r:?}");
            assert!(r.bytes_to_device < r.im2col_bytes_to_device, "{r:?}");
        }
    }
}
