//! The networks: the built-in ones by name (an MLP, a small CNN, LeNet-5, ResNet-8) or any
//! graph (`systole_step::graph`), built for a data set's image shape, checked against the
//! host's limits and initialised from the run's seed.

use super::rng::SplitMix64;
use super::TrainError;
use serde::{Deserialize, Serialize};
pub use systole_step::graph::run::{backward, backward_span, forward, forward_span, Span, Tape};
pub use systole_step::graph::{builtin, Graph, Shape, Src};
pub use systole_step::Layer;

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
    /// LeNet-5 with ReLU and max pooling (`builtin::lenet5`).
    Lenet5,
    /// ResNet-8: three residual stages (`builtin::resnet8`).
    Resnet8,
    /// Any graph, e.g. one imported from a file; `source` says where it came from.
    Graph {
        /// Where it came from (a file name), for descriptions.
        source: String,
        /// The network.
        graph: Graph,
    },
}

/// `--model` as given: a built-in network by name or a network file, parsed once (by clap on
/// the command line); [`ModelSpec::new`] builds the spec (reading a `.json` file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelName {
    /// `mlp` (the widths: `--hidden`).
    Mlp,
    /// `cnn` (the channels: `--channels`).
    Cnn,
    /// `lenet5`.
    Lenet5,
    /// `resnet8`.
    Resnet8,
    /// A network file (`.json`: a [`Graph`] as serde writes it).
    Json(std::path::PathBuf),
    /// An ONNX file (`.onnx`), which the `systole` command imports.
    Onnx(std::path::PathBuf),
}

impl std::str::FromStr for ModelName {
    type Err = TrainError;

    fn from_str(s: &str) -> Result<Self, TrainError> {
        Ok(match s {
            "mlp" => ModelName::Mlp,
            "cnn" => ModelName::Cnn,
            "lenet5" => ModelName::Lenet5,
            "resnet8" => ModelName::Resnet8,
            f if f.ends_with(".json") => ModelName::Json(f.into()),
            f if f.ends_with(".onnx") => ModelName::Onnx(f.into()),
            m => {
                return Err(TrainError::Config(format!(
                    "unknown model '{m}': use mlp, cnn, lenet5, resnet8, a network file (.json) or an ONNX file (.onnx)"
                )))
            }
        })
    }
}

impl std::fmt::Display for ModelName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            ModelName::Json(p) | ModelName::Onnx(p) => return write!(f, "{}", p.display()),
            ModelName::Mlp => "mlp",
            ModelName::Cnn => "cnn",
            ModelName::Lenet5 => "lenet5",
            ModelName::Resnet8 => "resnet8",
        };
        f.write_str(name)
    }
}

impl ModelSpec {
    /// The network `model` names: a built-in one (`mlp` and `cnn` take `hidden` and
    /// `channels`) or a network file, read here. An ONNX file is refused: the `systole`
    /// command imports it (`systole::onnx::resolve_model`).
    pub fn new(
        model: &ModelName,
        hidden: &[usize],
        channels: &[usize],
    ) -> Result<ModelSpec, TrainError> {
        Ok(match model {
            ModelName::Mlp => ModelSpec::Mlp {
                hidden: hidden.to_vec(),
            },
            ModelName::Cnn => ModelSpec::Cnn {
                channels: channels.to_vec(),
            },
            ModelName::Lenet5 => ModelSpec::Lenet5,
            ModelName::Resnet8 => ModelSpec::Resnet8,
            ModelName::Json(f) => ModelSpec::Graph {
                source: f.display().to_string(),
                graph: read_graph(f)?,
            },
            ModelName::Onnx(f) => {
                return Err(TrainError::Config(format!(
                    "{}: an ONNX file is imported by the `systole` command (`systole::onnx::resolve_model`); the trainer alone takes mlp, cnn, lenet5, resnet8 or a network file (.json)",
                    f.display()
                )))
            }
        })
    }

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
            ModelSpec::Lenet5 => format!("lenet5 {ch}x{h}x{w} -> {classes}"),
            ModelSpec::Resnet8 => format!("resnet8 {ch}x{h}x{w} -> {classes}"),
            ModelSpec::Graph { source, graph } => format!(
                "{source}: {} layers, {} -> {}",
                graph.nodes.len(),
                graph.input,
                graph.classes
            ),
        }
    }
}

