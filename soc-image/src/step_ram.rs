//! What the training step (`systole-step`) needs of the SoC's RAM: the code of its RV32 build
//! ([`code_bytes`] of the `rv32_probe` example's ELF) and the heap of one step of each model
//! ([`CASES`], measured by the `step-budget` binary around [`peak_step_heap`]), beside the
//! firmware's statics and stack reserve (`board_fit` sets them against each board's RAM).

use object::elf::{SHF_ALLOC, SHT_NOBITS};
use object::read::elf::{ElfFile32, FileHeader, SectionHeader};
use object::Endianness;
use systole_step::graph::{builtin, Graph, Shape};
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

/// A built-in network (systole-train's `ModelSpec` of the same name).
#[derive(Clone, Copy, Debug)]
pub enum Net {
    /// Dense layers of these hidden widths.
    Mlp(&'static [usize]),
    /// Convolution blocks of these channels.
    Cnn(&'static [usize]),
    /// LeNet-5.
    Lenet5,
    /// ResNet-8.
    Resnet8,
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
    /// The network.
    pub net: Net,
    /// Images in the training set.
    pub train_images: usize,
    /// Bits a pixel of the data set as the board keeps it (`systole_step::resident::bits_for`
    /// of its largest pixel: digits' 16 takes 5, Fashion-MNIST's 255 takes 8).
    pub pixel_bits: u8,
}

/// The models and data sets the trainer ships, at the default batch and a small one.
pub const CASES: &[Case] = &[
    case("MLP 64-32-10", "digits", 32, 8, Net::Mlp(&[32]), 1_438),
    case("MLP 64-32-10", "digits", 8, 8, Net::Mlp(&[32]), 1_438),
    case("CNN 8-16", "digits", 32, 8, Net::Cnn(&[8, 16]), 1_438),
    case("CNN 8-16", "digits", 8, 8, Net::Cnn(&[8, 16]), 1_438),
    case(
        "MLP 784-32-10",
        "Fashion-MNIST",
        32,
        28,
        Net::Mlp(&[32]),
        60_000,
    ),
    case(
        "MLP 784-32-10",
        "Fashion-MNIST",
        8,
        28,
        Net::Mlp(&[32]),
        60_000,
    ),
    case(
        "CNN 8-16",
        "Fashion-MNIST",
        8,
        28,
        Net::Cnn(&[8, 16]),
        60_000,
    ),
    case("LeNet-5", "Fashion-MNIST", 8, 28, Net::Lenet5, 60_000),
    case("ResNet-8", "Fashion-MNIST", 8, 28, Net::Resnet8, 60_000),
];

const fn case(
    model: &'static str,
    data: &'static str,
    batch: usize,
    hw: usize,
    net: Net,
    train_images: usize,
) -> Case {
    Case {
        model,
        data,
        batch,
        image: (1, hw, hw),
        net,
        train_images,
        // Digits' pixels are 0..=16, Fashion-MNIST's bytes.
        pixel_bits: if hw == 8 { 5 } else { 8 },
    }
}

impl Case {
    /// The network for the case's images and 10 classes.
    pub fn graph(&self) -> Graph {
        let (c, h, w) = self.image;
        let x = Shape { c, h, w };
        match self.net {
            Net::Mlp(hidden) => builtin::mlp(x, hidden, 10),
            Net::Cnn(channels) => builtin::cnn(x, channels, 10),
            Net::Lenet5 => builtin::lenet5(x, 10),
            Net::Resnet8 => builtin::resnet8(x, 10),
        }
        .expect("the built-in networks fit their data sets")
    }

    /// Words of weights and biases.
    pub fn params(&self) -> usize {
        shapes(&self.graph()).iter().map(|(r, c)| r * c).sum()
    }
}

/// `(rows, cols)` of each parameter, in order.
fn shapes(g: &Graph) -> Vec<(usize, usize)> {
    systole_step::resident::param_shapes(g)
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
    let graph = case.graph();
    for (r, c) in shapes(&graph) {
        params.push(a.import("init", r, c, &vec![0.01; r * c]).expect("import"));
        velocity.push(a.zeros(r, c));
    }
    let (c, h, w) = case.image;
    let images = vec![0.5f32; case.batch * c * h * w];
    let labels = vec![3u8; case.batch];
    let batch = Batch {
        graph: &graph,
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
        assert_eq!(CASES[7].params(), 61_706);
    }
}
