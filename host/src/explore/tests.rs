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
        // The design Yosys would get must be built (the bridge top at the point's W, with its
        // conv unit); the figures are the estimate's.
        synth::board_verilog(p)?;
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
        init: crate::cli::Init::File,
        model: systole_train::model::ModelName::Mlp,
        hidden: vec![16],
        channels: vec![],
        dataset: systole_train::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
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
        dsp_packs: "off".into(),
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
        start: None,
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
                device: systole_device::DeviceSpec::Golden,
                host_step: false,
                checkpoint_every: 1,
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
    let s = cycles::sample_check((&recipe(), None), &data, &p, 3, 2, &mut table).unwrap();
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
            dsp_packs: "off".into(),
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
    // Packing at a W or size core does not pack; an unknown switch.
    let pack = |w: &str, p: &str| {
        Axes {
            arrays: "4".into(),
            fm_depths: "0".into(),
            word_bits: w.into(),
            roundings: "nearest".into(),
            dsp_packs: p.into(),
        }
        .points(&built)
    };
    let e = pack("8,16", "off,on").unwrap_err().to_string();
    assert!(
        e.contains("--dsp-pack on: two multiplies per DSP48E1")
            && e.contains("not 16-bit words on a 4x4 array")
            && e.contains("--dsp-pack off,on --word-bits 8"),
        "{e}"
    );
    let e = pack("8", "yes").unwrap_err().to_string();
    assert!(
        e.contains("--dsp-pack yes: 'yes' is not a valid entry"),
        "{e}"
    );
    let both = pack("8", "off,on").unwrap();
    assert_eq!(both.len(), 2);
    assert!(!both[0].dsp_pack && both[1].dsp_pack);
    assert_eq!(both[1].label(), "4x4 fm0 w8 pack nearest");
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
        model: "net.onnx".parse().unwrap(),
        ..recipe_args()
    };
    // An ONNX file is read as `train` reads it: a missing one is named.
    let e = r.config().unwrap_err().to_string();
    assert!(
        e.contains("net.onnx") && e.contains("does not exist"),
        "{e}"
    );
    r.model = systole_train::model::ModelName::Mlp;
    r.epochs = 0;
    assert!(r
        .config()
        .unwrap_err()
        .to_string()
        .contains("--epochs must be at least 1"));
}

fn recipe_args() -> Recipe {
    Recipe {
        init: crate::cli::Init::File,
        model: systole_train::model::ModelName::Mlp,
        hidden: vec![16],
        channels: vec![],
        dataset: systole_train::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
        limit: None,
        epochs: 1,
        batch: 32,
        lr: None,
        lr_decay: None,
        momentum: 0.9,
    }
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
    let yosys = synth::Yosys::bridge(dir.path().to_path_buf());
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
/// them plus the evaluation's forward products (two layers, `EVAL_BATCH` test images a batch).
#[test]
fn evaluation_passes_are_not_counted_as_epoch_cycles() {
    let data = data();
    let p = points("4", "stochastic")[0];
    let run = cycles::train_point((&recipe(), None), &data, &p, 1).unwrap();
    let recorded: u64 = run.ops.values().sum();
    let opts = systole_train::run::RunOptions {
        device: systole_device::DeviceSpec::Golden,
        host_step: false,
        checkpoint_every: 1,
        check: false,
        out: None,
        resume: false,
        overwrite: false,
        trace: None,
    };
    let cfg = cycles::point_config(&recipe(), &p, 1);
    let s = systole_train::run::run(&cfg, &data, &opts, &mut systole_train::Quiet).unwrap();
    let eval = 2 * data.test.len().div_ceil(systole_train::EVAL_BATCH) as u64;
    assert_eq!(recorded + eval, s.device.unwrap().1.ops);
}

/// The hardware axes: the word width W and the conv unit's depth.
mod hardware;