/// Builds the network for a data set's image shape; fails on shapes the model cannot take.
pub fn build(
    spec: &ModelSpec,
    ch: usize,
    h: usize,
    w: usize,
    classes: usize,
) -> Result<Graph, TrainError> {
    let input = Shape { c: ch, h, w };
    let g = match spec {
        ModelSpec::Mlp { hidden } => {
            if hidden.contains(&0) {
                return Err(TrainError::Config(
                    "hidden layer widths must be positive".into(),
                ));
            }
            builtin::mlp(input, hidden, classes)
        }
        ModelSpec::Cnn { channels } => builtin::cnn(input, channels, classes),
        ModelSpec::Lenet5 => builtin::lenet5(input, classes),
        ModelSpec::Resnet8 => builtin::resnet8(input, classes),
        ModelSpec::Graph { source, graph } => {
            if graph.input != input || graph.classes != classes {
                return Err(TrainError::Config(format!(
                    "{source} takes {} images in {} classes but the data set has {input} images in {classes} classes",
                    graph.input, graph.classes
                )));
            }
            graph.check().map(|_| graph.clone())
        }
    };
    g.map_err(|e| TrainError::Config(format!("the network does not fit the data: {e}")))
}

/// The most bytes a network file may have.
pub const MAX_GRAPH_FILE: u64 = 16 << 20;

