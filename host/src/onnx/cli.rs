//! `systole eval` and `systole export`: their options and the commands.

use crate::cli::DeviceArgs;
use crate::onnx::{self as ox, InputMap, Ready};
use anyhow::{bail, Context};
use clap::Args;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use systole_core::numeric::{MAX_WORD_BITS, MIN_WORD_BITS};
use systole_onnx::infer;
use systole_train::{check_target, write_atomic};

/// A command's output line (a reader that went away ends the process quietly).
macro_rules! say {
    ($($arg:tt)*) => {
        crate::cli::write_line(&format!($($arg)*))
    };
}

/// Options of `eval`.
#[derive(Debug, Clone, Args)]
#[command(allow_negative_numbers = true)]
pub struct EvalArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub device: DeviceArgs,
    /// The network: an ONNX file (.onnx) or a run folder of `systole train` (its checkpoint).
    #[arg(long)]
    pub model: PathBuf,
    /// Data set: digits or fashion-mnist (its test split is evaluated).
    #[arg(long)]
    pub dataset: String,
    /// Evaluate only the first N test images.
    #[arg(long, value_parser = crate::cli::whole)]
    pub limit: Option<usize>,
    /// The network's input is pixel / pixel_max x S + O: S (an ONNX model's own scale).
    #[arg(long, default_value_t = 1.0)]
    pub input_scale: f32,
    /// O of --input-scale.
    #[arg(long, default_value_t = 0.0)]
    pub input_offset: f32,
    /// Check every product against the golden model.
    #[arg(long)]
    pub check: bool,
    /// Word width W in bits (8 to 16) a float ONNX file is evaluated at: its weights and
    /// formats at W, on an array of W-bit words [default: the model's own, 16 for a float
    /// file]. A run folder or a quantized file takes only its own width.
    #[arg(long, value_parser = crate::cli::whole_u32)]
    pub word_bits: Option<u32>,
    /// Folder for eval.json and predictions.csv (created; existing files are not replaced).
    /// Without it the results are printed and nothing is written.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Options of `export`.
#[derive(Debug, Clone, Args)]
#[command(allow_negative_numbers = true)]
pub struct ExportArgs {
    /// The run folder of `systole train` to export (or an ONNX file: its formats are then
    /// calibrated on --dataset).
    pub run: PathBuf,
    /// Data set whose training images calibrate the formats (default: the run's).
    #[arg(long)]
    pub dataset: Option<String>,
    /// The ONNX file to write (not replaced if it exists).
    #[arg(long)]
    pub out: PathBuf,
    /// The input's scale the run was trained with (pixel / pixel_max x S + O).
    #[arg(long, default_value_t = 1.0)]
    pub input_scale: f32,
    /// O of --input-scale.
    #[arg(long, default_value_t = 0.0)]
    pub input_offset: f32,
    /// Word width W in bits (8 to 16) an ONNX file is exported at, as `eval --word-bits`.
    #[arg(long, value_parser = crate::cli::whole_u32)]
    pub word_bits: Option<u32>,
}

/// `--word-bits`, refused outside 8 to 16 before anything is read.
fn check_width(w: Option<u32>) -> Result<(), Failure> {
    match w {
        Some(w) if !(MIN_WORD_BITS..=MAX_WORD_BITS).contains(&w) => {
            Err(Failure::Options(anyhow::anyhow!(
                "--word-bits {w}: give a word width from {MIN_WORD_BITS} to {MAX_WORD_BITS} bits"
            )))
        }
        _ => Ok(()),
    }
}

/// Sets `net`'s word width to `w` (`--word-bits`): a float file's weights and formats are then
/// made at W; a run folder or a file that carries its own width (QuantizeLinear/DequantizeLinear
/// pairs or a Clip to a W-bit range) takes only that width.
fn at_width(net: &mut systole_onnx::Net, w: Option<u32>, model: &Path) -> anyhow::Result<()> {
    let Some(w) = w else {
        return Ok(());
    };
    let own = model.is_dir() || net.formats().is_some() || net.word_bits != infer::WORD_BITS;
    if own && w != net.word_bits {
        bail!(
            "{} holds {}-bit words of its own ({}): leave out --word-bits or give {}",
            model.display(),
            net.word_bits,
            if model.is_dir() {
                "the run's width"
            } else {
                "its quantization"
            },
            net.word_bits
        );
    }
    net.word_bits = w;
    Ok(())
}

