//! The sweep on the golden model and the Verilated 4x4 / 8x8 arrays with a stand-in for
//! Yosys: a few seconds. The real Yosys path is `#[ignore]`d.

use super::cycles::{self, CycleTable, OpShape};
use super::report::{self, SweepFile};
use super::sweep::{Progress, Sweep};
use super::synth::{Estimated, Resources, Synthesizer};
use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Yosys's stand-in: the resource model's numbers, counting its calls; fails on the design
/// of array `fail_array`.
struct FakeYosys {
    calls: AtomicUsize,
    fail_array: Option<usize>,
}

impl Synthesizer for FakeYosys {
    fn source(&self) -> String {
        "fake yosys".into()
    }
    fn design_hash(&self, p: &DesignPoint) -> Result<String, ExploreError> {
        Ok(format!(
            "{:016x}",
            synth::fnv1a(&[&format!("{:?}", p.hardware_key())])
        ))
    }
    fn synthesize(&self, p: &DesignPoint) -> Result<Resources, ExploreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail_array == Some(p.array) {
            return Err(ExploreError::Worker("yosys killed".into()));
        }
        Estimated.synthesize(p)
    }
}

#[derive(Default)]
struct Log(Mutex<Vec<String>>);
impl Progress for Log {
    fn task_done(&self, what: &str) {
        self.0.lock().unwrap().push(what.to_string());
    }
}

fn recipe() -> systole_train::TrainConfig {
    Recipe {
        model: "mlp".into(),
        hidden: vec![16],
        channels: vec![],
        dataset: "digits".into(),
        limit: Some(96),
        epochs: 1,
        batch: 32,
        lr: None,
        lr_decay: None,
        momentum: 0.9,
    }
    .config()
    .unwrap()
}

fn points(arrays: &str, roundings: &str) -> Vec<DesignPoint> {
    Axes {
        arrays: arrays.into(),
        fm_depths: "0".into(),
        word_bits: "16".into(),
        roundings: roundings.into(),
    }
    .points(&systole_sim::built_sizes())
    .unwrap()
}

fn sweep<'a>(
    dir: &std::path::Path,
    pts: Vec<DesignPoint>,
    synth: &'a dyn Synthesizer,
) -> Sweep<'a> {
    Sweep {
        base: recipe(),
        points: pts,
        seeds: vec![1, 2],
        boards: systole_boards::list().iter().collect(),
        sample_steps: 1,
        jobs: 2,
        synth,
        cache: dir.join("cache"),
        out: dir.to_path_buf(),
        overwrite: false,
    }
}

fn data() -> systole_train::data::Dataset {
    systole_train::data::load("digits").unwrap()
}

/// A 2-point sweep writes its three files; accuracy is `systole train`'s on the golden
/// model, the cycle model matched the Verilated count, and a rerun with one more point
/// neither synthesises nor trains the written points again.
#[test]
fn a_two_point_sweep_reports_and_a_rerun_only_adds_the_new_point() {
    let dir = tempfile::tempdir().unwrap();
    let data = data();
    let fake = FakeYosys {
        calls: 0.into(),
        fail_array: None,
    };
    let file = sweep(dir.path(), points("4,8", "stochastic"), &fake)
        .run(&data, &Log::default())
        .unwrap();
    assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
    assert_eq!(file.points.len(), 2);
    for r in &file.points {
        for (seed, acc) in [1, 2].into_iter().zip(&r.acc_per_seed) {
            let cfg = cycles::point_config(&recipe(), &r.point, seed);
            let opts = systole_train::run::RunOptions {
                device: "golden".into(),
                host_step: false,
                check: false,
                out: None,
                resume: false,
                overwrite: false,
                trace: None,
            };
            let s = systole_train::run::run(&cfg, &data, &opts, &mut systole_train::Quiet).unwrap();
            assert_eq!(
                s.history.last().unwrap().test_acc,
                *acc,
                "{}",
                r.point.label()
            );
        }
        assert!(r.sample.verilated > 0);
        assert_eq!(r.sample.verilated, r.sample.model);
        assert!(r.cycles_per_epoch > r.sample.verilated, "{r:?}");
        assert_eq!(
            r.resources.unwrap().dsps as usize,
            r.point.array * r.point.array
        );
    }
    // The 8x8 array does the same products in fewer cycles.
    assert!(file.points[1].cycles_per_epoch < file.points[0].cycles_per_epoch);
    let csv = std::fs::read_to_string(dir.path().join(report::CSV)).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(csv.starts_with("array,fm_depth,word_bits,rounding,acc_mean"));
    let png = std::fs::read(dir.path().join(report::PLOT));
    assert!(png.is_err(), "the plot is the CLI's last step");

    let log = Log::default();
    let again = sweep(dir.path(), points("4,8", "stochastic,nearest"), &fake)
        .run(&data, &log)
        .unwrap();
    assert_eq!(again.points.len(), 4);
    assert_eq!(fake.calls.load(Ordering::SeqCst), 2, "synthesis was cached");
    let done = log.0.lock().unwrap().clone();
    assert!(done.iter().all(|t| !t.contains("stochastic")), "{done:?}");
    for old in &file.points {
        assert!(again.points.contains(old), "{old:?} was changed");
    }
}

