//! The networks: an MLP and a small CNN (conv-ReLU-pool blocks, then one dense layer), written
//! once over [`Arith`] so every precision runs the same model.

use super::rng::SplitMix64;
use super::TrainError;
use serde::{Deserialize, Serialize};
pub use systole_step::model::{
    backward, backward_from, forward, forward_from, param_name, Cache, Forward, Layer,
};

/// Which network to train.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModelSpec {
    /// Dense layers with ReLU: input, the hidden widths, then the classes.
    Mlp {
        /// Hidden layer widths, e.g. `[32]` for 64-32-10 on digits.
        hidden: Vec<usize>,
    },
    /// Blocks of 3x3 convolution (padding 1), ReLU and 2x2 max pooling, then a dense layer.
    Cnn {
        /// Output channels of each block, e.g. `[8, 16]`.
        channels: Vec<usize>,
    },
}

impl ModelSpec {
    /// Short description, e.g. `mlp 64-32-10` or `cnn 1x8x8 -> c8 -> c16 -> 10`.
    pub fn describe(&self, ch: usize, h: usize, w: usize, classes: usize) -> String {
        match self {
            ModelSpec::Mlp { hidden } => {
                let mut v = vec![(ch * h * w).to_string()];
                v.extend(hidden.iter().map(|x| x.to_string()));
                v.push(classes.to_string());
                format!("mlp {}", v.join("-"))
            }
            ModelSpec::Cnn { channels } => {
                let c: Vec<String> = channels
                    .iter()
                    .map(|x| format!("conv3x3 {x} + pool"))
                    .collect();
                format!("cnn {ch}x{h}x{w} -> {} -> dense {classes}", c.join(" -> "))
            }
        }
    }
}

/// Builds the layer list for a data set's image shape; fails on shapes the model cannot take.
pub fn build(
    spec: &ModelSpec,
    ch: usize,
    h: usize,
    w: usize,
    classes: usize,
) -> Result<Vec<Layer>, TrainError> {
    let bad = |m: String| TrainError::Config(m);
    let mut layers = Vec::new();
    match spec {
        ModelSpec::Mlp { hidden } => {
            let mut inp = ch * h * w;
            for &hdim in hidden {
                if hdim == 0 {
                    return Err(bad("hidden layer widths must be positive".into()));
                }
                layers.push(Layer::Dense {
                    inp,
                    out: hdim,
                    relu: true,
                });
                inp = hdim;
            }
            layers.push(Layer::Dense {
                inp,
                out: classes,
                relu: false,
            });
        }
        ModelSpec::Cnn { channels } => {
            let (mut c, mut hh, mut ww) = (ch, h, w);
            for &oc in channels {
                if oc == 0 || hh < 2 || ww < 2 || hh % 2 != 0 || ww % 2 != 0 {
                    return Err(bad(format!(
                        "a convolution block needs positive channels and an even image size to pool; got {oc} channels on {hh}x{ww} (use fewer --channels)"
                    )));
                }
                layers.push(Layer::ConvBlock {
                    in_ch: c,
                    out_ch: oc,
                    h: hh,
                    w: ww,
                });
                (c, hh, ww) = (oc, hh / 2, ww / 2);
            }
            let inp = c
                .checked_mul(hh)
                .and_then(|x| x.checked_mul(ww))
                .ok_or_else(|| bad(format!("{c} channels of {hh}x{ww} are too many to count")))?;
            layers.push(Layer::Dense {
                inp,
                out: classes,
                relu: false,
            });
        }
    }
    Ok(layers)
}

/// Checks, before anything is allocated, every tensor a training step or an evaluation batch of
/// `rows` images allocates against [`systole_core::limits`]: each layer's weights, its input and
/// output activations and (for convolutions) the lowered operands, and the parameter total.
/// Products are checked, so no size wraps.
pub fn check_sizes(layers: &[Layer], rows: usize) -> Result<(), TrainError> {
    use systole_core::limits::{MAX_MODEL_PARAMS, MAX_TENSOR_WORDS};
    let fix = "use smaller --hidden, --channels or --batch";
    let words = |v: Option<usize>| v.map_or("more than 2^64".to_string(), |w| w.to_string());
    let mut total = Some(0usize);
    for (i, l) in layers.iter().enumerate() {
        let (w_rows, w_cols, bias, acts) = match *l {
            Layer::Dense { inp, out, .. } => (
                Some(inp),
                Some(out),
                out,
                vec![rows.checked_mul(inp), rows.checked_mul(out)],
            ),
            Layer::ConvBlock {
                in_ch,
                out_ch,
                h,
                w,
            } => {
                let pix = rows.checked_mul(h).and_then(|p| p.checked_mul(w));
                let per = |c: usize| pix.and_then(|p| p.checked_mul(c));
                let lowered = |c: usize| c.checked_mul(9).and_then(per);
                (
                    Some(out_ch),
                    in_ch.checked_mul(9),
                    out_ch,
                    vec![per(in_ch), per(out_ch), lowered(in_ch), lowered(out_ch)],
                )
            }
        };
        let weights = w_rows.zip(w_cols).and_then(|(r, c)| r.checked_mul(c));
        if weights.is_none_or(|w| w > MAX_TENSOR_WORDS) {
            return Err(TrainError::Config(format!(
                "layer {}'s weights ({} x {}) need {} words; systole allocates at most {MAX_TENSOR_WORDS} (2^26) words per tensor: {fix}",
                i + 1,
                words(w_rows),
                words(w_cols),
                words(weights)
            )));
        }
        if let Some(a) = acts.iter().find(|a| a.is_none_or(|a| a > MAX_TENSOR_WORDS)) {
            return Err(TrainError::Config(format!(
                "layer {} needs {} words for one batch of {rows} images; systole allocates at most {MAX_TENSOR_WORDS} (2^26) words per tensor: {fix}",
                i + 1,
                words(*a)
            )));
        }
        total = total
            .zip(weights)
            .and_then(|(t, w)| t.checked_add(w)?.checked_add(bias));
    }
    if total.is_none_or(|t| t > MAX_MODEL_PARAMS) {
        return Err(TrainError::Config(format!(
            "the model has {} parameters; systole trains at most {MAX_MODEL_PARAMS} (2^26): {fix}",
            words(total)
        )));
    }
    Ok(())
}