fn model_exists(path: &Path) -> anyhow::Result<()> {
    if !path.exists() {
        bail!(
            "{} does not exist: give a run folder of `systole train` or an ONNX file",
            path.display()
        );
    }
    Ok(())
}

/// The network of `--model`: an ONNX file, or a run folder (what the import made of it said).
fn load_model(path: &Path, say: &mut dyn FnMut(&str)) -> anyhow::Result<systole_onnx::Net> {
    model_exists(path)?;
    let net = if path.is_dir() {
        ox::net_from_run(path)?.0
    } else {
        systole_onnx::import_file(path).with_context(|| format!("importing {}", path.display()))?
    };
    say(&net.describe());
    Ok(net)
}

fn refuse_existing(p: &Path) -> anyhow::Result<()> {
    if p.exists() {
        bail!(
            "{} exists: choose another --out (systole does not replace it)",
            p.display()
        );
    }
    check_target(p)?;
    Ok(())
}

/// `systole eval` or `systole export`.
pub fn run(c: crate::cli::Command) -> anyhow::Result<()> {
    match c {
        crate::cli::Command::Eval(a) => eval(&a),
        crate::cli::Command::Export(a) => export(&a),
        _ => unreachable!("only eval and export come here"),
    }
}

/// `systole eval`: the evaluation, its lines printed, its files written.
pub fn eval(a: &EvalArgs) -> anyhow::Result<()> {
    evaluation(a, &mut |l| say!("{l}")).map_err(Failure::into_error)?;
    Ok(())
}

/// Why `eval` or `export` failed: its options (nothing was read, opened or written), or the
/// model, its data or its device.
#[derive(Debug)]
pub enum Failure {
    /// An option is refused.
    Options(anyhow::Error),
    /// The command failed after its options were taken.
    Run(anyhow::Error),
}

impl Failure {
    /// The error, whichever its kind.
    pub fn into_error(self) -> anyhow::Error {
        match self {
            Failure::Options(e) | Failure::Run(e) => e,
        }
    }
}

/// What `eval` found: eval.json's content and each image's result.
pub struct Evaluation {
    /// eval.json's content.
    pub report: serde_json::Value,
    /// Each image's logits, prediction and label.
    pub result: ox::EvalResult,
}

fn input_map(scale: f32, offset: f32) -> Result<InputMap, Failure> {
    if !(scale.is_finite() && offset.is_finite()) {
        return Err(Failure::Options(anyhow::anyhow!(
            "--input-scale and --input-offset must be finite numbers"
        )));
    }
    Ok(InputMap { scale, offset })
}

/// `systole eval` with its lines said through `say`: eval.json and predictions.csv written
/// into `--out` when it is given (nothing is replaced), the results returned.
pub fn evaluation(a: &EvalArgs, say: &mut dyn FnMut(&str)) -> Result<Evaluation, Failure> {
    let files = a
        .out
        .as_ref()
        .map(|o| (o.join("eval.json"), o.join("predictions.csv")));
    if let Some((json, csv)) = &files {
        refuse_existing(json).map_err(Failure::Options)?;
        refuse_existing(csv).map_err(Failure::Options)?;
    }
    let map = input_map(a.input_scale, a.input_offset)?;
    check_width(a.word_bits)?;
    model_exists(&a.model).map_err(Failure::Options)?;
    let ds = systole_train::data::load(&a.dataset).map_err(|e| Failure::Options(e.into()))?;
    let mut run = || -> anyhow::Result<Evaluation> {
        let mut net = load_model(&a.model, say)?;
        at_width(&mut net, a.word_bits, &a.model)?;
        ox::check_fits(&net, &ds)?;
        let r = ox::ready(net, &ds, map)?;
        say(&format!(
            "formats: {} (input {} fractional bits)",
            r.formats_from, r.formats.input
        ));
        let mut p = ox::products_at(
            &a.device.device,
            a.device.array,
            a.check,
            r.formats.word_bits,
        )?;
        let res = ox::evaluate(&mut p, &r, &ds.test, map, a.limit)?;
        let stats = p.device().stats();
        let n = res.labels.len();
        let acc = 100.0 * res.correct() as f64 / n.max(1) as f64;
        say(&format!(
            "{n} test images of {}: accuracy {acc:.2}%, loss {:.4} on {}",
            ds.name,
            res.loss(),
            p.device().name()
        ));
        let report = serde_json::json!({
            "model": a.model.display().to_string(),
            "dataset": ds.name,
            "split": "test",
            "images": n,
            "correct": res.correct(),
            "accuracy": acc,
            "loss": res.loss(),
            "device": p.device().name(),
            "check": a.check,
            "input": { "scale": map.scale, "offset": map.offset },
            "formats": { "from": r.formats_from, "word_bits": r.formats.word_bits, "input": r.formats.input, "layers": layer_formats(&r) },
            "device_stats": stats,
        });
        if let (Some(out), Some((json, csv))) = (&a.out, &files) {
            std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
            write_atomic(json, serde_json::to_string_pretty(&report)?.as_bytes())?;
            write_atomic(csv, predictions_csv(&res).as_bytes())?;
            say(&format!("wrote {} and {}", json.display(), csv.display()));
        }
        Ok(Evaluation {
            report,
            result: res,
        })
    };
    run().map_err(Failure::Run)
}

