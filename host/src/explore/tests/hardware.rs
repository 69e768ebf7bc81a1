//! The sweep's hardware axes: each W trains and is synthesised at W, and each feature-map
//! depth is timed on its own design.

use super::*;

/// W as an axis: each W trains at W on the golden model (`systole train --device golden
/// --word-bits W`'s accuracy), its cycles pass the Verilated check, and every design is built
/// and synthesised at its W, the conv unit below 16 bits too (it was `n/a` before the conv
/// unit was built at W).
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
        dsp_packs: "off".into(),
    }
    .points(&systole_sim::built_sizes())
    .unwrap();
    let file = sweep(dir.path(), pts, &fake)
        .run(&data, &Log::default())
        .unwrap();
    assert_eq!(
        fake.calls.load(Ordering::SeqCst),
        4,
        "every design is synthesised, the 8-bit conv unit too"
    );
    let [w8, w16, w8_conv, w16_conv] = &file.points[..] else {
        panic!("four points: {:?}", file.points)
    };
    assert_eq!((w8.point.word_bits, w8.point.fm_depth), (8, 0));
    assert_eq!((w16.point.word_bits, w16.point.fm_depth), (16, 0));
    assert_eq!((w8_conv.point.word_bits, w8_conv.point.fm_depth), (8, 4096));
    for p in [w8, w16, w8_conv, w16_conv] {
        assert!(p.resources.is_some(), "{}", p.point.label());
        assert!(p.boards.iter().all(|b| !b.note.contains("not available")));
    }
    assert_eq!(w8.sample.verilated, w8.sample.model);
    assert_ne!(w8.acc_per_seed, w16.acc_per_seed, "W = 8 trained at 8 bits");
    let cfg = cycles::point_config(&recipe(), &w8.point, 1);
    assert_eq!((cfg.word_bits, cfg.master_bits), (8, 8));
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
    assert_eq!(s.history.last().unwrap().test_acc, w8.acc_per_seed[0]);
    let csv = std::fs::read_to_string(dir.path().join(report::CSV)).unwrap();
    assert!(!csv.contains("n/a"), "{csv}");
    assert!(
        csv.lines().any(|l| l.starts_with("4,4096,8,stochastic,")),
        "{csv}"
    );
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
        model: systole_train::model::ModelName::Cnn,
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
            dsp_packs: "off".into(),
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
        dsp_pack: false,
    };
    // Every PE's body is the one parameterised text, its width fixed in front of it.
    let v8 = synth::board_verilog(&at(8)).unwrap();
    assert!(v8.contains("localparam W = 8;") && !v8.contains("localparam W = 16;"));
    assert_eq!(
        v8.matches("wire signed [2*W-1:0] prod = a_w * b_w;")
            .count(),
        16
    );
    let v16 = synth::board_verilog(&at(16)).unwrap();
    assert_eq!(
        v16.matches("wire signed [2*W-1:0] prod = a_w * b_w;")
            .count(),
        16
    );
    assert!(!v16.contains("localparam W = 8;"));
    // Packed at 8 bits: a multiply per pair of PEs, none of the PE's own.
    let packed = synth::board_verilog(&DesignPoint {
        dsp_pack: true,
        ..at(8)
    })
    .unwrap();
    assert_eq!(packed.matches("p = ub_q * factor;").count(), 8);
    assert!(!packed.contains("prod = a_w * b_w"));
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
        dsp_packs: "off".into(),
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
