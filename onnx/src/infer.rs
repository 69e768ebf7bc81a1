//! Inference in frozen formats: the network's evaluation on the array, one image independent of
//! the others in its batch, and the exact semantics the export writes as QuantizeLinear /
//! DequantizeLinear pairs.
//!
//! Every tensor is `W`-bit words (16 unless the run trained narrower) with a fixed `frac`: the input (`formats.input`), the weights
//! (each tensor at the largest `frac` that holds all its values: [`exact_frac`]) and each
//! *rounding point*: a product's output (converted once on the device, nearest-even), a bias
//! add's, an average's and a residual add's (host-side, nearest-even, saturated). ReLU, max
//! pooling and flattening move words unchanged. The formats come from the model's own
//! QuantizeLinear/DequantizeLinear pairs when it has them (systole's export does), else from a
//! calibration ([`calibrate`]) on images the caller picks.

use crate::net::{Net, Op, Src};
use systole_core::conv2d::Conv2dGeom;
use systole_core::elementwise;
use systole_core::gather::ConvGeom;
use systole_core::numeric::MAX_SHIFT;
use systole_core::tensor::{OutputSpec, QMatrix};
use systole_core::Rounding;
use systole_step::{Products, StepError};

/// Largest `frac` of a 16-bit word.
pub const MAX_FRAC: u32 = 15;

/// Width of the words unless a run trained narrower.
pub const WORD_BITS: u32 = 16;

/// The frozen formats of a network: the words' width, the input's `frac`, and per layer the
/// `frac` of each of its rounding points ([`points`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Formats {
    /// Width `W` of every word (8 to 16): every conversion saturates to `W` bits.
    pub word_bits: u32,
    /// Fractional bits of the input words.
    pub input: u32,
    /// Per layer, its rounding points' fractional bits.
    pub nodes: Vec<Vec<u32>>,
}

/// The range of a `w`-bit word.
pub fn word_range(w: u32) -> (i64, i64) {
    (-(1i64 << (w - 1)), (1i64 << (w - 1)) - 1)
}

/// `v` saturated to `w` bits.
pub fn saturate(v: i64, w: u32) -> i16 {
    let (lo, hi) = word_range(w);
    v.clamp(lo, hi) as i16
}

/// How many rounding points a layer has: a product (and its bias add), or one host-side result.
pub fn points(op: &Op) -> usize {
    match op {
        Op::Dense { b, .. } | Op::Conv { b, .. } => 1 + b.is_some() as usize,
        Op::AvgPool { .. } | Op::GlobalAvgPool | Op::Add => 1,
        Op::Relu | Op::MaxPool { .. } => 0,
    }
}

/// `round_half_even(v · 2^f)` saturated to 16 bits.
pub fn quantize(v: f64, f: u32) -> i16 {
    quantize_at(v, f, WORD_BITS)
}

/// `round_half_even(v · 2^f)` saturated to `w` bits.
pub fn quantize_at(v: f64, f: u32, w: u32) -> i16 {
    let x = v * (1u64 << f) as f64;
    let r = x.round_ties_even();
    let (lo, hi) = word_range(w);
    r.clamp(lo as f64, hi as f64) as i16
}

/// Largest `frac` (0 to 15) at which every value of `v` rounds into a 16-bit word: a tensor of
/// words at `frac` f gives back its own words.
pub fn exact_frac(v: &[f32]) -> u32 {
    exact_frac_at(v, WORD_BITS)
}

/// [`exact_frac`] for `w`-bit words (0 to `w - 1`).
pub fn exact_frac_at(v: &[f32], w: u32) -> u32 {
    let (lo, hi) = word_range(w);
    (0..w)
        .rev()
        .find(|&f| {
            v.iter().all(|&x| {
                let r = (x as f64 * (1u64 << f) as f64).round_ties_even();
                (lo as f64..=hi as f64).contains(&r)
            })
        })
        .unwrap_or(0)
}

/// Largest `frac` at which `max_abs`, doubled (one bit of headroom for unseen images), fits a
/// 16-bit word.
pub fn frac_for(max_abs: f64) -> u32 {
    frac_for_at(max_abs, WORD_BITS)
}

