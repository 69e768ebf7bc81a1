//! [`BoardProducts`] on the behavioural stand-in of the array against the golden model's
//! products (tiled at the array's size), bit for bit: each product and convolution in
//! stochastic rounding across tiles and K chunks, and whole training steps of a small CNN.

extern crate std;

use super::*;
use crate::driver::mock::MockArray;
use std::vec::Vec;
use systole_core::gather::ConvGeom;
use systole_core::Rounding;
use systole_golden as golden;
use systole_step::fixed::Fixed;
use systole_step::graph::{Graph, Shape};
use systole_step::layers::{Conv2d, Dense, MaxPool, Relu};
use systole_step::step::{train_step, Batch};
use systole_step::Arith;
use systole_step::Layer;

/// The golden model's products at tile `tile`: what every backend must equal.
struct Golden {
    tile: usize,
}

fn step_err(op: &str) -> impl Fn(NumericError) -> StepError + '_ {
    move |source| StepError::Numeric {
        op: op.to_string(),
        source,
    }
}

impl Products for Golden {
    type Error = StepError;
    fn name(&self) -> String {
        "golden".to_string()
    }
    fn matmul(
        &mut self,
        op: &str,
        a: &QMatrix,
        b: &QMatrix,
        s: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        golden::matmul(a, b, s, self.tile).map_err(step_err(op))
    }
    fn conv2d_forward(
        &mut self,
        op: &str,
        x: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        golden::conv2d_forward(x, w, g, s, self.tile).map_err(step_err(op))
    }
    fn conv2d_backward_input(
        &mut self,
        op: &str,
        dy: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        golden::conv2d_backward_input(dy, w, g, s, self.tile).map_err(step_err(op))
    }
    fn conv2d_backward_weights(
        &mut self,
        op: &str,
        x: &QMatrix,
        dy: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        golden::conv2d_backward_weights(x, dy, g, s, self.tile).map_err(step_err(op))
    }
}

/// 4x4 array, 8-deep banks (so K runs in chunks), a conv unit with room for the test batches.
fn config() -> ArrayConfig {
    ArrayConfig {
        fm_depth: 4096,
        ..ArrayConfig::new(4, 8, 16).unwrap()
    }
}

// The tests own their stand-in of the array.
impl super::ProductsBus for MockArray {
    type Bus = MockArray;
    fn bus(&mut self) -> &mut MockArray {
        self
    }
}

fn board() -> BoardProducts<MockArray> {
    BoardProducts::new(MockArray::new(config()), config())
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn q(&mut self, rows: usize, cols: usize, frac: u32) -> QMatrix {
        let data = (0..rows * cols)
            .map(|_| self.next() as u16 as i16)
            .collect();
        QMatrix::from_vec(rows, cols, frac, data).unwrap()
    }
    fn values(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next() % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }
}

fn spec(frac: u32, seed: u32) -> OutputSpec {
    OutputSpec {
        frac,
        rounding: Rounding::Stochastic,
        seed,
    }
}

#[test]
fn every_product_equals_the_golden_model() {
    let (mut b, mut g, mut r) = (board(), Golden { tile: 4 }, Rng(7));
    // 7x19 · 19x6: two row blocks, two column blocks, three K chunks; ragged edges.
    let (a, bm) = (r.q(7, 19, 10), r.q(19, 6, 12));
    let s = spec(8, 0x5eed);
    assert_eq!(
        b.matmul("mm", &a, &bm, &s).unwrap(),
        g.matmul("mm", &a, &bm, &s).unwrap()
    );
    let bt = bm.transpose();
    assert_eq!(
        b.matmul_nt("nt", &a, &bt, &s).unwrap(),
        g.matmul_nt("nt", &a, &bt, &s).unwrap()
    );
    let at = a.transpose();
    assert_eq!(
        b.matmul_tn("tn", &at, &bm, &s).unwrap(),
        g.matmul_tn("tn", &at, &bm, &s).unwrap()
    );

    let geom = Conv2dGeom {
        batch: 2,
        shape: ConvGeom {
            in_ch: 2,
            in_h: 5,
            in_w: 6,
            out_ch: 3,
            kernel: 3,
            stride: 1,
            pad: 1,
        },
    };
    let (x, w) = (r.q(2, 2 * 5 * 6, 9), r.q(3, 2 * 9, 11));
    let dy = r.q(2, 3 * 5 * 6, 10);
    let s = spec(6, 0xc0);
    assert_eq!(
        b.conv2d_forward("f", &x, &w, &geom, &s).unwrap(),
        g.conv2d_forward("f", &x, &w, &geom, &s).unwrap()
    );
    assert_eq!(
        b.conv2d_backward_input("bi", &dy, &w, &geom, &s).unwrap(),
        g.conv2d_backward_input("bi", &dy, &w, &geom, &s).unwrap()
    );
    assert_eq!(
        b.conv2d_backward_weights("bw", &x, &dy, &geom, &s).unwrap(),
        g.conv2d_backward_weights("bw", &x, &dy, &geom, &s).unwrap()
    );
    assert!(b.stats().tiles > 0 && b.stats().gathers > 0);
}