/// W as an axis: each W trains at W on the golden model (`systole train --device golden
/// --word-bits W`'s accuracy), its cycles pass the Verilated check, and every design built at
/// its W is synthesised at it; the one not built (the conv unit below 16 bits) has `n/a`
/// resources and says why, never another design's figures.
#[test]
fn a_word_width_sweep_trains_and_synthesises_at_w() {
    let dir = tempfile::tempdir().unwrap();
    let data = data();
    let fake = FakeYosys {
        calls: 0.into(),
        fail_array: None,
    };
    let pts = Axes {
        arrays: "4".into(),
        fm_depths: "0,4096".into(),
        word_bits: "8,16".into(),
        roundings: "stochastic".into(),
    }
    .points(&systole_sim::built_sizes())
    .unwrap();
    let file = sweep(dir.path(), pts, &fake)
        .run(&data, &Log::default())
        .unwrap();
    assert_eq!(
        fake.calls.load(Ordering::SeqCst),
        3,
        "every design but the 8-bit conv unit is synthesised"
    );
    let [w8, w16, w8_conv, w16_conv] = &file.points[..] else {
        panic!("four points: {:?}", file.points)
    };
    assert_eq!((w8.point.word_bits, w8.point.fm_depth), (8, 0));
    assert_eq!((w16.point.word_bits, w16.point.fm_depth), (16, 0));
    assert_eq!((w8_conv.point.word_bits, w8_conv.point.fm_depth), (8, 4096));
    assert!(w8.resources.is_some() && w16.resources.is_some() && w16_conv.resources.is_some());
    assert!(w8_conv.resources.is_none());
    assert!(
        w8_conv.boards.iter().all(|b| !b.fits
            && b.note
                .contains("not available: the conv unit is built for 16-bit words only")),
        "{:?}",
        w8_conv.boards
    );
    assert!(w8.boards.iter().all(|b| !b.note.contains("not available")));
    assert_eq!(w8.sample.verilated, w8.sample.model);
    assert_ne!(w8.acc_per_seed, w16.acc_per_seed, "W = 8 trained at 8 bits");
    let cfg = cycles::point_config(&recipe(), &w8.point, 1);
    assert_eq!((cfg.word_bits, cfg.master_bits), (8, 8));
    let opts = systole_train::run::RunOptions {
        device: "golden".into(),
        host_step: false,
        check: false,
        out: None,
        resume: false,
        overwrite: false,
        trace: None,
    };
    let s = systole_train::run::run(&cfg, &data, &opts, &mut systole_train::Quiet).unwrap();
    assert_eq!(s.history.last().unwrap().test_acc, w8.acc_per_seed[0]);
    let csv = std::fs::read_to_string(dir.path().join(report::CSV)).unwrap();
    let na: Vec<&str> = csv.lines().skip(1).filter(|l| l.contains("n/a")).collect();
    assert_eq!(na.len(), 1, "{csv}");
    assert!(na[0].starts_with("4,4096,8,stochastic,"), "{csv}");
}

/// A sweep stopped by a failure keeps the points it wrote; the rerun computes only the rest.
#[test]
fn an_interrupted_sweep_resumes_with_its_written_points_kept() {
    let dir = tempfile::tempdir().unwrap();
    let data = data();
    let failing = FakeYosys {
        calls: 0.into(),
        fail_array: Some(8),
    };
    let mut sw = sweep(dir.path(), points("4,8", "nearest"), &failing);
    sw.jobs = 1;
    let e = sw.run(&data, &Log::default()).unwrap_err();
    assert!(e.to_string().contains("yosys killed"), "{e}");
    let kept: SweepFile = report::read(&dir.path().join(report::JSON))
        .unwrap()
        .unwrap();
    assert_eq!(kept.points.len(), 1);
    let fine = FakeYosys {
        calls: 0.into(),
        fail_array: None,
    };
    let log = Log::default();
    let file = sweep(dir.path(), points("4,8", "nearest"), &fine)
        .run(&data, &log)
        .unwrap();
    assert_eq!(file.points.len(), 2);
    assert_eq!(file.points[0], kept.points[0]);
    let done = log.0.lock().unwrap().clone();
    assert!(done.iter().all(|t| !t.contains("4x4")), "{done:?}");
}

