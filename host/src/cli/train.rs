//! `systole train` and `systole compare`.

use super::{CompareArgs, RecipeArgs, TrainArgs};
use crate::onnx::ModelChoice;
use crate::plot::{self, PlotText};
use crate::report;
use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use systole_core::Rounding;
use systole_train::dist::Single;
use systole_train::pipeline::{run_pipelined, Placement, StagePlan};
use systole_train::run::{claim_out_dir, run_dist_from, RunOptions, RunSummary};
use systole_train::{EpochRecord, Observer, Precision, Quiet, TrainConfig};

/// Turns command-line options into a run configuration, rejecting bad values with one sentence.
pub fn config(a: &TrainArgs) -> anyhow::Result<TrainConfig> {
    Ok(config_and_model(a)?.0)
}

/// [`config`] and `--model` as read for it (with an ONNX file's weights, which the run
/// starts from).
pub fn config_and_model(a: &TrainArgs) -> anyhow::Result<(TrainConfig, ModelChoice)> {
    let m = model_choice(&a.recipe)?;
    let cfg = TrainConfig {
        seed: a.seed,
        shards: a.shards,
        microbatches: a.microbatches,
        ..recipe_config(&a.recipe, &m, a.precision, a.rounding)?
    };
    cfg.validate()?;
    Ok((cfg, m))
}

/// `--model`, `--init`, `--hidden` and `--channels` read once, as every command reads them.
fn model_choice(r: &RecipeArgs) -> anyhow::Result<ModelChoice> {
    crate::onnx::resolve_model(&r.model, r.init, &r.hidden, &r.channels)
}

/// The lines a run's header gains from its model: what the import made of an ONNX file, and
/// whether the run starts from its weights (not when it resumes a checkpoint).
pub fn model_lines(m: &ModelChoice, resume: bool) -> Vec<String> {
    let mut v: Vec<String> = m
        .imported
        .iter()
        .map(|t| t.trim_end().to_string())
        .collect();
    v.extend(m.start_line().filter(|_| !resume));
    v
}

/// A `rounding=` argument of the Python package (the command line's `--rounding` is parsed by
/// clap), refused with a sentence naming the choices.
pub fn parse_rounding(name: &str) -> anyhow::Result<Rounding> {
    Rounding::parse(name)
        .with_context(|| format!("unknown rounding '{name}': use truncate, nearest or stochastic"))
}

/// The configuration of a run of `r` (its model read as `m`) in one format, seed 1, unsharded.
fn recipe_config(
    r: &RecipeArgs,
    m: &ModelChoice,
    precision: Precision,
    rounding: Rounding,
) -> anyhow::Result<TrainConfig> {
    let model = m.spec.clone();
    if r.epochs == 0 {
        bail!("--epochs must be at least 1");
    }
    let (lr, lr_decay) = r.dataset.default_rate();
    let cfg = TrainConfig {
        model,
        dataset: r.dataset.clone(),
        input_scale: r.input.input_scale,
        input_offset: r.input.input_offset,
        train_limit: r.limit,
        epochs: r.epochs,
        batch: r.batch,
        lr: r.lr.unwrap_or(lr),
        lr_decay: r.lr_decay.unwrap_or(lr_decay),
        momentum: r.momentum,
        seed: 1,
        precision,
        rounding,
        array: r.device.array,
        word_bits: r.word_bits,
        master_bits: r.master_bits.unwrap_or(r.word_bits),
        shards: None,
        microbatches: None,
    };
    cfg.validate()?;
    Ok(cfg)
}

/// Progress bars: one per epoch, replaced by a result line when the epoch ends.
struct Bars {
    bar: Option<ProgressBar>,
    epochs: usize,
}

impl Observer for Bars {
    fn run_start(&mut self, line: &str) {
        outln!("{line}");
    }

