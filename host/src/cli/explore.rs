//! `systole explore`: parses the sweep's options, runs [`crate::explore`] with a progress bar
//! and prints its table. The sweep itself lives in `crate::explore`.

use super::{ExploreArgs, Resources};
use crate::explore::report::{self, PointResult, SweepFile};
use crate::explore::sweep::{Progress, Sweep};
use crate::explore::synth::{Estimated, Synthesizer, Yosys};
use crate::explore::{self, Axes, ExploreError, Recipe};
use crate::plot::{self, PlotText};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

/// The progress bar: one step per piece of work.
struct Bar(ProgressBar);

impl Progress for Bar {
    fn begin(&self, tasks: u64, resumed: usize) {
        self.0.set_length(tasks);
        if resumed > 0 {
            self.0.println(format!(
                "resuming: {resumed} point(s) already in explore.json are kept"
            ));
        }
    }
    fn task_done(&self, what: &str) {
        self.0.set_message(what.to_string());
        self.0.inc(1);
    }
    fn point_done(&self, r: &PointResult) {
        self.0.println(format!(
            "{:<28} {:6.2}% +- {:4.2}  {:>10} cycles/epoch  {:>6} LUT",
            r.point.label(),
            r.acc_mean,
            r.acc_std,
            r.cycles_per_epoch,
            r.resources
                .map_or("n/a".into(), |x| (x.luts + x.lutram).to_string())
        ));
    }
}

/// Where synthesis results are kept: `--synth-cache`, else `$XDG_CACHE_HOME/systole/synth`,
/// `~/.cache/systole/synth`, or the sweep's own folder.
fn cache_dir(a: &ExploreArgs) -> PathBuf {
    synth_cache_dir(a.synth_cache.as_deref(), &a.out.join("synth-cache"))
}

/// The synthesis cache: `given`, else `$XDG_CACHE_HOME/systole/synth`,
/// `~/.cache/systole/synth`, or `fallback` (shared by `explore` and `boards --synthesize`).
pub(super) fn synth_cache_dir(
    given: Option<&std::path::Path>,
    fallback: &std::path::Path,
) -> PathBuf {
    if let Some(d) = given {
        return d.to_path_buf();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    match base {
        Some(b) => b.join("systole").join("synth"),
        None => fallback.to_path_buf(),
    }
}

/// `systole explore`.
pub fn explore(a: &ExploreArgs) -> anyhow::Result<()> {
    let axes = Axes {
        arrays: a.array.clone(),
        fm_depths: a.fm_depth.clone(),
        word_bits: a.word_bits.clone(),
        roundings: a.rounding.clone(),
        dsp_packs: a.dsp_pack.clone(),
    };
    let points = axes.points(&systole_sim::built_sizes())?;
    let boards = explore::parse_boards(&a.board)?;
    let (base, model) = Recipe {
        model: a.model.clone(),
        init: a.init,
        hidden: a.hidden.clone(),
        channels: a.channels.clone(),
        dataset: a.dataset.clone(),
        input_scale: a.input.input_scale,
        input_offset: a.input.input_offset,
        limit: a.limit,
        epochs: a.epochs,
        batch: a.batch,
        lr: a.lr,
        lr_decay: a.lr_decay,
        momentum: a.momentum,
    }
    .config_and_model()?;
    for (flag, v) in [
        ("--seeds", a.seeds as usize),
        ("--sample-steps", a.sample_steps),
    ] {
        if v == 0 {
            return Err(ExploreError::Zero { flag }.into());
        }
    }
    let last = a
        .seed
        .checked_add(a.seeds - 1)
        .ok_or_else(|| anyhow::anyhow!("--seed + --seeds is beyond the largest seed"))?;
    let synth: Box<dyn Synthesizer> = match a.resources {
        Resources::Yosys => Box::new(Yosys::bridge(cache_dir(a))),
        Resources::Estimate => Box::new(Estimated),
    };
    // Every input is checked before the folder is made or locked.
    let data = base.load_data()?;
    base.graph_that_fits(&data)?;
    use crate::explore::report::{CSV, JSON, PLOT};
    let _lock = systole_train::run::claim_out_dir_for(&a.out, &[CSV, JSON, PLOT])?;
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    for line in super::train::model_lines(&model, false) {
        outln!("{line}");
    }
    let sweep = Sweep {
        base,
        start: model.start,
        points,
        seeds: (a.seed..=last).collect(),
        boards,
        sample_steps: a.sample_steps,
        jobs,
        synth: synth.as_ref(),
        cache: cache_dir(a),
        out: a.out.clone(),
        overwrite: a.overwrite,
    };
    outln!(
        "exploring {} design point(s) x {} seed(s) on {} ({} epoch(s) each), {} worker(s); resources from {}",
        sweep.points.len(),
        sweep.seeds.len(),
        data.name,
        sweep.base.epochs,
        jobs,
        synth.source()
    );
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("[{bar:32}] {pos}/{len} {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let bar = Bar(bar);
    let result = sweep.run(&data, &bar);
    bar.0.finish_and_clear();
    let file = result?;
    let title = format!("{} on {}", file.settings.model, file.settings.dataset);
    let text = explore::pareto::plot(&file.points, &title, &a.out.join(report::PLOT))?;
    print_table(&file);
    outln!(
        "wrote {0}/{1}, {0}/{2}, {0}/{3}",
        a.out.display(),
        report::CSV,
        report::JSON,
        report::PLOT
    );
    if text == PlotText::None {
        outln!(
            "note: {} not found, so the plot has no text (install fonts-dejavu-core)",
            plot::FONT_PATH
        );
    }
    Ok(())
}

fn print_table(f: &SweepFile) {
    outln!(
        "{:<28} {:>16} {:>12} {:>7} {:>6} {:>4} {:>6}  fits",
        "point",
        "test acc %",
        "cycles/ep",
        "LUT",
        "FF",
        "DSP",
        "RAMB18"
    );
    for p in &f.points {
        let na = || "n/a".to_string();
        let r = |f: fn(&crate::explore::synth::Resources) -> u32| {
            p.resources.as_ref().map_or_else(na, |r| f(r).to_string())
        };
        let fits: Vec<String> = p
            .boards
            .iter()
            .filter(|b| b.fits)
            .map(|b| match b.routed_fmax_mhz {
                Some(f) => format!(
                    "{} ({:.2} ms/epoch, routed fmax {f:.1} MHz for {} MHz)",
                    b.board,
                    1e3 * b.epoch_seconds,
                    f64::from(b.clock_hz) / 1e6
                ),
                None => format!("{} ({:.2} ms/epoch)", b.board, 1e3 * b.epoch_seconds),
            })
            .collect();
        outln!(
            "{:<28} {:>9.2} +- {:4.2} {:>12} {:>7} {:>6} {:>4} {:>6}  {}",
            p.point.label(),
            p.acc_mean,
            p.acc_std,
            p.cycles_per_epoch,
            r(|x| x.luts + x.lutram),
            r(|x| x.ffs),
            r(|x| x.dsps),
            r(|x| x.brams),
            if p.resources.is_none() {
                // The reason, as every board's note gives it.
                let why = p.boards.first().map_or("", |b| b.note.as_str());
                format!("n/a ({why})")
            } else if fits.is_empty() {
                "none".into()
            } else {
                fits.join(", ")
            }
        );
    }
}