/// Initial parameters as host values: for each layer `W` (Glorot-uniform) then `b` (zeros).
pub fn init_params(layers: &[Layer], seed: u64) -> Vec<(usize, usize, Vec<f32>)> {
    let mut rng = SplitMix64::new(super::rng::mix64(seed ^ 0x1417));
    let mut out = Vec::new();
    for l in layers {
        let (rows, cols, fan_in, fan_out, nb) = match *l {
            Layer::Dense { inp, out, .. } => (inp, out, inp, out, out),
            Layer::ConvBlock { in_ch, out_ch, .. } => {
                (out_ch, in_ch * 9, in_ch * 9, out_ch * 9, out_ch)
            }
        };
        let lim = (6.0 / (fan_in + fan_out) as f32).sqrt();
        let w = (0..rows * cols)
            .map(|_| (rng.next_f32() * 2.0 - 1.0) * lim)
            .collect();
        out.push((rows, cols, w));
        out.push((1, nb, vec![0.0; nb]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_of_the_two_models() {
        let mlp = build(&ModelSpec::Mlp { hidden: vec![32] }, 1, 8, 8, 10).unwrap();
        assert_eq!(
            mlp,
            vec![
                Layer::Dense {
                    inp: 64,
                    out: 32,
                    relu: true
                },
                Layer::Dense {
                    inp: 32,
                    out: 10,
                    relu: false
                }
            ]
        );
        let cnn = build(
            &ModelSpec::Cnn {
                channels: vec![8, 16],
            },
            1,
            8,
            8,
            10,
        )
        .unwrap();
        assert_eq!(
            cnn[2],
            Layer::Dense {
                inp: 16 * 2 * 2,
                out: 10,
                relu: false
            }
        );
        let e = build(
            &ModelSpec::Cnn {
                channels: vec![4, 4, 4, 4],
            },
            1,
            8,
            8,
            10,
        )
        .unwrap_err();
        assert!(e.to_string().contains("even image size"), "{e}");
        let p = init_params(&cnn, 1);
        assert_eq!((p[0].0, p[0].1), (8, 9));
        assert_eq!(p.len(), 6);
    }

    #[test]
    fn oversized_models_are_refused_before_allocating() {
        let mlp = |hidden: Vec<usize>| build(&ModelSpec::Mlp { hidden }, 1, 8, 8, 10).unwrap();
        let cnn = |channels: Vec<usize>| build(&ModelSpec::Cnn { channels }, 1, 8, 8, 10);
        check_sizes(&mlp(vec![32]), 256).unwrap();
        check_sizes(&cnn(vec![8, 16]).unwrap(), 256).unwrap();
        // 64 x 10^8 weights: 25.6 GB as f32.
        let e = check_sizes(&mlp(vec![100_000_000]), 32).unwrap_err();
        assert!(
            e.to_string().contains("layer 1's weights (64 x 100000000)"),
            "{e}"
        );
        // Each weight matrix fits, the activations of a batch do not.
        let e = check_sizes(&mlp(vec![1 << 20]), 256).unwrap_err();
        assert!(e.to_string().contains("batch of 256 images"), "{e}");
        // The parameter total: many layers that each fit.
        let e = check_sizes(&mlp(vec![4096; 8]), 1).unwrap_err();
        assert!(e.to_string().contains("parameters"), "{e}");
        // Products that overflow usize are refused, not wrapped.
        let e = check_sizes(&cnn(vec![4, 1 << 62, 4]).unwrap(), 1).unwrap_err();
        assert!(e.to_string().contains("more than 2^64"), "{e}");
        let e = cnn(vec![1 << 62, 1 << 62]).unwrap_err();
        assert!(e.to_string().contains("too many to count"), "{e}");
    }
}
