use super::*;
use crate::data::{self, Dataset};
use crate::dist::Single;
use crate::model::{builtin, Graph, Layer, ModelSpec, Shape, Src};
use crate::{fixed, Precision, Quiet, TrainConfig, Trainer};
use systole_core::Rounding;

#[test]
fn the_automatic_cut_balances_macs_and_bad_cuts_are_refused() {
    let layers = builtin::mlp(Shape::flat(64), &[32, 32, 32], 10).unwrap();
    // MACs 2048, 1024, 1024, 320: the best 2-stage cut is [1] [2, 3, 4].
    let p = StagePlan::new(&layers, 2, None).unwrap();
    assert_eq!((p.layers(0), p.layers(1)), (0..1, 1..4));
    assert_eq!(
        (p.params(1), p.stage_of(3), p.cut_text()),
        (2..8, 1, "1".into())
    );
    let p = StagePlan::new(&layers, 3, None).unwrap();
    assert_eq!(p.cut_text(), "1,2");
    let p = StagePlan::new(&layers, 2, Some(&[3])).unwrap();
    assert_eq!(p.layers(1), 3..4);
    let err = |s, c: &[usize]| StagePlan::new(&layers, s, Some(c)).unwrap_err().to_string();
    assert!(
        err(3, &[2, 2]).contains("leaves stage 2 empty"),
        "{}",
        err(3, &[2, 2])
    );
    assert!(
        err(2, &[4]).contains("leaves stage 2 empty"),
        "{}",
        err(2, &[4])
    );
    assert!(err(3, &[1]).contains("needs 2"), "{}", err(3, &[1]));
    let e = StagePlan::new(&layers, 5, None).unwrap_err().to_string();
    assert!(e.contains("more than the model's 4 layers"), "{e}");
    let e = Placement::of_rank(p, 2, 0, 3).unwrap_err().to_string();
    assert!(e.contains("needs 4 MPI ranks, but this job has 3"), "{e}");
}

#[test]
fn residual_connections_may_be_cut() {
    // ResNet-8's layers: stem, then conv1, conv2 (and short) of each stage, fc.
    let g = builtin::resnet8(Shape { c: 1, h: 28, w: 28 }, 10).unwrap();
    let l = Layers::of(&g).unwrap();
    assert_eq!(l.len(), 10);
    // Every boundary is a cut; inside a residual block two tensors cross it.
    let crossing: Vec<usize> = (1..l.len())
        .map(|i| g.crossing(l.node_starts[i]).len())
        .collect();
    assert_eq!(crossing, [1, 2, 1, 2, 2, 1, 2, 2, 1]);
    let p = StagePlan::new(&g, 2, Some(&[2])).unwrap();
    assert_eq!(p.cut_text(), "2");
    let p = StagePlan::new(&g, 10, None).unwrap();
    assert_eq!(p.cut_text(), "1,2,3,4,5,6,7,8,9");
    // Each stage's nodes start where its first layer's do.
    assert_eq!(p.nodes(0).start, 0);
    assert_eq!(p.nodes(9).end, g.nodes.len());
}

#[test]
fn uniform_work_has_the_gpipe_bubble() {
    for (s, m) in [(2, 1), (2, 4), (4, 8)] {
        let t = gpipe(&vec![vec![1; m]; s], &vec![vec![2; m]; s]);
        assert_eq!(t.makespan, 3 * (m + s - 1) as u64, "S {s} M {m}");
        let want = (s - 1) as f64 / (m + s - 1) as f64;
        assert!((t.bubble() - want).abs() < 1e-12, "S {s} M {m}");
        assert_eq!(t.ideal(), 3 * m as u64);
    }
}

fn cfg(shards: usize, micro: usize) -> TrainConfig {
    TrainConfig {
        model: ModelSpec::Mlp {
            hidden: vec![16, 12],
        },
        dataset: crate::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
        // 3 batches of 32, the last of 26: uneven units.
        train_limit: Some(90),
        epochs: 1,
        batch: 32,
        lr: 0.05,
        lr_decay: 1.0,
        momentum: 0.9,
        seed: 5,
        precision: Precision::Fixed16,
        rounding: Rounding::Stochastic,
        array: 4,
        word_bits: 16,
        master_bits: 16,
        shards: Some(shards),
        microbatches: Some(micro),
    }
}

fn trainer(c: &TrainConfig, d: &Dataset) -> Trainer<fixed::FixedArith> {
    let dev = systole_device::open("golden", systole_core::ArrayConfig::square(4)).unwrap();
    Trainer::new(
        c.clone(),
        d,
        fixed::on_device(dev, c.rounding, c.seed, false),
    )
    .unwrap()
}