/// [`frac_for`] for `w`-bit words.
pub fn frac_for_at(max_abs: f64, w: u32) -> u32 {
    let hi = word_range(w).1 as f64;
    (0..w)
        .rev()
        .find(|&f| 2.0 * max_abs * (1u64 << f) as f64 <= hi)
        .unwrap_or(0)
}

fn qmatrix(rows: usize, cols: usize, v: &[f32], w: u32) -> QMatrix {
    let f = exact_frac_at(v, w);
    let words = v.iter().map(|&x| quantize_at(x as f64, f, w)).collect();
    QMatrix::from_vec(rows, cols, f, words).expect("rows x cols words")
}

/// A layer's weights as words: `W` (Dense `inp x out`, Conv `out_ch x in_ch·k·k`) and `b`.
#[derive(Clone, Debug)]
pub struct Weights {
    /// Weights.
    pub w: QMatrix,
    /// Bias, `1 x out`.
    pub b: Option<QMatrix>,
}

/// Each layer's weights as 16-bit words (`None` for layers without).
pub fn weights(net: &Net) -> Vec<Option<Weights>> {
    weights_at(net, WORD_BITS)
}

/// Each layer's weights as `w`-bit words, each tensor at the largest `frac` that holds it.
pub fn weights_at(net: &Net, word_bits: u32) -> Vec<Option<Weights>> {
    let shapes = in_shapes(net);
    net.nodes
        .iter()
        .zip(shapes)
        .map(|(n, [c, h, w])| {
            let bias = |b: &Option<Vec<f32>>| b.as_ref().map(|b| qmatrix(1, b.len(), b, word_bits));
            match &n.op {
                Op::Dense { out, w: wv, b } => Some(Weights {
                    w: qmatrix(c * h * w, *out, wv, word_bits),
                    b: bias(b),
                }),
                Op::Conv {
                    out_ch, w: wv, b, ..
                } => Some(Weights {
                    w: qmatrix(*out_ch, wv.len() / out_ch, wv, word_bits),
                    b: bias(b),
                }),
                _ => None,
            }
        })
        .collect()
}

/// Each layer's (first) input shape.
pub fn in_shapes(net: &Net) -> Vec<[usize; 3]> {
    net.nodes
        .iter()
        .map(|n| shape_of(net, n.inputs[0]))
        .collect()
}

fn shape_of(net: &Net, s: Src) -> [usize; 3] {
    match s {
        Src::Input => net.input,
        Src::Node(i) => net.nodes[i].shape,
    }
}

/// The `frac` each layer's output is in, under `fm`.
pub fn out_fracs(net: &Net, fm: &Formats) -> Vec<u32> {
    out_fracs_partial(net, fm)
}

/// [`out_fracs`] of the first `fm.nodes.len()` layers (formats being decided in order).
pub fn out_fracs_partial(net: &Net, fm: &Formats) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::with_capacity(fm.nodes.len());
    for (i, n) in net.nodes.iter().enumerate().take(fm.nodes.len()) {
        let f = match fm.nodes[i].last() {
            Some(&f) => f,
            None => match n.inputs[0] {
                Src::Input => fm.input,
                Src::Node(j) => out[j],
            },
        };
        out.push(f);
    }
    out
}

