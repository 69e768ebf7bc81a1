//! `systole train` and `systole compare`.

use super::{CompareArgs, TrainArgs};
use crate::plot::{self, PlotText};
use crate::report;
use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use systole_core::Rounding;
use systole_train::data;
use systole_train::model::ModelSpec;
use systole_train::run::{claim_out_dir, run, run_dist, RunOptions, RunSummary};
use systole_train::{EpochRecord, Observer, Precision, Quiet, TrainConfig};

/// Turns command-line options into a run configuration, rejecting bad values with one sentence.
pub fn config(a: &TrainArgs) -> anyhow::Result<TrainConfig> {
    let model = match a.model.as_str() {
        "mlp" => ModelSpec::Mlp {
            hidden: a.hidden.clone(),
        },
        "cnn" => ModelSpec::Cnn {
            channels: a.channels.clone(),
        },
        m => bail!("unknown model '{m}': use mlp or cnn"),
    };
    let precision = Precision::parse(&a.precision).with_context(|| {
        format!(
            "unknown precision '{}': use fixed16, f32, f16 or bf16",
            a.precision
        )
    })?;
    let rounding = Rounding::parse(&a.rounding).with_context(|| {
        format!(
            "unknown rounding '{}': use truncate, nearest or stochastic",
            a.rounding
        )
    })?;
    if let Some(f) = a.frac_bits {
        systole_core::ArrayConfig::new(a.device.array, f, 512)
            .map_err(|e| anyhow::anyhow!("--frac-bits: {e}"))?;
    }
    if a.epochs == 0 {
        bail!("--epochs must be at least 1");
    }
    let cfg = TrainConfig {
        model,
        dataset: a.dataset.clone(),
        train_limit: a.limit,
        epochs: a.epochs,
        batch: a.batch,
        lr: a.lr,
        momentum: a.momentum,
        seed: a.seed,
        precision,
        rounding,
        array: a.device.array,
        shards: a.shards,
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
        let sat = if r.retries + r.saturated_words > 0 {
            format!(
                "  saturation: {} retries, {} words",
                r.retries, r.saturated_words
            )
        } else {
            String::new()
        };
        outln!(
            "epoch {:>3}/{}  loss {:.4}  train {:6.2}%  test {:6.2}%  ({:.1} s){sat}",
            r.epoch,
            self.epochs,
            r.train_loss,
            r.train_acc,
            r.test_acc,
            r.seconds
        );
    }
}

fn options(a: &TrainArgs) -> RunOptions {
    RunOptions {
        device: a.device.device.clone(),
        check: a.check,
        out: a.out.clone(),
        resume: a.resume,
        overwrite: a.overwrite,
    }
}