    fn epoch_start(&mut self, epoch: usize, batches: usize) {
        let bar = ProgressBar::new(batches as u64);
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:32}] {pos}/{len} batches {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(format!("epoch {epoch}/{}", self.epochs));
        self.bar = Some(bar);
    }

    fn batch_done(&mut self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    fn epoch_end(&mut self, r: &EpochRecord) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        outln!("{}", epoch_line(r, self.epochs));
    }
}

/// The line an epoch's end prints (the CLI, the Python package's `train`).
pub fn epoch_line(r: &EpochRecord, epochs: usize) -> String {
    let sat = if r.retries + r.saturated_words > 0 {
        format!(
            "  saturation: {} retries, {} words",
            r.retries, r.saturated_words
        )
    } else {
        String::new()
    };
    format!(
        "epoch {:>3}/{}  loss {:.4}  train {:6.2}%  test {:6.2}%  ({:.1} s){sat}",
        r.epoch, epochs, r.train_loss, r.train_acc, r.test_acc, r.seconds
    )
}

pub(super) fn options(a: &TrainArgs, trace: Option<systole_device::TraceWindow>) -> RunOptions {
    RunOptions {
        trace,
        device: a.recipe.device.device.clone(),
        host_step: a.host_step,
        checkpoint_every: a.checkpoint_every,
        check: a.recipe.check,
        out: a.out.clone(),
        resume: a.resume,
        overwrite: a.overwrite,
    }
}

/// `systole train` (under `mpirun`, every rank runs this; see [`systole_train::dist`]).
pub fn train(a: &TrainArgs) -> anyhow::Result<()> {
    if a.recipe.print_model {
        return print_model(a);
    }
    let dist = systole_train::dist::init()?;
    if dist.size() == 1 {
        return train_on(a, &systole_train::dist::Single);
    }
    match train_on(a, dist.as_ref()) {
        Ok(()) => Ok(()),
        // Every rank found the disagreement: rank 0 says why, then all end at once (after a
        // last collective, as mpirun ends the job at the first non-zero exit).
        Err(e) if is_disagreement(&e) => {
            if dist.rank() == 0 {
                eprintln!("error: {}", super::error_text(&e));
            }
            dist.all_reduce_sum_i64(&mut [0]);
            drop(dist);
            std::process::exit(1)
        }
        // A failing rank ends the whole job instead of leaving the others blocked in a
        // collective.
        Err(e) => {
            eprintln!("rank {}: error: {}", dist.rank(), super::error_text(&e));
            dist.abort(1)
        }
    }
}

fn is_disagreement(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<systole_train::TrainError>(),
        Some(systole_train::TrainError::Ranks(_))
    )
}

/// `--print-model`: the network built for the data set, as a table or a network file.
fn print_model(a: &TrainArgs) -> anyhow::Result<()> {
    let cfg = config(a)?;
    let data = cfg.load_data()?;
    let graph = cfg.graph_that_fits(&data)?;
    if a.recipe.json {
        outln!("{}", systole_train::model::graph_json(&graph));
    } else {
        outln!(
            "{} on {} ({}, {} classes)",
            cfg.model
                .describe(data.channels, data.height, data.width, data.classes),
            data.name,
            graph.input,
            graph.classes
        );
        outln!("{}", graph.describe()?.trim_end());
    }
    Ok(())
}