/// A folder holding a sweep with other settings is refused, naming the setting.
#[test]
fn a_sweep_with_other_settings_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = data();
    let fake = FakeYosys {
        calls: 0.into(),
        fail_array: None,
    };
    sweep(dir.path(), points("4", "nearest"), &fake)
        .run(&data, &Silent)
        .unwrap();
    let mut sw = sweep(dir.path(), points("4", "nearest"), &fake);
    sw.base.epochs = 2;
    let e = sw.run(&data, &Silent).unwrap_err().to_string();
    assert!(
        e.contains("epochs 1 (this one: 2)") && e.contains("--overwrite"),
        "{e}"
    );
    sw.overwrite = true;
    assert_eq!(sw.run(&data, &Silent).unwrap().settings.epochs, 2);
}

use super::sweep::Silent;

/// The per-shape table predicts the Verilated count of real training steps exactly, and an
/// operation's count does not depend on its words.
#[test]
fn the_cycle_model_equals_the_verilated_count_on_sampled_steps() {
    let data = data();
    let p = points("4", "stochastic")[0];
    let mut table = CycleTable::new(&p).unwrap();
    let s = cycles::sample_check(&recipe(), &data, &p, 3, 2, &mut table).unwrap();
    assert!(s.verilated > 1000, "{s:?}");
    assert_eq!(s.model, s.verilated);
    let shape = OpShape::Matmul { m: 13, k: 40, n: 9 };
    let mut dev =
        systole_device::verilator::VerilatorDevice::new(cycles::simulated_config(4)).unwrap();
    let once = cycles::measure(&mut dev, &shape).unwrap();
    let zeros = systole_golden::tensor::QMatrix::zeros;
    let spec = systole_golden::OutputSpec {
        frac: 0,
        rounding: systole_core::Rounding::NearestEven,
        seed: 1,
    };
    let before = systole_device::Device::stats(&dev).cycles;
    systole_device::Device::matmul(&mut dev, &zeros(13, 40, 0), &zeros(40, 9, 0), &spec).unwrap();
    assert_eq!(systole_device::Device::stats(&dev).cycles - before, once);
    assert_eq!(table.cycles(&shape).unwrap(), once);
}

/// Bad axes are one sentence naming the value and the fix.
#[test]
fn bad_axes_are_clear_errors() {
    use systole_core::config::{MAX_SIZE, MIN_SIZE};
    let built = systole_sim::built_sizes();
    let err = |arrays: &str, fm: &str, w: &str, r: &str| {
        Axes {
            arrays: arrays.into(),
            fm_depths: fm.into(),
            word_bits: w.into(),
            roundings: r.into(),
        }
        .points(&built)
        .unwrap_err()
        .to_string()
    };
    for (got, want) in [
        (
            err("", "0", "16", "nearest"),
            "--array is empty: give at least one value, e.g. --array 4,8,16",
        ),
        (
            err("4,,8", "0", "16", "nearest"),
            "--array 4,,8: '' is not a valid entry",
        ),
        (err("4,x", "0", "16", "nearest"), "'x' is not a valid entry"),
        (err("4,4", "0", "16", "nearest"), "--array names 4 twice"),
        (
            err("1", "0", "16", "nearest"),
            "--array 1: array size 1 is not supported: choose 2 to 64",
        ),
        (
            err("100", "0", "16", "nearest"),
            "--array 100: array size 100",
        ),
        (
            err("4", "0", "7", "nearest"),
            "--word-bits 7: the word width W must be 8 to 16 bits",
        ),
        (
            err("4", "0", "16,17", "nearest"),
            "--word-bits 17: the word width W must be 8 to 16",
        ),
        (err("4", "0", "", "nearest"), "--word-bits is empty"),
        (
            err("4", "1000", "16", "nearest"),
            "--fm-depth 1000: feature-map buffer depth 1000",
        ),
        (
            err("4", "0", "16", "up"),
            "--rounding up: 'up' is not a valid entry",
        ),
    ] {
        assert!(got.contains(want), "{got:?} should contain {want:?}");
    }
    let unbuilt = (MIN_SIZE..=MAX_SIZE).find(|n| !built.contains(n)).unwrap();
    let e = err(&unbuilt.to_string(), "0", "16", "nearest");
    assert!(
        e.contains("no Verilated") && e.contains("SYSTOLE_VERILATOR_SIZES"),
        "{e}"
    );
    let e = parse_boards("arty,basys3").unwrap_err().to_string();
    assert!(
        e.contains("unknown board 'arty'") && e.contains("arty-a7-35"),
        "{e}"
    );
    assert_eq!(
        parse_boards("all").unwrap().len(),
        systole_boards::list().len()
    );
    let mut r = Recipe {
        model: "rnn".into(),
        ..recipe_args()
    };
    assert!(r
        .config()
        .unwrap_err()
        .to_string()
        .contains("unknown model 'rnn': use mlp or cnn"));
    r.model = "mlp".into();
    r.epochs = 0;
    assert!(r
        .config()
        .unwrap_err()
        .to_string()
        .contains("--epochs must be at least 1"));
}