/// The per-unit state: parameters, momentum and the units' remembered formats.
fn state(t: &Trainer<fixed::FixedArith>) -> (Vec<crate::arith::TensorState>, Vec<String>) {
    let ck = t.checkpoint();
    let fracs = ck
        .fracs
        .iter()
        .filter(|(k, _)| k.starts_with("shard"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    ([ck.params, ck.velocity].concat(), fracs)
}

/// Stages in one process compute what one process computes without them, bit for bit, for
/// every cut of `model` into 2 and 3 stages, 2 shards of 2 micro-batches.
fn stages_equal_the_unpipelined_run(model: ModelSpec, cuts: &[&[usize]]) {
    let d = data::load("digits").unwrap();
    let c = TrainConfig { model, ..cfg(2, 2) };
    let mut reference = trainer(&c, &d);
    reference
        .train_epoch_sharded(&d, &mut Quiet, &Single)
        .unwrap();
    let want = state(&reference);
    assert!(want.1.iter().any(|k| k.starts_with("shard 3: layer 3 ")));
    for cut in cuts {
        let mut t = trainer(&c, &d);
        let plan = StagePlan::new(t.graph(), cut.len() + 1, Some(cut)).unwrap();
        let steps = t.pipeline_epoch_local(&plan, &d, None).unwrap();
        assert_eq!(steps.len(), 3);
        assert!(steps[0].boundary_bytes.iter().all(|&b| b > 0));
        // Not assert_eq: the tensors' Debug text is pages long.
        let got = state(&t);
        assert!(got.1 == want.1, "cut after {cut:?}: formats {:?}", got.1);
        let first = (0..want.0.len()).find(|&i| got.0[i] != want.0[i]);
        assert!(
            first.is_none(),
            "cut after {cut:?}: tensor {first:?} differs"
        );
    }
}

#[test]
fn stages_in_one_process_equal_the_unpipelined_run() {
    let mlp = ModelSpec::Mlp {
        hidden: vec![16, 12],
    };
    stages_equal_the_unpipelined_run(mlp, &[&[1], &[2], &[1, 2]]);
}

/// Every kind, two branches meeting at an Add: each cut has two tensors crossing it, and in
/// 3 stages the global average passes through the middle stage.
#[test]
fn cuts_that_residual_connections_cross_equal_the_unpipelined_run() {
    let graph = builtin::every_kind(Shape { c: 1, h: 8, w: 8 }, 10).unwrap();
    assert_eq!(graph.crossing(7), [Src::Node(5), Src::Node(6)]);
    assert_eq!(graph.crossing(8), [Src::Node(5), Src::Node(7)]);
    let model = ModelSpec::Graph {
        source: "every_kind".into(),
        graph,
    };
    stages_equal_the_unpipelined_run(model, &[&[1], &[2], &[1, 2]]);
}

/// A layer late in the network reads the network's input: the first stage hands the input on.
#[test]
fn a_stage_that_reads_the_network_s_input_gets_it() {
    use systole_step::layers::{Add, Conv2d, Dense, Flatten, Relu};
    let dense = |out| Layer::Dense(Dense { out, bias: true });
    let mut g = Graph::new(Shape { c: 1, h: 8, w: 8 }, 10);
    let conv = Layer::Conv2d(Conv2d {
        out_ch: 2,
        kernel: 3,
        stride: 1,
        pad: 1,
        bias: true,
    });
    g.then(conv).unwrap();
    g.then(Layer::Relu(Relu)).unwrap();
    g.then(Layer::Flatten(Flatten)).unwrap();
    let a = g.then(dense(10)).unwrap();
    let f = g
        .push("flat_in", Layer::Flatten(Flatten), &[Src::Input])
        .unwrap();
    let b = g.push("from_input", dense(10), &[Src::Node(f)]).unwrap();
    g.push("sum", Layer::Add(Add), &[Src::Node(a), Src::Node(b)])
        .unwrap();
    g.check().unwrap();
    assert_eq!(g.crossing(3), [Src::Input, Src::Node(2)]);
    assert_eq!(g.crossing(5), [Src::Node(3), Src::Node(4)]);
    let model = ModelSpec::Graph {
        source: "late input".into(),
        graph: g,
    };
    stages_equal_the_unpipelined_run(model, &[&[1], &[2], &[1, 2]]);
}