/// Why the formats cannot run: a shift outside the contract's range, or a count that does not
/// match the layers' rounding points.
pub fn check_formats(net: &Net, ws: &[Option<Weights>], fm: &Formats) -> Result<(), String> {
    let w = fm.word_bits;
    if !(8..=WORD_BITS).contains(&w) {
        return Err(format!("{w}-bit words: systole runs 8 to 16"));
    }
    if fm.nodes.len() != net.nodes.len() || fm.input >= w {
        return Err("the formats do not match the network".into());
    }
    let outs = out_fracs(net, fm);
    let frac_in = |s: Src| match s {
        Src::Input => fm.input,
        Src::Node(j) => outs[j],
    };
    for (i, n) in net.nodes.iter().enumerate() {
        let p = &fm.nodes[i];
        if p.len() != points(&n.op) || p.iter().any(|&f| f >= w) {
            return Err(format!(
                "layer '{}' needs {} formats of 0 to {} bits, has {:?}",
                n.name,
                points(&n.op),
                w - 1,
                p
            ));
        }
        let mut tensors = ws[i].iter().flat_map(|q| std::iter::once(&q.w).chain(&q.b));
        if let Some(m) =
            tensors.find(|m| m.frac >= w || m.data.iter().any(|&v| saturate(v as i64, w) != v))
        {
            return Err(format!(
                "layer '{}' has weights of {} fractional bits or outside {w}-bit words",
                n.name, m.frac
            ));
        }
        let exact = match (&n.op, &ws[i]) {
            (Op::Dense { .. } | Op::Conv { .. }, Some(w)) => {
                let prod = frac_in(n.inputs[0]) + w.w.frac;
                let bias = w.b.as_ref().map(|b| p[0].max(b.frac));
                [Some(prod), bias]
            }
            (Op::Add, _) => [Some(frac_in(n.inputs[0]).max(frac_in(n.inputs[1]))), None],
            _ => [None, None],
        };
        for (k, e) in exact.iter().enumerate() {
            if let Some(e) = e {
                if p[k] > *e || e - p[k] > MAX_SHIFT {
                    return Err(format!(
                        "layer '{}': {} fractional bits from an exact value with {e} (the shift must be 0 to {MAX_SHIFT})",
                        n.name, p[k]
                    ));
                }
            }
        }
    }
    Ok(())
}

fn spec(frac: u32) -> OutputSpec {
    OutputSpec {
        frac,
        rounding: Rounding::NearestEven,
        seed: 1,
    }
}

/// Converts exact values with `frac_in` fractional bits to `frac` (nearest-even, saturated to
/// `w` bits).
fn convert(v: impl Iterator<Item = i64>, frac_in: u32, frac: u32, w: u32) -> Vec<i16> {
    let words = elementwise::convert_each(v, frac_in - frac, Rounding::NearestEven, 1);
    narrow(words, w)
}

/// 16-bit words saturated to `w` bits (saturating to 16 then to `w` is saturating to `w`).
fn narrow(mut words: Vec<i16>, w: u32) -> Vec<i16> {
    if w < WORD_BITS {
        for v in &mut words {
            *v = saturate(*v as i64, w);
        }
    }
    words
}

/// The input words of `rows` images (`x`: host values, row-major) at `frac`, `w` bits.
pub fn input_words(x: &[f32], rows: usize, frac: u32, w: u32) -> QMatrix {
    let words = x.iter().map(|&v| quantize_at(v as f64, frac, w)).collect();
    QMatrix::from_vec(rows, x.len() / rows.max(1), frac, words).expect("rows x cols words")
}

