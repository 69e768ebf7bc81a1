//! Hand-worked cases of the step, on a products backend written out here (exact integer sums,
//! one nearest-even or truncating conversion each: the contract for those modes, in which the
//! tile order does not matter).

use crate::arith::Arith;
use crate::fixed::{frac_for_exact, frac_for_max, Fixed};
use crate::{Products, StepError};
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use systole_core::conv2d::Conv2dGeom;
use systole_core::numeric::convert;
use systole_core::tensor::{OutputSpec, QMatrix};
use systole_core::Rounding;

/// `A·B` by the definition; remembers every output spec and operand pair it was given.
#[derive(Default)]
pub(crate) struct Exact {
    pub(crate) specs: Vec<OutputSpec>,
    pub(crate) operands: Vec<(QMatrix, QMatrix)>,
}

impl Products for Exact {
    type Error = StepError;

    fn name(&self) -> String {
        String::from("exact")
    }

    fn matmul(
        &mut self,
        _op: &str,
        a: &QMatrix,
        b: &QMatrix,
        spec: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        assert_ne!(spec.rounding, Rounding::Stochastic, "only exact modes here");
        self.specs.push(*spec);
        self.operands.push((a.clone(), b.clone()));
        let shift = a.frac + b.frac - spec.frac;
        let mut data = Vec::new();
        for i in 0..a.rows {
            for j in 0..b.cols {
                let acc: i64 = (0..a.cols)
                    .map(|k| a.at(i, k) as i64 * b.at(k, j) as i64)
                    .sum();
                data.push(convert(acc, shift, spec.rounding, 0, 16) as i16);
            }
        }
        Ok(QMatrix::from_vec(a.rows, b.cols, spec.frac, data).unwrap())
    }

    fn conv2d_forward(
        &mut self,
        op: &str,
        _: &QMatrix,
        _: &QMatrix,
        _: &Conv2dGeom,
        _: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        Err(no_conv(op))
    }

    fn conv2d_backward_input(
        &mut self,
        op: &str,
        _: &QMatrix,
        _: &QMatrix,
        _: &Conv2dGeom,
        _: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        Err(no_conv(op))
    }

    fn conv2d_backward_weights(
        &mut self,
        op: &str,
        _: &QMatrix,
        _: &QMatrix,
        _: &Conv2dGeom,
        _: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        Err(no_conv(op))
    }
}

fn no_conv(op: &str) -> StepError {
    StepError::Shape {
        op: String::from(op),
        msg: String::from("no convolutions in these tests"),
    }
}

fn q(rows: usize, cols: usize, frac: u32, data: &[i16]) -> QMatrix {
    QMatrix::from_vec(rows, cols, frac, data.to_vec()).unwrap()
}

#[test]
fn frac_rules() {
    assert_eq!(frac_for_max(0.0), 15);
    assert_eq!(frac_for_max(0.9), 15);
    assert_eq!(frac_for_max(1.0), 14);
    assert_eq!(frac_for_max(3.0), 13);
    assert_eq!(frac_for_max(1e9), 0);
    assert_eq!(frac_for_exact(0, 20), 15);
    assert_eq!(frac_for_exact(1 << 20, 20), 14);
    assert_eq!(frac_for_exact(5, 3), 3);
    assert_eq!(frac_for_exact(1 << 40, 40), 14);
    // 1024 would want frac 4, but a shift above 32 is outside the contract: 8 is the floor.
    assert_eq!(frac_for_exact(1 << 50, 40), 8);
}

/// Two SGD steps with momentum 0.5 and rate 0.5 from w = 0.5, v = 0, g = 0.25 each time:
/// v = 0.25, w = 0.5 - 0.125 = 0.375; then v = 0.5·0.25 + 0.25 = 0.375, w = 0.375 - 0.1875 =
/// 0.1875. In words: g = 0.25 is 8192 at 15 bits; v's exact sum at 30 bits is 8192 << 15 = 2^28,
/// which fits at 15 bits (8192); w's at 31 bits is (16384 << 16) - 32768·8192 = 3·2^28, at 15
/// bits 12288; then v: 16384·8192 + 2^28 = 3·2^27 -> 12288, and w: 12288·(2^16 - 2^15) = 3·2^27
/// -> 6144.
#[test]
fn sgd_with_momentum_by_hand() {
    let mut a = Fixed::new(Exact::default(), Rounding::NearestEven, 1);
    let mut w = a.import("w", 1, 1, &[0.5]).unwrap();
    let mut v = a.zeros(1, 1);
    let g = a.import("g", 1, 1, &[0.25]).unwrap();
    assert_eq!(
        (w.frac, w.data[0], g.frac, g.data[0]),
        (15, 16384, 15, 8192)
    );
    a.sgd("u", &mut w, &mut v, &g, 0.5, 0.5).unwrap();
    assert_eq!(
        (v.frac, v.data[0], w.frac, w.data[0]),
        (15, 8192, 15, 12288)
    );
    a.sgd("u", &mut w, &mut v, &g, 0.5, 0.5).unwrap();
    assert_eq!(
        (v.frac, v.data[0], w.frac, w.data[0]),
        (15, 12288, 15, 6144)
    );
}