/// A 1x4x4 image through a conv block (2 channels, pooled to 2x2), dense 8 -> 5 -> 3.
fn network() -> Graph {
    let mut g = Graph::new(Shape { c: 1, h: 4, w: 4 }, 3);
    for l in [
        Layer::Conv2d(Conv2d {
            out_ch: 2,
            kernel: 3,
            stride: 1,
            pad: 1,
            bias: true,
        }),
        Layer::Relu(Relu),
        Layer::MaxPool(MaxPool {
            kernel: 2,
            stride: 2,
        }),
        Layer::Dense(Dense { out: 5, bias: true }),
        Layer::Relu(Relu),
        Layer::Dense(Dense { out: 3, bias: true }),
    ] {
        g.then(l).unwrap();
    }
    g
}

/// Parameters, then two training steps; returns the losses, correct counts and final weights.
fn train<P: Products>(arith: &mut Fixed<P>) -> (Vec<(u32, usize)>, Vec<QMatrix>)
where
    P::Error: core::fmt::Debug,
{
    let mut r = Rng(3);
    let shapes = [(2, 9), (1, 2), (8, 5), (1, 5), (5, 3), (1, 3)];
    let mut params: Vec<QMatrix> = shapes
        .iter()
        .map(|&(rows, cols)| {
            arith
                .import("param", rows, cols, &r.values(rows * cols))
                .unwrap()
        })
        .collect();
    let mut velocity: Vec<QMatrix> = shapes
        .iter()
        .map(|&(rows, cols)| arith.zeros(rows, cols))
        .collect();
    let images = r.values(5 * 16);
    let graph = network();
    let batch = Batch {
        graph: &graph,
        images: &images,
        labels: &[0, 2, 1, 1, 0],
    };
    let mut out = Vec::new();
    for step in 0..2 {
        let (loss, ok) =
            train_step(arith, &batch, &mut params, &mut velocity, (step, 0.25, 0.9)).unwrap();
        out.push((loss.to_bits(), ok));
    }
    (out, params)
}

#[test]
fn training_steps_on_the_board_equal_the_golden_model() {
    let mut on_board = Fixed::new(board(), Rounding::Stochastic, 11);
    let mut gold = Fixed::new(Golden { tile: 4 }, Rounding::Stochastic, 11);
    let (got, want) = (train(&mut on_board), train(&mut gold));
    assert_eq!(got.0, want.0, "losses and correct counts");
    for (i, (p, q)) in got.1.iter().zip(&want.1).enumerate() {
        assert_eq!(p, q, "parameter {i}");
    }
    assert!(on_board.products().stats().mac_cycles > 0);
}

#[test]
fn refusals_name_the_cause() {
    let mut r = Rng(5);
    let (a, bm) = (r.q(3, 4, 8), r.q(5, 2, 8));
    let e = board()
        .matmul("layer 1 forward", &a, &bm, &spec(8, 0))
        .unwrap_err();
    assert!(
        matches!(
            e,
            ProductsError::Step(StepError::Numeric {
                source: NumericError::Shape(_),
                ..
            })
        ),
        "{e}"
    );
    // 2 + 2 fractional bits in, 8 out: a left shift, which the contract has not.
    let low = r.q(3, 4, 2);
    let e = board()
        .matmul("mm", &low, &low.transpose(), &spec(8, 0))
        .unwrap_err();
    assert!(
        matches!(
            e,
            ProductsError::Step(StepError::Numeric {
                source: NumericError::Shift { .. },
                ..
            })
        ),
        "{e}"
    );

    // No conv unit: refused, naming the convolution and the way out.
    let plain = ArrayConfig {
        fm_depth: 0,
        ..config()
    };
    let mut b = BoardProducts::new(MockArray::new(plain), plain);
    let Layer::Conv2d(c) = network().nodes[0].layer else {
        unreachable!("the network starts with its convolution")
    };
    let g = systole_step::Conv2dGeom {
        batch: 2,
        shape: c.geom(Shape { c: 1, h: 4, w: 4 }),
    };
    let (x, w) = (r.q(2, 16, 8), r.q(2, 9, 8));
    let e = b
        .conv2d_forward("layer 1 forward", &x, &w, &g, &spec(8, 0))
        .unwrap_err();
    assert!(matches!(e, ProductsError::ConvNeedsLowering { .. }), "{e}");
    assert!(
        std::format!("{e}").contains("layer 1 forward: the convolution (batch 2, 1x4x4 input"),
        "{e}"
    );
}