/// The logits of `rows` images (`x` their input words), every product on `p`.
pub fn forward<P: Products>(
    p: &mut P,
    net: &Net,
    ws: &[Option<Weights>],
    fm: &Formats,
    x: QMatrix,
) -> Result<QMatrix, P::Error> {
    let rows = x.rows;
    let shapes = in_shapes(net);
    let mut outs: Vec<QMatrix> = Vec::with_capacity(net.nodes.len());
    for (i, n) in net.nodes.iter().enumerate() {
        let get = |s: Src| match s {
            Src::Input => &x,
            Src::Node(j) => &outs[j],
        };
        let a = get(n.inputs[0]);
        let [c, h, w] = shapes[i];
        let [oc, oh, ow] = n.shape;
        let pts = &fm.nodes[i];
        let y = match &n.op {
            Op::Dense { .. } | Op::Conv { .. } => {
                let wt = ws[i].as_ref().expect("weights of a dense or conv layer");
                let z = match n.op {
                    Op::Conv {
                        kernel,
                        stride,
                        pad,
                        ..
                    } => {
                        let shape = ConvGeom {
                            in_ch: c,
                            in_h: h,
                            in_w: w,
                            out_ch: oc,
                            kernel,
                            stride,
                            pad,
                        };
                        p.conv2d_forward(
                            &n.name,
                            a,
                            &wt.w,
                            &Conv2dGeom { batch: rows, shape },
                            &spec(pts[0]),
                        )?
                    }
                    _ => p.matmul(&n.name, a, &wt.w, &spec(pts[0]))?,
                };
                match &wt.b {
                    Some(b) => {
                        let y = elementwise::bias_add(&z, b, oh * ow, &spec(pts[1])).map_err(
                            |source| StepError::Numeric {
                                op: n.name.clone(),
                                source,
                            },
                        )?;
                        QMatrix {
                            data: narrow(y.data, fm.word_bits),
                            ..y
                        }
                    }
                    None => z,
                }
            }
            Op::Relu => elementwise::relu(a),
            Op::MaxPool { kernel: k, stride } => {
                pool(a, [c, h, w], [oh, ow], [*k, *k], *stride, None)
            }
            Op::AvgPool { kernel: k, stride } => {
                let y = pool(a, [c, h, w], [oh, ow], [*k, *k], *stride, Some(pts[0]));
                QMatrix {
                    data: narrow(y.data, fm.word_bits),
                    ..y
                }
            }
            Op::GlobalAvgPool => {
                let y = pool(a, [c, h, w], [1, 1], [h, w], 1, Some(pts[0]));
                QMatrix {
                    data: narrow(y.data, fm.word_bits),
                    ..y
                }
            }
            Op::Add => {
                let b = get(n.inputs[1]);
                let f = a.frac.max(b.frac);
                let (sa, sb) = (f - a.frac, f - b.frac);
                let sums = a
                    .data
                    .iter()
                    .zip(&b.data)
                    .map(|(&u, &v)| ((u as i64) << sa) + ((v as i64) << sb));
                let words = convert(sums, f, pts[0], fm.word_bits);
                QMatrix::from_vec(rows, a.cols, pts[0], words).expect("words")
            }
        };
        outs.push(y);
    }
    Ok(outs.pop().expect("a network has layers"))
}

/// Max pooling (`avg` = `None`) or average pooling to `frac` `avg` over `kh x kw` windows at
/// stride `s`, no padding.
#[allow(clippy::too_many_arguments)]
fn pool(
    a: &QMatrix,
    [c, h, w]: [usize; 3],
    [oh, ow]: [usize; 2],
    [kh, kw]: [usize; 2],
    s: usize,
    avg: Option<u32>,
) -> QMatrix {
    let mut out = Vec::with_capacity(a.rows * c * oh * ow);
    for r in 0..a.rows {
        let img = &a.data[r * c * h * w..(r + 1) * c * h * w];
        for ch in 0..c {
            for oy in 0..oh {
                for ox in 0..ow {
                    let cells =
                        (0..kh).flat_map(|ky| (0..kw).map(move |kx| (oy * s + ky, ox * s + kx)));
                    let vals = cells.map(|(y, x)| img[(ch * h + y) * w + x] as i64);
                    out.push(match avg {
                        None => vals.max().unwrap_or(0) as i16,
                        Some(f) => average(vals.sum(), (kh * kw) as i64, a.frac, f),
                    });
                }
            }
        }
    }
    QMatrix::from_vec(a.rows, c * oh * ow, avg.unwrap_or(a.frac), out).expect("words")
}

/// `sum / n` (sum with `frac_in` fractional bits) at `frac`, nearest-even, saturated: exact
/// integer arithmetic.
pub fn average(sum: i64, n: i64, frac_in: u32, frac: u32) -> i16 {
    let (num, den) = if frac >= frac_in {
        ((sum as i128) << (frac - frac_in), n as i128)
    } else {
        (sum as i128, (n as i128) << (frac_in - frac))
    };
    let q = num.div_euclid(den);
    let r2 = 2 * num.rem_euclid(den);
    let q = if r2 > den || (r2 == den && q & 1 == 1) {
        q + 1
    } else {
        q
    };
    q.clamp(i16::MIN as i128, i16::MAX as i128) as i16
}