/// The frac rule of an offloaded product: the first run takes the bound max|A|·max|B|·K, a
/// saturated output is run again with one bit less, and the next run uses enough bits to bring
/// the largest word into [2^13, 2^14).
#[test]
fn product_fracs_by_hand() {
    let mut a = Fixed::new(Exact::default(), Rounding::NearestEven, 1);
    // [1, 1] · [0.25, 0.25]ᵀ = 0.5: bound 1·0.25·2 = 0.5 -> frac 15 -> 16384, no retry.
    let x = q(1, 2, 14, &[1 << 14, 1 << 14]);
    let y = q(2, 1, 15, &[8192, 8192]);
    let z = a.matmul("mm", &x, &y).unwrap();
    assert_eq!((z.frac, z.data.clone()), (15, vec![16384]));
    // 16384 is in [2^13, 2^14): remembered 15.
    assert_eq!(a.fracs["mm"], 15);
    // A product of 1.0 at remembered frac 15 saturates (32768), so it runs again at 14.
    let one = q(1, 1, 14, &[1 << 14]);
    a.fracs.insert(String::from("sat"), 15);
    let z = a.matmul("sat", &one, &one).unwrap();
    assert_eq!((z.frac, z.data.clone()), (14, vec![1 << 14]));
    let c = a.saturation()["sat"];
    assert_eq!((c.ops, c.retries, c.saturated_words), (2, 1, 0));
    assert_eq!(a.fracs["sat"], 14);
    // A small result asks for more bits next time: 0.5 at a remembered frac of 5 is the word
    // 16 (5 bits), so the next run takes 14 - 5 = 9 more bits: 14.
    a.fracs.insert(String::from("grow"), 5);
    let half = q(1, 1, 15, &[1 << 14]);
    let z = a.matmul("grow", &half, &one).unwrap();
    assert_eq!((z.frac, z.data.clone()), (5, vec![16]));
    assert_eq!(a.fracs["grow"], 14);
    let specs = &a.products().specs;
    let fracs: Vec<u32> = specs.iter().map(|s| s.frac).collect();
    assert_eq!(fracs, [15, 15, 14, 5]);
    // Every run has its own seed (the retry too).
    assert!(specs[1].seed != specs[2].seed && specs[0].seed != specs[1].seed);
}

/// A dense layer's step on one image, 2 inputs and 2 classes, by hand: x = [1, 0.5],
/// W = [[0.5, -0.5], [0.25, 0.25]], b = 0: logits [0.625, -0.375]; softmax p0 =
/// 1 / (1 + e^-1) = 0.7310586, loss -ln p0 = 0.3132617 for label 0; dlogits = [p0 - 1, 1 - p0].
#[test]
fn a_dense_step_by_hand() {
    use crate::step::{train_step, Batch};
    let mut a = Fixed::new(Exact::default(), Rounding::NearestEven, 1);
    let graph = crate::graph::builtin::mlp(crate::Shape::flat(2), &[], 2).unwrap();
    a.begin_step(u64::MAX);
    let mut params = vec![
        a.import("w", 2, 2, &[0.5, -0.5, 0.25, 0.25]).unwrap(),
        a.import("b", 1, 2, &[0.0, 0.0]).unwrap(),
    ];
    let mut velocity = vec![a.zeros(2, 2), a.zeros(1, 2)];
    let batch = Batch {
        graph: &graph,
        images: &[1.0, 0.5],
        labels: &[0],
    };
    let (loss, ok) = train_step(&mut a, &batch, &mut params, &mut velocity, (0, 1.0, 0.0)).unwrap();
    assert_eq!(ok, 1);
    assert!((loss - 0.313_261_7).abs() < 1e-6, "{loss}");
    // dW = xᵀ·dlogits = [[d, -d], [d/2, -d/2]] with d = p0 - 1 = -0.2689414; lr 1.
    let d = 0.731_058_6f32 - 1.0;
    let want = [0.5 - d, -0.5 + d, 0.25 - d / 2.0, 0.25 + d / 2.0];
    for (got, want) in params[0].to_f32().iter().zip(want) {
        assert!((got - want).abs() < 2e-4, "{got} vs {want}");
    }
    let db = params[1].to_f32();
    assert!(
        (db[0] + d).abs() < 2e-4 && (db[1] - d).abs() < 2e-4,
        "{db:?}"
    );
}