fn train_on(a: &TrainArgs, dist: &dyn systole_train::dist::Collective) -> anyhow::Result<()> {
    let (mut cfg, model) = config_and_model(a)?;
    if a.trace.trace.is_some() && dist.size() > 1 {
        bail!("--trace writes one model's waveform: run it without mpirun (one rank)");
    }
    check_trace(a, &cfg)?;
    let stages = a.stages.filter(|&s| s > 1);
    if dist.size() > 1 && cfg.shards.is_none() {
        // Every rank a replica, or with stages the replicas the ranks make.
        let s = stages.unwrap_or(1);
        cfg.shards = Some((dist.size() / s).max(1));
        cfg.validate()?;
    }
    let lead = dist.rank() == 0;
    // A data set that cannot be read fails before the run folder is made or locked.
    let data = cfg.load_data()?;
    // Held until the reports are written: a second run into the same folder stops here.
    let _lock = match &a.out {
        Some(dir) if lead => Some(claim_out_dir(dir)?),
        _ => None,
    };
    // Oversized options and impossible cuts fail before the run is announced.
    let graph = cfg.graph_that_fits(&data)?;
    let plan = match stages {
        Some(s) => {
            let plan = StagePlan::new(&graph, s, a.cut.as_deref())?;
            // A job of the wrong size fails before the run is announced.
            let shards = cfg.shards.unwrap_or(1);
            Placement::of_rank(plan.clone(), shards, dist.rank(), dist.size())?;
            Some(plan)
        }
        None if a.cut.is_some() => bail!("--cut needs --stages 2 or more"),
        None => None,
    };
    let window = a.trace.window(&a.recipe.device.device)?;
    let t0 = std::time::Instant::now();
    if lead {
        for line in model_lines(&model, a.resume) {
            outln!("{line}");
        }
        outln!(
            "training {} on {} ({} train / {} test images), {}{}",
            cfg.model
                .describe(data.channels, data.height, data.width, data.classes),
            data.name,
            cfg.train_limit.unwrap_or(usize::MAX).min(data.train.len()),
            data.test.len(),
            match cfg.precision {
                Precision::Fixed16 => format!(
                    "fixed{}{} {} on device {} ({}x{} array)",
                    cfg.word_bits,
                    if cfg.master_bits > cfg.word_bits {
                        format!(" (master weights {} bits)", cfg.master_bits)
                    } else {
                        String::new()
                    },
                    cfg.rounding.name(),
                    a.recipe.device.device,
                    cfg.array,
                    cfg.array
                ),
                p => format!("{} on the host", p.name()),
            },
            if a.recipe.check {
                ", every offloaded op checked against the golden model"
            } else {
                ""
            }
        );
        if let Some(p) = &plan {
            let ranges: Vec<String> = (0..p.stages())
                .map(|s| {
                    let l = p.layers(s);
                    format!("{}-{}", l.start + 1, l.end)
                })
                .collect();
            outln!(
                "{} pipeline stages (layers {}) x {} replica(s), {} micro-batch(es) per shard, over {} rank(s)",
                p.stages(),
                ranges.join(" | "),
                cfg.shards.unwrap_or(1),
                cfg.microbatches.unwrap_or(1),
                dist.size()
            );
        } else if let Some(s) = cfg.shards {
            outln!("{s} shards per batch over {} rank(s)", dist.size());
        }
    }
    let mut bars = Bars {
        bar: None,
        epochs: cfg.epochs,
    };
    let obs: &mut dyn Observer = if lead { &mut bars } else { &mut Quiet };
    let opts = options(a, window.clone());
    let start = model.start.as_ref();
    let summary = match stages {
        Some(s) => run_pipelined(&cfg, &data, &opts, obs, dist, (s, a.cut.as_deref(), start)),
        None => run_dist_from(&cfg, &data, &opts, obs, dist, start),
    };
    let summary = super::trace::finish(&window, summary.map_err(Into::into))?;
    if !lead {
        return Ok(());
    }
    finish(&summary, a, t0.elapsed().as_secs_f64(), dist.size())
}

/// `--trace` asks for a device to trace.
pub(super) fn check_trace(a: &TrainArgs, cfg: &TrainConfig) -> anyhow::Result<()> {
    if a.trace.trace.is_some() && cfg.precision != Precision::Fixed16 {
        bail!(
            "--trace needs --precision fixed16: {} runs on the host, with no device to trace",
            cfg.precision.name()
        );
    }
    Ok(())
}

