//! What the training step (`systole-step`) needs of the SoC's RAM: the code of its RV32 build
//! ([`code_bytes`] of the `rv32_probe` example's ELF) and the heap of one step of each model
//! ([`CASES`], measured by the `step-budget` binary around [`peak_step_heap`]), beside the
//! firmware's statics and stack reserve (`board_fit` sets them against each board's RAM).

use object::elf::{SHF_ALLOC, SHT_NOBITS};
use object::read::elf::{ElfFile32, FileHeader, SectionHeader};
use object::Endianness;
use systole_step::model::Layer;
use systole_step::step::{train_step, Batch};
use systole_step::{Arith, Conv2dGeom, Fixed, OutputSpec, Products, QMatrix, StepError};

/// Bytes of code, constants and initialised data (every allocated section but zeroed ones) of
/// a 32-bit ELF, less the unwind tables, which the firmware's link discards (it aborts on a
/// panic).
pub fn code_bytes(elf: &[u8]) -> Result<u64, object::Error> {
    let file = ElfFile32::<Endianness>::parse(elf)?;
    let e = file.endian();
    let sections = file.elf_header().sections(e, elf)?;
    let mut bytes = 0;
    for s in sections.iter() {
        let name = sections.section_name(e, s)?;
        if s.sh_flags(e).0 & SHF_ALLOC.0 != 0
            && s.sh_type(e) != SHT_NOBITS
            && !name.starts_with(b".eh_frame")
        {
            bytes += u64::from(s.sh_size(e));
        }
    }
    Ok(bytes)
}

/// A model on a data set at a batch size.
pub struct Case {
    /// e.g. `MLP 64-32-10`.
    pub model: &'static str,
    /// e.g. `digits`.
    pub data: &'static str,
    /// Images per step.
    pub batch: usize,
    /// Image shape `(channels, height, width)`.
    pub image: (usize, usize, usize),
    /// The layers (the trainer's `model::build` of the model).
    pub layers: &'static [Layer],
    /// Images in the training set.
    pub train_images: usize,
    /// Bits a pixel of the data set as the board keeps it (`systole_step::resident::bits_for`
    /// of its largest pixel: digits' 16 takes 5, Fashion-MNIST's 255 takes 8).
    pub pixel_bits: u8,
}

const fn dense(inp: usize, out: usize, relu: bool) -> Layer {
    Layer::Dense { inp, out, relu }
}

const fn conv(in_ch: usize, out_ch: usize, hw: usize) -> Layer {
    Layer::ConvBlock {
        in_ch,
        out_ch,
        h: hw,
        w: hw,
    }
}

const DIGITS_MLP: &[Layer] = &[dense(64, 32, true), dense(32, 10, false)];
const DIGITS_CNN: &[Layer] = &[conv(1, 8, 8), conv(8, 16, 4), dense(16 * 2 * 2, 10, false)];
const FASHION_MLP: &[Layer] = &[dense(784, 32, true), dense(32, 10, false)];
const FASHION_CNN: &[Layer] = &[
    conv(1, 8, 28),
    conv(8, 16, 14),
    dense(16 * 7 * 7, 10, false),
];

/// The models and data sets the trainer ships, at the default batch and a small one.
pub const CASES: &[Case] = &[
    case("MLP 64-32-10", "digits", 32, 8, DIGITS_MLP, 1_438),
    case("MLP 64-32-10", "digits", 8, 8, DIGITS_MLP, 1_438),
    case("CNN 8-16", "digits", 32, 8, DIGITS_CNN, 1_438),
    case("CNN 8-16", "digits", 8, 8, DIGITS_CNN, 1_438),
    case(
        "MLP 784-32-10",
        "Fashion-MNIST",
        32,
        28,
        FASHION_MLP,
        60_000,
    ),
    case("MLP 784-32-10", "Fashion-MNIST", 8, 28, FASHION_MLP, 60_000),
    case("CNN 8-16", "Fashion-MNIST", 8, 28, FASHION_CNN, 60_000),
];

const fn case(
    model: &'static str,
    data: &'static str,
    batch: usize,
    hw: usize,
    layers: &'static [Layer],
    train_images: usize,
) -> Case {
    Case {
        model,
        data,
        batch,
        image: (1, hw, hw),
        layers,
        train_images,
        // Digits' pixels are 0..=16, Fashion-MNIST's bytes.
        pixel_bits: if hw == 8 { 5 } else { 8 },
    }
}

impl Case {
    /// Words of weights and biases.
    pub fn params(&self) -> usize {
        shapes(self.layers).iter().map(|(r, c)| r * c).sum()
    }
}

/// `(rows, cols)` of each parameter: `W` then `b` per layer.
fn shapes(layers: &[Layer]) -> Vec<(usize, usize)> {
    layers
        .iter()
        .flat_map(|l| match *l {
            Layer::Dense { inp, out, .. } => [(inp, out), (1, out)],
            Layer::ConvBlock { in_ch, out_ch, .. } => [(out_ch, in_ch * 9), (1, out_ch)],
        })
        .collect()
}

/// Products of the right shapes (zeros): the heap a device's results take, without a device.
struct Shapes;

fn zeros(rows: usize, cols: usize, s: &OutputSpec) -> Result<QMatrix, StepError> {
    Ok(QMatrix::zeros(rows, cols, s.frac))
}

impl Products for Shapes {
    type Error = StepError;
    fn name(&self) -> String {
        "shapes".into()
    }
    fn matmul(
        &mut self,
        _: &str,
        a: &QMatrix,
        b: &QMatrix,
        s: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        zeros(a.rows, b.cols, s)
    }
    fn conv2d_forward(
        &mut self,
        _: &str,
        x: &QMatrix,
        _: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        zeros(x.rows, g.out_ch * g.out_h() * g.out_w(), s)
    }
    fn conv2d_backward_input(
        &mut self,
        _: &str,
        dy: &QMatrix,
        _: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        zeros(dy.rows, g.in_ch * g.in_h * g.in_w, s)
    }
    fn conv2d_backward_weights(
        &mut self,
        _: &str,
        _: &QMatrix,
        _: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        zeros(g.out_ch, g.in_ch * g.kernel * g.kernel, s)
    }
}

/// Sets up `case`'s weights, momentum and one batch and runs two training steps (the second
/// with the remembered fractional bits): the allocations whose peak the caller measures.
pub fn peak_step_heap(case: &Case) {
    let mut a = Fixed::new(Shapes, systole_core::Rounding::Stochastic, 1);
    let mut params = Vec::new();
    let mut velocity = Vec::new();
    for (r, c) in shapes(case.layers) {
        params.push(a.import("init", r, c, &vec![0.01; r * c]).expect("import"));
        velocity.push(a.zeros(r, c));
    }
    let (c, h, w) = case.image;
    let images = vec![0.5f32; case.batch * c * h * w];
    let labels = vec![3u8; case.batch];
    let batch = Batch {
        layers: case.layers,
        classes: 10,
        images: &images,
        labels: &labels,
    };
    for step in 0..2 {
        train_step(
            &mut a,
            &batch,
            &mut params,
            &mut velocity,
            (step, 0.05, 0.9),
        )
        .expect("step");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_of_each_model() {
        // 64·32 + 32 + 32·10 + 10.
        assert_eq!(CASES[0].params(), 2_410);
        // conv 1->8: 8·9 + 8; conv 8->16: 16·72 + 16; dense 64 -> 10: 640 + 10.
        assert_eq!(CASES[2].params(), 80 + 1_168 + 650);
    }
}