fn recipe_args() -> Recipe {
    Recipe {
        model: "mlp".into(),
        hidden: vec![16],
        channels: vec![],
        dataset: "digits".into(),
        limit: None,
        epochs: 1,
        batch: 32,
        lr: None,
        lr_decay: None,
        momentum: 0.9,
    }
}

/// The W axis is part of the point and of every key, so points differing only in W would
/// never share a synthesis or a training run.
#[test]
fn the_word_width_is_in_every_key() {
    let a = points("4", "nearest")[0];
    let b = DesignPoint { word_bits: 12, ..a };
    assert_ne!(a.training_key(), b.training_key());
    assert_ne!(a.hardware_key(), b.hardware_key());
    assert_ne!(a.label(), b.label());
    assert_eq!(b.config().word_bits, 12);
}

#[test]
fn the_pareto_front_is_the_undominated_points_by_cost() {
    let pts = [
        (3.0, 93.0),
        (1.0, 90.0),
        (2.0, 95.0),
        (2.0, 80.0),
        (4.0, 95.0),
    ];
    assert_eq!(pareto::front(&pts), vec![1, 2]);
}

#[test]
#[ignore = "runs Yosys synth_xilinx on the 4x4 bridge top (about 20 s)"]
fn yosys_synthesises_once_then_reads_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let yosys = synth::Yosys {
        work: dir.path().to_path_buf(),
    };
    let cached = synth::Cached {
        inner: &yosys,
        dir: dir.path().join("cache"),
    };
    let p = points("4", "nearest")[0];
    let (r, hit) = cached.get(&p).unwrap();
    assert!(!hit);
    assert_eq!(r.dsps, 16);
    assert!(r.luts > 1000 && r.brams > 0, "{r:?}");
    assert_eq!(cached.get(&p).unwrap(), (r, true));
}

/// The recorded operations are the training steps' only: the golden run's device counts
/// them plus the evaluation's forward products (two layers, 256 test images a batch).
#[test]
fn evaluation_passes_are_not_counted_as_epoch_cycles() {
    let data = data();
    let p = points("4", "stochastic")[0];
    let run = cycles::train_point(&recipe(), &data, &p, 1).unwrap();
    let recorded: u64 = run.ops.values().sum();
    let opts = systole_train::run::RunOptions {
        device: "golden".into(),
        host_step: false,
        check: false,
        out: None,
        resume: false,
        overwrite: false,
        trace: None,
    };
    let cfg = cycles::point_config(&recipe(), &p, 1);
    let s = systole_train::run::run(&cfg, &data, &opts, &mut systole_train::Quiet).unwrap();
    let eval = 2 * data.test.len().div_ceil(256) as u64;
    assert_eq!(recorded + eval, s.device.unwrap().1.ops);
}

/// One golden run serves every feature-map depth of a (array, W, rounding), but where a
/// convolution runs is the point's: with the maps in its conv unit a point's cycles are the
/// unit's, without a unit the lowered products'. A point's cycles must not depend on which
/// depth trained first (they did: the depth-0 point's lowered products were reused).
#[test]
fn a_points_cycles_are_its_own_conv_units_whatever_trained_first() {
    let dir = tempfile::tempdir().unwrap();
    let data = data();
    let fake = FakeYosys {
        calls: 0.into(),
        fail_array: None,
    };
    let cnn = Recipe {
        model: "cnn".into(),
        hidden: vec![],
        channels: vec![4],
        limit: Some(32),
        ..recipe_args()
    }
    .config()
    .unwrap();
    let axes = |fm: &str| {
        Axes {
            arrays: "4".into(),
            fm_depths: fm.into(),
            word_bits: "16".into(),
            roundings: "nearest".into(),
        }
        .points(&systole_sim::built_sizes())
        .unwrap()
    };
    let run = |dir: &std::path::Path, fm: &str| {
        let mut s = sweep(dir, axes(fm), &fake);
        s.base = cnn.clone();
        s.seeds = vec![1];
        s.run(&data, &Log::default()).unwrap()
    };
    let both = run(&dir.path().join("both"), "0,32768");
    let alone = run(&dir.path().join("alone"), "32768");
    let (lowered, on_unit) = (&both.points[0], &both.points[1]);
    assert_eq!((lowered.point.fm_depth, on_unit.point.fm_depth), (0, 32768));
    assert_eq!(lowered.acc_per_seed, on_unit.acc_per_seed, "same words");
    assert_ne!(lowered.cycles_per_epoch, on_unit.cycles_per_epoch);
    assert_eq!(on_unit.cycles_per_epoch, alone.points[0].cycles_per_epoch);
    for r in both.points.iter().chain(&alone.points) {
        assert_eq!(r.sample.verilated, r.sample.model, "{}", r.point.label());
    }
}

