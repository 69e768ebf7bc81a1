//! The formats of a network that comes without them (a float ONNX model): the largest
//! magnitude at each rounding point over calibration images, in f64 on the quantized weights,
//! then the largest `frac` that holds twice that ([`infer::frac_for`]), within the contract's
//! shift range.

use crate::infer::{self, Formats, Weights};
use crate::net::{Net, Op, Src};
use systole_core::numeric::MAX_SHIFT;

/// One image through the network in f64 (weights as their words' values): each layer's output
/// and, for a Dense or Conv with a bias, its output before the bias.
pub fn float_forward(
    net: &Net,
    ws: &[Option<Weights>],
    x: &[f64],
) -> Vec<(Vec<f64>, Option<Vec<f64>>)> {
    let shapes = infer::in_shapes(net);
    let mut outs: Vec<(Vec<f64>, Option<Vec<f64>>)> = Vec::with_capacity(net.nodes.len());
    for (i, n) in net.nodes.iter().enumerate() {
        let get = |s: Src| -> &[f64] {
            match s {
                Src::Input => x,
                Src::Node(j) => &outs[j].0,
            }
        };
        let a = get(n.inputs[0]);
        let [c, h, w] = shapes[i];
        let [oc, oh, ow] = n.shape;
        let val = |q: &systole_core::tensor::QMatrix| -> Vec<f64> {
            q.data
                .iter()
                .map(|&v| v as f64 / (1u64 << q.frac) as f64)
                .collect()
        };
        let y = match &n.op {
            Op::Dense { .. } | Op::Conv { .. } => {
                let wt = ws[i].as_ref().expect("weights");
                let wv = val(&wt.w);
                let z = match n.op {
                    Op::Conv {
                        kernel: k,
                        stride: s,
                        pad: p,
                        ..
                    } => conv(a, &wv, (shapes[i], n.shape), (k, s, p)),
                    _ => {
                        let mut z = vec![0f64; oc * oh * ow];
                        for (k, &xv) in a.iter().enumerate() {
                            for (o, zo) in z.iter_mut().enumerate() {
                                *zo += xv * wv[k * oc + o];
                            }
                        }
                        z
                    }
                };
                match &wt.b {
                    Some(b) => {
                        let bv = val(b);
                        let per = oh * ow;
                        let y = z.iter().enumerate().map(|(j, v)| v + bv[j / per]).collect();
                        outs.push((y, Some(z)));
                        continue;
                    }
                    None => z,
                }
            }
            Op::Relu => a.iter().map(|v| v.max(0.0)).collect(),
            Op::MaxPool {
                kernel: k,
                stride: s,
            }
            | Op::AvgPool {
                kernel: k,
                stride: s,
            } => {
                let avg = matches!(n.op, Op::AvgPool { .. });
                pool(a, (shapes[i], n.shape), (*k, *s), avg)
            }
            Op::GlobalAvgPool => (0..c)
                .map(|ch| a[ch * h * w..(ch + 1) * h * w].iter().sum::<f64>() / (h * w) as f64)
                .collect(),
            Op::Add => {
                let b = get(n.inputs[1]);
                a.iter().zip(b).map(|(u, v)| u + v).collect()
            }
        };
        outs.push((y, None));
    }
    outs
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

/// Formats for `net` from `images` (`rows` images, row-major host values): the input's `frac`
/// holds `input_range` (the data's extremes), each rounding point's twice its largest
/// calibration magnitude. 16-bit words.
pub fn calibrate(
    net: &Net,
    ws: &[Option<Weights>],
    images: &[f32],
    rows: usize,
    input_range: (f32, f32),
) -> Formats {
    calibrate_at(net, ws, images, rows, input_range, infer::WORD_BITS)
}

/// [`calibrate`] for `word_bits`-bit words (`ws` as [`infer::weights_at`] makes them).
pub fn calibrate_at(
    net: &Net,
    ws: &[Option<Weights>],
    images: &[f32],
    rows: usize,
    input_range: (f32, f32),
    word_bits: u32,
) -> Formats {
    let frac_for = |m: f64| infer::frac_for_at(m, word_bits);
    let per = images.len() / rows.max(1);
    let mut maxima: Vec<[f64; 2]> = vec![[0.0; 2]; net.nodes.len()];
    for img in images.chunks_exact(per.max(1)).take(rows) {
        let x: Vec<f64> = img.iter().map(|&v| v as f64).collect();
        for (m, (out, pre)) in maxima.iter_mut().zip(float_forward(net, ws, &x)) {
            // A product's point 0 is before its bias, point 1 after.
            match pre {
                Some(pre) => *m = [m[0].max(max_abs(&pre)), m[1].max(max_abs(&out))],
                None => m[0] = m[0].max(max_abs(&out)),
            }
        }
    }
    let input = infer::exact_frac_at(&[input_range.0, input_range.1], word_bits);
    let mut fm = Formats {
        word_bits,
        input,
        nodes: Vec::with_capacity(net.nodes.len()),
    };
    for (i, n) in net.nodes.iter().enumerate() {
        let outs = infer::out_fracs_partial(net, &fm);
        let frac_in = |s: Src| match s {
            Src::Input => input,
            Src::Node(j) => outs[j],
        };
        // Within the shift range from the exact value `e`: e - 32 <= frac <= e.
        let clamp = |f: u32, e: u32| f.min(e).max(e.saturating_sub(MAX_SHIFT));
        let m = maxima[i];
        let pts = match (&n.op, &ws[i]) {
            (Op::Dense { .. } | Op::Conv { .. }, Some(w)) => {
                let prod = clamp(frac_for(m[0]), frac_in(n.inputs[0]) + w.w.frac);
                match &w.b {
                    Some(b) => vec![prod, clamp(frac_for(m[1]), prod.max(b.frac))],
                    None => vec![prod],
                }
            }
            (Op::Add, _) => vec![clamp(
                frac_for(m[0]),
                frac_in(n.inputs[0]).max(frac_in(n.inputs[1])),
            )],
            (Op::AvgPool { .. } | Op::GlobalAvgPool, _) => vec![frac_for(m[0])],
            _ => vec![],
        };
        fm.nodes.push(pts);
    }
    fm
}

/// A convolution of one image `a` (`[c, h, w]` in, `[oc, oh, ow]` out) with weights `wv`,
/// kernel `k`, stride `s` and zero padding `p`, in f64.
fn conv(
    a: &[f64],
    wv: &[f64],
    ([c, h, w], [oc, oh, ow]): ([usize; 3], [usize; 3]),
    (k, s, p): (usize, usize, usize),
) -> Vec<f64> {
    let mut z = vec![0f64; oc * oh * ow];
    for o in 0..oc {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut acc = 0.0;
                for ci in 0..c {
                    for ky in 0..k {
                        for kx in 0..k {
                            let (y, xx) = (
                                (oy * s + ky) as isize - p as isize,
                                (ox * s + kx) as isize - p as isize,
                            );
                            if y >= 0 && xx >= 0 && (y as usize) < h && (xx as usize) < w {
                                acc += a[(ci * h + y as usize) * w + xx as usize]
                                    * wv[((o * c + ci) * k + ky) * k + kx];
                            }
                        }
                    }
                }
                z[(o * oh + oy) * ow + ox] = acc;
            }
        }
    }
    z
}

/// Max (or, `avg`, average) pooling of one image `a` with kernel `k` and stride `s`, in f64.
fn pool(
    a: &[f64],
    ([c, h, w], [_, oh, ow]): ([usize; 3], [usize; 3]),
    (k, s): (usize, usize),
    avg: bool,
) -> Vec<f64> {
    let mut y = Vec::with_capacity(c * oh * ow);
    for ch in 0..c {
        for oy in 0..oh {
            for ox in 0..ow {
                let cells = (0..k).flat_map(|ky| (0..k).map(move |kx| (oy * s + ky, ox * s + kx)));
                let v: Vec<f64> = cells.map(|(yy, xx)| a[(ch * h + yy) * w + xx]).collect();
                y.push(if avg {
                    v.iter().sum::<f64>() / v.len() as f64
                } else {
                    v.iter().cloned().fold(f64::MIN, f64::max)
                });
            }
        }
    }
    y
}