/// Writes a run's folder: run.json, history.csv and loss.png (what the plot could write).
pub(super) fn write_run_folder(s: &RunSummary, dir: &std::path::Path) -> anyhow::Result<PlotText> {
    report::write_reports(s, dir)?;
    let png = dir.join(systole_train::run::LOSS_PNG);
    Ok(plot::plot_history(
        &s.history,
        &format!("{} - {}", s.model, s.arithmetic),
        &png,
    )?)
}

fn finish(s: &RunSummary, a: &TrainArgs, secs: f64, ranks: usize) -> anyhow::Result<()> {
    if let Some(last) = s.history.last() {
        outln!(
            "final test accuracy {:.2}% after {} epochs ({secs:.1} s)",
            last.test_acc,
            last.epoch
        );
    }
    // Under MPI the counts below are rank 0's own (its shards, or its pipeline stage): they are
    // not summed over the ranks, and the line says so rather than pass them off as the job's.
    if ranks > 1 && (s.device.is_some() || !s.saturation.is_empty()) {
        outln!("the saturation counts of the epoch lines and the device and saturation counts below are rank 0's of {ranks} (its own shards or stage)");
    }
    if let Some((name, st)) = &s.device {
        for line in report::device_lines(name, st) {
            outln!("{line}");
        }
    }
    if let Some(line) = report::saturation_line(&s.saturation) {
        outln!("{line}");
    }
    if let Some(dir) = &a.out {
        let text = write_run_folder(s, dir)?;
        outln!(
            "wrote {0}/run.json, {0}/history.csv, {0}/loss.png, {0}/checkpoint.json",
            dir.display()
        );
        if text == PlotText::None {
            outln!(
                "note: {} not found, so the plot has no text (install fonts-dejavu-core)",
                plot::FONT_PATH
            );
        }
    }
    Ok(())
}

/// `systole compare`: every format of `--formats` with seeds `--seed`.. (`--seeds` of them).
pub fn compare(c: &CompareArgs) -> anyhow::Result<()> {
    if c.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let last_seed = c
        .seed
        .checked_add(c.seeds - 1)
        .context("--seed + --seeds is beyond the largest seed")?;
    let names: Vec<String> = c
        .formats
        .iter()
        .map(|f| f.name(c.recipe.word_bits))
        .collect();
    let modes: Vec<(&str, (Precision, Rounding))> = names
        .iter()
        .zip(&c.formats)
        .map(|(name, f)| (name.as_str(), (f.precision, f.rounding)))
        .collect();
    if let Some(dup) = (1..modes.len()).find(|&i| modes[..i].iter().any(|m| m.1 == modes[i].1)) {
        bail!("--formats names {} twice", modes[dup].0);
    }
    let model = model_choice(&c.recipe)?;
    let base = recipe_config(&c.recipe, &model, Precision::Fixed16, Rounding::NearestEven)?;
    let configs = |(p, r): (Precision, Rounding)| -> Vec<TrainConfig> {
        // --word-bits and --master-bits are the fixed-point formats' widths; floats have none.
        let (word_bits, master_bits) = match p {
            Precision::Fixed16 => (base.word_bits, base.master_bits),
            _ => (16, 16),
        };
        (c.seed..=last_seed)
            .map(|seed| TrainConfig {
                precision: p,
                rounding: r,
                seed,
                word_bits,
                master_bits,
                ..base.clone()
            })
            .collect()
    };
    for &(_, m) in &modes {
        for cfg in configs(m) {
            cfg.validate()?;
        }
    }
    let data = base.load_data()?;
    base.graph_that_fits(&data)?;
    let _lock = match &c.out {
        Some(dir) => Some(claim_compare_dir(dir, c.overwrite)?),
        None => None,
    };
    let opts = RunOptions {
        device: c.recipe.device.device.clone(),
        host_step: false,
        checkpoint_every: 1,
        check: c.recipe.check,
        out: None,
        resume: false,
        overwrite: false,
        trace: None,
    };
    for line in model_lines(&model, false) {
        outln!("{line}");
    }
    let mut csv = String::from("format,seed,test_acc\n");
    let mut first_mean = None;
    let vs = format!("vs {}", modes[0].0);
    let w = vs.len().max(8);
    outln!(
        "{:18} {:>24} {:>7} {vs:>w$}",
        "format",
        "test accuracy per seed",
        "mean"
    );
    for &(name, m) in &modes {
        let mut accs = Vec::new();
        for cfg in configs(m) {
            let s = run_dist_from(
                &cfg,
                &data,
                &opts,
                &mut Quiet,
                &Single,
                model.start.as_ref(),
            )?;
            let acc = s.history.last().map(|h| h.test_acc).unwrap_or(0.0);
            csv.push_str(&format!("{name},{},{acc:.3}\n", cfg.seed));
            if let Some(dir) = &c.out {
                let run_dir = dir.join(format!("{name}-seed{}", cfg.seed));
                std::fs::create_dir_all(&run_dir)
                    .with_context(|| format!("cannot create {}", run_dir.display()))?;
                write_run_folder(&s, &run_dir)?;
            }
            accs.push(acc);
        }
        let mean = accs.iter().sum::<f32>() / accs.len() as f32;
        let f = *first_mean.get_or_insert(mean);
        let shown: Vec<String> = accs.iter().map(|x| format!("{x:.2}")).collect();
        outln!(
            "{name:18} {:>24} {mean:7.2} {:>w$}",
            shown.join(" "),
            format!("{:+.2}", mean - f)
        );
    }
    if let Some(dir) = &c.out {
        systole_train::write_atomic(&dir.join(COMPARE_CSV), csv.as_bytes())?;
        outln!(
            "wrote {0}/{COMPARE_CSV} and each run's run.json, history.csv and loss.png in {0}/FORMAT-seedN",
            dir.display()
        );
    }
    Ok(())
}