/// `systole train` (under `mpirun`, every rank runs this; see [`systole_train::dist`]).
pub fn train(a: &TrainArgs) -> anyhow::Result<()> {
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

fn train_on(a: &TrainArgs, dist: &dyn systole_train::dist::Collective) -> anyhow::Result<()> {
    let mut cfg = config(a)?;
    if dist.size() > 1 && cfg.shards.is_none() {
        cfg.shards = Some(dist.size());
        cfg.validate()?;
    }
    let lead = dist.rank() == 0;
    // Held until the reports are written: a second run into the same folder stops here.
    let _lock = match &a.out {
        Some(dir) if lead => Some(claim_out_dir(dir)?),
        _ => None,
    };
    let data = data::load(&cfg.dataset)?;
    // Oversized options fail before the run is announced.
    cfg.layers_that_fit(&data)?;
    let t0 = std::time::Instant::now();
    if lead {
        outln!(
            "training {} on {} ({} train / {} test images), {}{}",
            cfg.model
                .describe(data.channels, data.height, data.width, data.classes),
            data.name,
            cfg.train_limit.unwrap_or(usize::MAX).min(data.train.len()),
            data.test.len(),
            match cfg.precision {
                Precision::Fixed16 => format!(
                    "fixed16 {} on device {} ({}x{} array)",
                    cfg.rounding.name(),
                    a.device.device,
                    cfg.array,
                    cfg.array
                ),
                p => format!("{} on the host", p.name()),
            },
            if a.check {
                ", every offloaded op checked against the golden model"
            } else {
                ""
            }
        );
        if let Some(s) = cfg.shards {
            outln!("{s} shards per batch over {} rank(s)", dist.size());
        }
    }
    let mut bars = Bars {
        bar: None,
        epochs: cfg.epochs,
    };
    let obs: &mut dyn Observer = if lead { &mut bars } else { &mut Quiet };
    let summary = run_dist(&cfg, &data, &options(a), obs, dist)?;
    if !lead {
        return Ok(());
    }
    finish(&summary, a, t0.elapsed().as_secs_f64())
}

fn finish(s: &RunSummary, a: &TrainArgs, secs: f64) -> anyhow::Result<()> {
    if let Some(last) = s.history.last() {
        outln!(
            "final test accuracy {:.2}% after {} epochs ({secs:.1} s)",
            last.test_acc,
            last.epoch
        );
    }
    if let Some((name, st)) = &s.device {
        outln!(
            "device {name}: {} operations, {} MACs, {} cycles",
            st.ops,
            st.macs,
            st.cycles
        );
    }
    if let Some(line) = report::saturation_line(&s.saturation) {
        println!("{line}");
    }
    if let Some(dir) = &a.out {
        report::write_reports(s, dir)?;
        let png = dir.join("loss.png");
        let text =
            plot::plot_history(&s.history, &format!("{} - {}", s.model, s.arithmetic), &png)?;
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

/// `systole compare`.
pub fn compare(c: &CompareArgs) -> anyhow::Result<()> {
    if c.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let base = config(&c.train)?;
    let data = data::load(&base.dataset)?;
    let modes = [
        (Precision::F32, Rounding::NearestEven),
        (Precision::F16, Rounding::NearestEven),
        (Precision::Bf16, Rounding::NearestEven),
        (Precision::Fixed16, Rounding::Stochastic),
        (Precision::Fixed16, Rounding::NearestEven),
    ];
    let opts = RunOptions {
        out: None,
        resume: false,
        overwrite: false,
        ..options(&c.train)
    };
    let mut csv = String::from("precision,rounding,seed,test_acc\n");
    let mut f32_mean = None;
    outln!(
        "{:8} {:10} {:>24} {:>7} {:>7}",
        "format",
        "rounding",
        "test accuracy per seed",
        "mean",
        "vs f32"
    );
    for (p, r) in modes {
        let mut accs = Vec::new();
        for seed in 1..=c.seeds {
            let cfg = TrainConfig {
                precision: p,
                rounding: r,
                seed,
                ..base.clone()
            };
            let s = run(&cfg, &data, &opts, &mut Quiet)?;
            let acc = s.history.last().map(|h| h.test_acc).unwrap_or(0.0);
            csv.push_str(&format!("{},{},{seed},{acc:.3}\n", p.name(), r.name()));
            accs.push(acc);
        }
        let mean = accs.iter().sum::<f32>() / accs.len() as f32;
        let f = *f32_mean.get_or_insert(mean);
        let shown: Vec<String> = accs.iter().map(|x| format!("{x:.2}")).collect();
        let rname = if p == Precision::Fixed16 {
            r.name()
        } else {
            "-"
        };
        outln!(
            "{:8} {:10} {:>24} {mean:7.2} {:+7.2}",
            p.name(),
            rname,
            shown.join(" "),
            mean - f
        );
    }
    if let Some(dir) = &c.train.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        systole_train::outfile::write_atomic(&dir.join("compare.csv"), csv.as_bytes())?;
        outln!("wrote {}/compare.csv", dir.display());
    }
    Ok(())
}