fn layer_formats(r: &Ready) -> serde_json::Value {
    r.net
        .nodes
        .iter()
        .zip(&r.formats.nodes)
        .map(|(n, f)| serde_json::json!({ "layer": n.name, "op": n.op.name(), "fracs": f }))
        .collect()
}

/// `index,label,predicted,logit_0,...`, one row per image in the data set's order.
pub fn predictions_csv(res: &ox::EvalResult) -> String {
    let classes = res.logits.first().map_or(0, Vec::len);
    let mut s = String::from("index,label,predicted");
    for j in 0..classes {
        let _ = write!(s, ",logit_{j}");
    }
    s.push('\n');
    for (i, z) in res.logits.iter().enumerate() {
        let _ = write!(s, "{i},{},{}", res.labels[i], res.predicted[i]);
        for v in z {
            let _ = write!(s, ",{v}");
        }
        s.push('\n');
    }
    s
}

/// `systole export`.
pub fn export(a: &ExportArgs) -> anyhow::Result<()> {
    exported(a, &mut |l| say!("{l}")).map_err(Failure::into_error)
}

/// `systole export` with its lines said through `say`: the ONNX file written at `--out`.
pub fn exported(a: &ExportArgs, say: &mut dyn FnMut(&str)) -> Result<(), Failure> {
    refuse_existing(&a.out).map_err(Failure::Options)?;
    let map = input_map(a.input_scale, a.input_offset)?;
    check_width(a.word_bits)?;
    model_exists(&a.run).map_err(Failure::Options)?;
    if !a.run.is_dir() && a.dataset.is_none() {
        return Err(Failure::Options(anyhow::anyhow!(
            "exporting an ONNX file needs --dataset: its training images calibrate the formats"
        )));
    }
    let mut run = || -> anyhow::Result<()> {
        let (mut net, name) = if a.run.is_dir() {
            let (net, cp) = ox::net_from_run(&a.run)?;
            if a.dataset
                .as_ref()
                .is_some_and(|d| *d != cp.config.dataset.to_string())
            {
                bail!(
                    "the run was trained on {}: leave out --dataset",
                    cp.config.dataset
                );
            }
            (net, cp.config.dataset.to_string())
        } else {
            let net = load_model(&a.run, say)?;
            (net, a.dataset.clone().unwrap_or_default())
        };
        at_width(&mut net, a.word_bits, &a.run)?;
        let ds = systole_train::data::load(&name)?;
        ox::check_fits(&net, &ds)?;
        let r = ox::ready(net, &ds, map)?;
        let divisor = ds.byte_divisor.unwrap_or(1);
        let meta = vec![
            (
                "systole.input".to_string(),
                format!(
                    "pixel / {divisor} x {} + {} (pixels of {}, as systole trained on them)",
                    map.scale, map.offset, ds.name
                ),
            ),
            ("systole.formats".to_string(), r.formats_from.clone()),
            ("systole.dataset".to_string(), ds.name.clone()),
            ("systole.classes".to_string(), ds.classes.to_string()),
        ];
        let m = systole_onnx::export(&r.net, &r.weights, &r.formats, &meta);
        write_atomic(&a.out, &systole_onnx::build::encode(&m))?;
        say(&format!(
            "wrote {} ({} layers, opset {}, formats {})",
            a.out.display(),
            r.net.nodes.len(),
            systole_onnx::EXPORT_OPSET,
            r.formats_from
        ));
        Ok(())
    };
    run().map_err(Failure::Run)
}