/// Reads a network file (a [`Graph`] as JSON), checked only for its form here: its shapes
/// are checked against the data set when the run builds it.
pub fn read_graph(path: &std::path::Path) -> Result<Graph, TrainError> {
    let bad = |m: String| TrainError::Config(format!("network file {}: {m}", path.display()));
    let len = std::fs::metadata(path)
        .map_err(|e| bad(format!("{e}")))?
        .len();
    if len > MAX_GRAPH_FILE {
        return Err(bad(format!(
            "{len} bytes; a network file has at most {MAX_GRAPH_FILE}"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("{e}")))?;
    let g: Graph =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a network description: {e}")))?;
    g.check().map_err(|e| bad(e.to_string()))?;
    Ok(g)
}

/// Writes `g` as a network file [`read_graph`] reads.
pub fn graph_json(g: &Graph) -> String {
    serde_json::to_string_pretty(g).unwrap_or_default()
}

/// The names of the graph's parameters (`layer 2 W`), in order.
pub fn param_names(g: &Graph) -> Result<Vec<String>, TrainError> {
    Ok(systole_step::step::param_names(g)?)
}

/// Checks, before anything is allocated, every tensor a training step or an evaluation batch of
/// `rows` images allocates against [`systole_core::limits`]: each layer's weights, its output
/// activations and (for convolutions) the lowered operands, and the parameter total.
/// Products are checked, so no size wraps.
pub fn check_sizes(g: &Graph, rows: usize) -> Result<(), TrainError> {
    use systole_core::limits::{MAX_MODEL_PARAMS, MAX_TENSOR_WORDS};
    let fix = "use smaller --hidden, --channels or --batch, or a smaller network";
    let config = |e: systole_step::GraphError| TrainError::Config(e.to_string());
    let words = |v: Option<usize>| v.map_or("more than 2^64".to_string(), |w| w.to_string());
    let shapes = g.check().map_err(config)?;
    let mut total = Some(0usize);
    for p in g.params().map_err(config)? {
        let (r, c) = (p.shape.rows, p.shape.cols);
        let n = r.checked_mul(c);
        if n.is_none_or(|w| w > MAX_TENSOR_WORDS) {
            return Err(TrainError::Config(format!(
                "layer '{}': {} ({r} x {c}) needs {} words; systole allocates at most {MAX_TENSOR_WORDS} (2^26) words per tensor: {fix}",
                g.nodes[p.node].name,
                p.name,
                words(n)
            )));
        }
        total = total.zip(n).and_then(|(t, n)| t.checked_add(n));
    }
    let mut acts = vec![(g.input, "input".to_string())];
    for (k, n) in g.nodes.iter().enumerate() {
        acts.push((shapes[k], n.name.clone()));
        if let Layer::Conv2d(c) = n.layer {
            let x = g.in_shapes(k, &shapes)[0];
            let kk = c.kernel.checked_mul(c.kernel);
            // The lowered operands of the forward and input-gradient products.
            let lowered = |pixels: usize, ch: usize| {
                kk.and_then(|kk| kk.checked_mul(ch))
                    .and_then(|v| v.checked_mul(pixels))
                    .and_then(|v| v.checked_mul(rows))
            };
            for a in [
                lowered(shapes[k].h * shapes[k].w, x.c),
                lowered(x.h * x.w, c.out_ch),
            ] {
                if a.is_none_or(|a| a > MAX_TENSOR_WORDS) {
                    return Err(TrainError::Config(format!(
                        "layer '{}' needs {} words for one batch of {rows} images; systole allocates at most {MAX_TENSOR_WORDS} (2^26) words per tensor: {fix}",
                        n.name,
                        words(a)
                    )));
                }
            }
        }
    }
    for (s, name) in acts {
        let a = rows.checked_mul(s.features());
        if a.is_none_or(|a| a > MAX_TENSOR_WORDS) {
            return Err(TrainError::Config(format!(
                "layer '{name}' needs {} words for one batch of {rows} images; systole allocates at most {MAX_TENSOR_WORDS} (2^26) words per tensor: {fix}",
                words(a)
            )));
        }
    }
    if total.is_none_or(|t| t > MAX_MODEL_PARAMS) {
        return Err(TrainError::Config(format!(
            "the model has {} parameters; systole trains at most {MAX_MODEL_PARAMS} (2^26): {fix}",
            words(total)
        )));
    }
    Ok(())
}

/// A network's parameters as host values, in the graph's order: per tensor its rows, columns
/// and values (a layer's `W` then its `b`).
pub type Params = Vec<(usize, usize, Vec<f32>)>;

/// Initial parameters as host values, in the graph's order: weights Glorot-uniform from the
/// seed, biases zero.
pub fn init_params(g: &Graph, seed: u64) -> Result<Params, TrainError> {
    let mut rng = SplitMix64::new(super::rng::mix64(seed ^ 0x1417));
    let mut out = Vec::new();
    for p in g.params().map_err(|e| TrainError::Config(e.to_string()))? {
        let (rows, cols) = (p.shape.rows, p.shape.cols);
        if p.shape.fan_in == 0 {
            out.push((rows, cols, vec![0.0; rows * cols]));
            continue;
        }
        let lim = (6.0 / (p.shape.fan_in + p.shape.fan_out) as f32).sqrt();
        let w = (0..rows * cols)
            .map(|_| (rng.next_f32() * 2.0 - 1.0) * lim)
            .collect();
        out.push((rows, cols, w));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_of_the_two_models() {
        let mlp = build(&ModelSpec::Mlp { hidden: vec![32] }, 1, 8, 8, 10).unwrap();
        let kinds: Vec<&str> = mlp.nodes.iter().map(|n| n.layer.name()).collect();
        assert_eq!(kinds, ["Dense", "ReLU", "Dense"]);
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
        let p = init_params(&cnn, 1).unwrap();
        assert_eq!((p[4].0, p[4].1), (16 * 2 * 2, 10));
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
        assert_eq!((p[0].0, p[0].1), (8, 9));
        assert_eq!(p.len(), 6);
        assert!(p[1].2.iter().all(|&b| b == 0.0), "biases start at zero");
        let e = build(&ModelSpec::Mlp { hidden: vec![0] }, 1, 8, 8, 10).unwrap_err();
        assert!(e.to_string().contains("must be positive"), "{e}");
        // A graph for another image shape is refused, naming both.
        let graph = builtin::lenet5(Shape { c: 1, h: 28, w: 28 }, 10).unwrap();
        let spec = ModelSpec::Graph {
            source: "net.onnx".into(),
            graph,
        };
        let e = build(&spec, 1, 8, 8, 10).unwrap_err();
        assert!(e.to_string().contains("net.onnx takes 1x28x28"), "{e}");
    }

    #[test]
    fn oversized_models_are_refused_before_allocating() {
        let mlp = |hidden: Vec<usize>| build(&ModelSpec::Mlp { hidden }, 1, 8, 8, 10);
        let cnn = |channels: Vec<usize>| build(&ModelSpec::Cnn { channels }, 1, 8, 8, 10);
        check_sizes(&mlp(vec![32]).unwrap(), 256).unwrap();
        check_sizes(&cnn(vec![8, 16]).unwrap(), 256).unwrap();
        // 64 x 10^8 weights: 25.6 GB as f32, refused when the graph is built.
        let e = mlp(vec![100_000_000]).unwrap_err();
        assert!(
            e.to_string().contains("gives 100000000 values per image"),
            "{e}"
        );
        // Each weight matrix fits, the activations of a batch do not.
        let e = check_sizes(&mlp(vec![1 << 20]).unwrap(), 256).unwrap_err();
        assert!(e.to_string().contains("batch of 256 images"), "{e}");
        // The parameter total: many layers that each fit.
        let e = check_sizes(&mlp(vec![4096; 8]).unwrap(), 1).unwrap_err();
        assert!(e.to_string().contains("parameters"), "{e}");
        // A convolution's lowered operand.
        let e = check_sizes(&cnn(vec![4096]).unwrap(), 256).unwrap_err();
        assert!(e.to_string().contains("layer 'conv2d1' needs"), "{e}");
        // Sizes that would overflow are refused, not wrapped.
        let e = cnn(vec![4, 1 << 62, 4]).unwrap_err();
        assert!(e.to_string().contains("at most"), "{e}");
    }
}
