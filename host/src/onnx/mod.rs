//! ONNX in the command line: a model from an ONNX file or a run folder as an imported network
//! ([`systole_onnx::Net`]), its frozen formats (the file's own, or calibrated on training
//! images), inference of a split on any device, and the export of a run.

pub mod cli;

use anyhow::{bail, Context};
use std::path::Path;
use systole_core::ArrayConfig;
use systole_onnx::calibrate::calibrate_at;
use systole_onnx::infer::{self, Formats, Weights};
use systole_onnx::Net;
use systole_train::arith::TensorState;
use systole_train::checkpoint::{self, Checkpoint};
use systole_train::data::{Dataset, Split};
use systole_train::model;
use systole_train::DeviceProducts;

/// Images the formats of a float model are calibrated on: the first ones of the training split.
pub const CALIBRATION_IMAGES: usize = 256;

/// Images per batch of the evaluation (results do not depend on it: formats are frozen).
pub const EVAL_BATCH: usize = 32;

/// How the network's input is formed from a data set's pixels: `pixel / pixel_max · scale +
/// offset` (the loaders give `pixel / pixel_max`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InputMap {
    /// Multiplies `pixel / pixel_max`.
    pub scale: f32,
    /// Added after.
    pub offset: f32,
}

impl InputMap {
    /// The network's input of a split's stored values.
    pub fn apply(&self, v: &[f32]) -> Vec<f32> {
        v.iter().map(|&x| x * self.scale + self.offset).collect()
    }

    /// The input's extremes (pixels 0 and `pixel_max`).
    pub fn range(&self) -> (f32, f32) {
        (self.offset, self.scale + self.offset)
    }
}

/// A network ready to run: layers, weights as words, frozen formats, and where each came from.
pub struct Ready {
    /// The layers.
    pub net: Net,
    /// Their weights as words.
    pub weights: Vec<Option<Weights>>,
    /// The frozen formats.
    pub formats: Formats,
    /// Where the formats came from (for the report).
    pub formats_from: String,
}

/// The imported network of a run folder's checkpoint (its graph, its trained weights).
pub fn net_from_run(dir: &Path) -> anyhow::Result<(Net, Checkpoint)> {
    let path = dir.join(checkpoint::FILE_NAME);
    let cp = Checkpoint::load(&path)
        .with_context(|| format!("reading the run's checkpoint {}", path.display()))?;
    let ds = systole_train::data::load(&cp.config.dataset.to_string())?;
    let graph = model::build(
        &cp.config.model,
        ds.channels,
        ds.height,
        ds.width,
        ds.classes,
    )?;
    let params: Vec<_> = cp.params.iter().map(values).collect();
    let mut net = systole_onnx::graph::from_graph(&graph, &params)
        .with_context(|| format!("the checkpoint {}", path.display()))?;
    // A run at narrower words is evaluated and exported at its own width.
    net.word_bits = cp.config.word_bits;
    Ok((net, cp))
}

fn values(t: &TensorState) -> (usize, usize, Vec<f32>) {
    match t {
        TensorState::Fixed {
            rows,
            cols,
            frac,
            data,
        } => (
            *rows,
            *cols,
            // Exact: a 16-bit word times a power of two is an f32.
            data.iter()
                .map(|&v| v as f32 / (1u64 << frac) as f32)
                .collect(),
        ),
        TensorState::Float { rows, cols, data } => (*rows, *cols, data.clone()),
    }
}

/// Checks `net` takes `ds`'s images and gives its classes.
pub fn check_fits(net: &Net, ds: &Dataset) -> anyhow::Result<()> {
    let want = [ds.channels, ds.height, ds.width];
    let [c, h, w] = net.input;
    if net.input != want && !(h == 1 && w == 1 && c == ds.features()) {
        bail!(
            "the model takes {c}x{h}x{w} inputs; {} has {}x{}x{} images: use a model made for this data set",
            ds.name, want[0], want[1], want[2]
        );
    }
    if net.classes != ds.classes {
        bail!(
            "the model gives {} class scores; {} has {} classes",
            net.classes,
            ds.name,
            ds.classes
        );
    }
    Ok(())
}

/// Weights as words and the frozen formats: the model's own, or calibrated on the first
/// [`CALIBRATION_IMAGES`] training images of `ds` under `map`; words of the network's width.
pub fn ready(net: Net, ds: &Dataset, map: InputMap) -> anyhow::Result<Ready> {
    let weights = infer::weights_at(&net, net.word_bits);
    let (formats, formats_from) = match net.formats() {
        Some(f) => (
            f.map_err(anyhow::Error::msg)
                .context("the model's quantization cannot run on systole")?,
            "the model's QuantizeLinear/DequantizeLinear pairs".to_string(),
        ),
        None => {
            let n = CALIBRATION_IMAGES.min(ds.train.len());
            let imgs = map.apply(&ds.train.images[..n * ds.features()]);
            (
                calibrate_at(&net, &weights, &imgs, n, map.range(), net.word_bits),
                format!("calibrated on the first {n} training images of {}", ds.name),
            )
        }
    };
    infer::check_formats(&net, &weights, &formats).map_err(anyhow::Error::msg)?;
    Ok(Ready {
        net,
        weights,
        formats,
        formats_from,
    })
}