/// A smaller conv unit is the built model presenting its `CONFIG`: a weight gradient whose
/// batch of maps (16 x 512 words) fits 32768 words but not 4096 runs on the unit at 32768
/// and is lowered at 4096 exactly as with no unit (same cycles as depth 0), the same words
/// on all three; a unit larger than the build's is refused.
#[test]
fn a_smaller_conv_unit_lowers_what_its_buffer_cannot_hold() {
    use systole_device::verilator::VerilatorDevice;
    use systole_device::Device;
    let g = systole_golden::conv::Conv2dGeom {
        batch: 16,
        shape: systole_golden::conv::ConvGeom {
            in_ch: 8,
            in_h: 8,
            in_w: 8,
            out_ch: 4,
            kernel: 3,
            stride: 1,
            pad: 1,
        },
    };
    let x = crate::bench::operand(16, 8 * 64, 5, 8, 2);
    let dy = crate::bench::operand(16, 4 * 64, 6, 8, 2);
    let spec = systole_golden::OutputSpec {
        frac: 8,
        rounding: systole_core::Rounding::Stochastic,
        seed: 3,
    };
    let run = |fm_depth: usize| {
        let cfg = systole_core::ArrayConfig {
            fm_depth,
            ..cycles::simulated_config(4)
        };
        let mut dev = VerilatorDevice::with_conv_unit_of(cfg).unwrap();
        let c = dev.conv2d_backward_weights(&x, &dy, &g, &spec).unwrap();
        (c.data, dev.stats().cycles)
    };
    let (none, small, built) = (run(0), run(4096), run(32768));
    assert_eq!(small, none, "4096 words lowers it as no unit does");
    assert_eq!(built.0, none.0, "same words on the unit");
    assert_ne!(built.1, none.1, "the unit runs it at 32768");
    let too_big = systole_core::ArrayConfig {
        fm_depth: 65536,
        ..cycles::simulated_config(4)
    };
    assert!(VerilatorDevice::with_conv_unit_of(too_big).is_err());
}

/// What the sweep synthesises for a point is the bridge top with the array at the point's W:
/// `W x W` products in its PEs, and the 16-bit PE's text at 16.
#[test]
fn the_synthesised_design_is_built_at_the_points_w() {
    let at = |w| DesignPoint {
        array: 4,
        fm_depth: 0,
        word_bits: w,
        rounding: Rounding::Stochastic,
    };
    let v8 = synth::board_verilog(&at(8)).unwrap();
    assert_eq!(
        v8.matches("wire signed [15:0] prod = a_w * b_w;").count(),
        16
    );
    let v16 = synth::board_verilog(&at(16)).unwrap();
    assert_eq!(
        v16.matches("wire signed [31:0] prod = a_in * b_in;")
            .count(),
        16
    );
    assert!(!v16.contains("prod = a_w"));
}

/// The resource model is fitted to 16-bit designs: with `--resources estimate` a point at
/// another W has no figures and says why, rather than the 16-bit design's.
#[test]
fn the_estimate_gives_no_figures_below_16_bits() {
    let dir = tempfile::tempdir().unwrap();
    let pts = Axes {
        arrays: "4".into(),
        fm_depths: "0".into(),
        word_bits: "8".into(),
        roundings: "stochastic".into(),
    }
    .points(&systole_sim::built_sizes())
    .unwrap();
    let file = sweep(dir.path(), pts, &Estimated)
        .run(&data(), &Log::default())
        .unwrap();
    let [w8] = &file.points[..] else {
        panic!("one point: {:?}", file.points)
    };
    assert!(w8.resources.is_none());
    assert!(
        w8.boards
            .iter()
            .all(|b| !b.fits && b.note.contains("fitted to 16-bit words")),
        "{:?}",
        w8.boards
    );
}