const COMPARE_CSV: &str = "compare.csv";

/// Takes `dir` for a compare (the run folder's lock), refusing a folder that holds an earlier
/// compare's results unless `overwrite`.
fn claim_compare_dir(
    dir: &std::path::Path,
    overwrite: bool,
) -> anyhow::Result<systole_train::RunLock> {
    let lock = claim_out_dir(dir)?;
    let csv = dir.join(COMPARE_CSV);
    if !overwrite && std::fs::symlink_metadata(&csv).is_ok() {
        bail!(
            "{} holds the results of an earlier compare: choose another --out, or replace them with --overwrite",
            csv.display()
        );
    }
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use clap::Parser;

    fn rate(args: &[&str]) -> (f32, f32) {
        let cli = Cli::try_parse_from([&["systole", "train"], args].concat()).unwrap();
        let Command::Train(a) = cli.command else {
            unreachable!()
        };
        let c = super::config(&a).unwrap();
        (c.lr, c.lr_decay)
    }

    /// Each data set trains at its measured rate unless told otherwise.
    #[test]
    fn the_default_rate_is_the_data_sets_own() {
        assert_eq!(rate(&[]), (0.05, 1.0));
        assert_eq!(rate(&["--dataset", "fashion-mnist"]), (0.02, 0.85));
        assert_eq!(rate(&["--dataset", "fashion"]), (0.02, 0.85));
        assert_eq!(
            rate(&["--dataset", "fashion-mnist", "--lr", "0.1"]),
            (0.1, 0.85)
        );
        assert_eq!(rate(&["--lr-decay", "0.5"]), (0.05, 0.5));
        // A set of the user's trains at Fashion-MNIST's rate (docs/DATA.md).
        assert_eq!(rate(&["--dataset", "idx:some/dir"]), (0.02, 0.85));
        assert_eq!(rate(&["--dataset", "npz:set.npz"]), (0.02, 0.85));
    }
}