/// The device `spec` as products for inference (an `array` x `array` array at 16 bits).
pub fn products(spec: &str, array: usize, check: bool) -> anyhow::Result<DeviceProducts> {
    let spec: systole_device::DeviceSpec = spec.parse()?;
    products_at(&spec, array, check, infer::WORD_BITS)
}

/// [`products`] on an array of `word_bits`-bit words (its products saturate there).
pub fn products_at(
    spec: &systole_device::DeviceSpec,
    array: usize,
    check: bool,
    word_bits: u32,
) -> anyhow::Result<DeviceProducts> {
    let square = ArrayConfig::square(array);
    let mut ac = ArrayConfig::new(array, square.frac_bits, square.buffer_depth)?;
    if word_bits != infer::WORD_BITS {
        ac = ac.with_word_bits(word_bits);
        ac.validate_built()?;
    }
    let dev = spec
        .open(ac)
        .with_context(|| format!("opening the device '{spec}'"))?;
    Ok(DeviceProducts::new(dev, check))
}

/// One evaluation: each image's logits (as values), prediction and label.
pub struct EvalResult {
    /// Per image, its logits.
    pub logits: Vec<Vec<f32>>,
    /// Per image, the predicted class (the first largest logit).
    pub predicted: Vec<usize>,
    /// Per image, its label.
    pub labels: Vec<u8>,
}

impl EvalResult {
    /// Correct predictions.
    pub fn correct(&self) -> usize {
        self.predicted
            .iter()
            .zip(&self.labels)
            .filter(|(p, l)| **p == **l as usize)
            .count()
    }

    /// Mean softmax cross-entropy of the logits.
    pub fn loss(&self) -> f64 {
        let n = self.labels.len().max(1) as f64;
        self.logits
            .iter()
            .zip(&self.labels)
            .map(|(z, &l)| {
                let m = z.iter().fold(f32::MIN, |a, &b| a.max(b)) as f64;
                let lse = m + z.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
                lse - z[l as usize] as f64
            })
            .sum::<f64>()
            / n
    }
}

/// The first `limit` images of `split` through `r` on `p`, in batches of [`EVAL_BATCH`].
pub fn evaluate(
    p: &mut DeviceProducts,
    r: &Ready,
    split: &Split,
    map: InputMap,
    limit: Option<usize>,
) -> anyhow::Result<EvalResult> {
    let n = limit.unwrap_or(usize::MAX).min(split.len());
    let per = split.images.len() / split.len().max(1);
    let mut res = EvalResult {
        logits: Vec::with_capacity(n),
        predicted: Vec::with_capacity(n),
        labels: split.labels[..n].to_vec(),
    };
    for start in (0..n).step_by(EVAL_BATCH) {
        let rows = EVAL_BATCH.min(n - start);
        let x = map.apply(&split.images[start * per..(start + rows) * per]);
        let xq = infer::input_words(&x, rows, r.formats.input, r.formats.word_bits);
        let z = infer::forward(p, &r.net, &r.weights, &r.formats, xq)?;
        for row in z.to_f32().chunks_exact(z.cols) {
            let best = (0..row.len()).fold(0, |b, j| if row[j] > row[b] { j } else { b });
            res.predicted.push(best);
            res.logits.push(row.to_vec());
        }
    }
    Ok(res)
}

/// `--model` as every command that trains takes it (train, compare, explore, the Python
/// package): the network to build and, from an ONNX file under `--init file`, the weights the
/// runs start from.
pub struct ModelChoice {
    /// The network (an ONNX file's as an imported graph).
    pub spec: model::ModelSpec,
    /// The file's weights in the graph's order, when the runs start from them.
    pub start: Option<model::Params>,
    /// What the import made of an ONNX file (layers, shapes, what was folded), to print.
    pub imported: Option<String>,
}

impl ModelChoice {
    /// The line a run's header gains: where its weights come from (`None`: the seed).
    pub fn start_line(&self) -> Option<String> {
        match (&self.spec, &self.start) {
            (model::ModelSpec::Graph { source, .. }, Some(_)) => {
                Some(format!("starting from the weights of {source}"))
            }
            _ => None,
        }
    }
}

/// The one reading of `--model`: an ONNX file is imported (its graph, and its weights unless
/// `init` is random); anything else is a built-in network or a network file, from the seed.
pub fn resolve_model(
    model: &model::ModelName,
    init: crate::cli::Init,
    hidden: &[usize],
    channels: &[usize],
) -> anyhow::Result<ModelChoice> {
    let model::ModelName::Onnx(file) = model else {
        return Ok(ModelChoice {
            spec: model::ModelSpec::new(model, hidden, channels)?,
            start: None,
            imported: None,
        });
    };
    if !file.exists() {
        bail!(
            "{} does not exist: give the path of an ONNX file",
            file.display()
        );
    }
    let (net, (graph, params)) = import_graph(file)?;
    Ok(ModelChoice {
        spec: model::ModelSpec::Graph {
            source: file.display().to_string(),
            graph,
        },
        start: (init == crate::cli::Init::File).then_some(params),
        imported: Some(net.describe()),
    })
}

/// An ONNX file as a network and its layer graph with the file's weights.
pub fn import_graph(
    path: &Path,
) -> anyhow::Result<(
    Net,
    (systole_train::model::Graph, Vec<systole_onnx::graph::Param>),
)> {
    let net =
        systole_onnx::import_file(path).with_context(|| format!("importing {}", path.display()))?;
    let g = systole_onnx::graph::to_graph(&net)?;
    Ok((net, g))
}
