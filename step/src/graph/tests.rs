//! The graph's type check, its descriptions and its wire form.

use super::builtin::{cnn, every_kind, lenet5, mlp, resnet8};
use super::*;
use crate::layers::{Add, Conv2d, Dense, MaxPool, Relu};

fn img(c: usize, h: usize, w: usize) -> Shape {
    Shape { c, h, w }
}

#[test]
fn builtin_shapes_params_and_macs() {
    let g = mlp(img(1, 8, 8), &[32], 10).unwrap();
    let p = g.params().unwrap();
    let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["layer 1 W", "layer 1 b", "layer 2 W", "layer 2 b"]);
    assert_eq!((p[0].shape.rows, p[0].shape.cols), (64, 32));
    assert_eq!(g.macs().unwrap().iter().sum::<u64>(), 64 * 32 + 32 * 10);

    let g = cnn(img(1, 8, 8), &[8, 16], 10).unwrap();
    assert_eq!(g.shapes().unwrap().last(), Some(&Shape::flat(10)));
    let p = g.params().unwrap();
    assert_eq!((p[0].shape.rows, p[0].shape.cols), (8, 9));
    assert_eq!((p[4].shape.rows, p[4].shape.cols), (16 * 2 * 2, 10));
    assert_eq!((p[0].shape.fan_in, p[0].shape.fan_out), (9, 72));
    let e = cnn(img(1, 8, 8), &[4, 4, 4, 4], 10).unwrap_err();
    assert!(e.to_string().contains("even image size"), "{e}");

    let g = lenet5(img(1, 28, 28), 10).unwrap();
    let total: usize = g
        .params()
        .unwrap()
        .iter()
        .map(|p| p.shape.rows * p.shape.cols)
        .sum();
    // 156 + 2,416 + 48,120 + 10,164 + 850.
    assert_eq!(total, 61_706);
    let s = g.shapes().unwrap();
    assert_eq!((s[2], s[5]), (img(6, 14, 14), img(16, 5, 5)));

    let g = resnet8(img(1, 28, 28), 10).unwrap();
    let total: usize = g
        .params()
        .unwrap()
        .iter()
        .map(|p| p.shape.rows * p.shape.cols)
        .sum();
    assert!((70_000..80_000).contains(&total), "{total}");
    assert_eq!(g.shapes().unwrap()[g.nodes.len() - 3], img(64, 7, 7));
    assert!(g.describe().unwrap().contains("s2_add"));
}

#[test]
fn graphs_that_do_not_type_check_say_where() {
    let mut g = Graph::new(img(1, 8, 8), 10);
    // A dangling input.
    let e = g
        .push(
            "d",
            Layer::Dense(Dense {
                out: 10,
                bias: true,
            }),
            &[Src::Node(3)],
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("layer 'd'") && e.to_string().contains("does not exist"),
        "{e}"
    );
    assert!(g.nodes.is_empty(), "a refused node is not kept");
    // A kernel larger than the padded input.
    let big = Conv2d {
        out_ch: 2,
        kernel: 11,
        stride: 1,
        pad: 1,
        bias: true,
    };
    let e = g.push("c", Layer::Conv2d(big), &[Src::Input]).unwrap_err();
    assert!(e.to_string().contains("Conv2d"), "{e}");
    // Adding tensors of two shapes.
    let a = g
        .then(Layer::Conv2d(Conv2d {
            out_ch: 2,
            kernel: 3,
            stride: 1,
            pad: 1,
            bias: true,
        }))
        .unwrap();
    let b = g
        .then(Layer::MaxPool(MaxPool {
            kernel: 2,
            stride: 2,
        }))
        .unwrap();
    let e = g
        .push("sum", Layer::Add(Add), &[Src::Node(a), Src::Node(b)])
        .unwrap_err();
    assert!(
        e.to_string().contains("2x8x8") && e.to_string().contains("2x4x4"),
        "{e}"
    );
    let e = g.push("sum", Layer::Add(Add), &[Src::Node(a)]).unwrap_err();
    assert!(e.to_string().contains("takes 2 input(s), given 1"), "{e}");
    // A cycle: a node reading a later one (built by hand, as a file could).
    let mut c = g.clone();
    c.nodes.push(Node {
        name: "x".into(),
        layer: Layer::Relu(Relu),
        inputs: vec![Src::Node(3)],
    });
    c.nodes.push(Node {
        name: "y".into(),
        layer: Layer::Relu(Relu),
        inputs: vec![Src::Node(2)],
    });
    let e = c.check().unwrap_err();
    assert!(e.to_string().contains("comes later"), "{e}");
    // The wrong number of logits, an unused layer, a repeated name, no layers.
    g.then(Layer::Dense(Dense { out: 7, bias: true })).unwrap();
    let e = g.check().unwrap_err();
    assert!(
        e.to_string().contains("one logit per class (10 classes)"),
        "{e}"
    );
    let mut u = Graph::new(img(1, 8, 8), 10);
    u.then(Layer::Relu(Relu)).unwrap();
    u.push(
        "fc",
        Layer::Dense(Dense {
            out: 10,
            bias: true,
        }),
        &[Src::Input],
    )
    .unwrap();
    let e = u.check().unwrap_err();
    assert!(e.to_string().contains("used by no later layer"), "{e}");
    let mut d = Graph::new(img(1, 8, 8), 10);
    d.push("a", Layer::Relu(Relu), &[Src::Input]).unwrap();
    d.push(
        "a",
        Layer::Dense(Dense {
            out: 10,
            bias: true,
        }),
        &[Src::Node(0)],
    )
    .unwrap();
    assert!(d
        .check()
        .unwrap_err()
        .to_string()
        .contains("names must be unique"));
    assert!(Graph::new(img(1, 8, 8), 10)
        .check()
        .unwrap_err()
        .to_string()
        .contains("no layers"));
}

#[test]
fn wire_form_round_trips_and_refuses_every_cut() {
    for g in [
        mlp(img(1, 8, 8), &[32], 10).unwrap(),
        cnn(img(1, 8, 8), &[8, 16], 10).unwrap(),
        resnet8(img(1, 28, 28), 10).unwrap(),
        every_kind(img(2, 6, 6), 3).unwrap(),
    ] {
        assert!(g.encodable());
        let mut b = Vec::new();
        g.encode_to(&mut b);
        assert_eq!(b.len(), g.encoded_len());
        let (back, used) = Graph::decode_from(&b).unwrap();
        assert_eq!(used, b.len());
        assert_eq!(back, g);
        for n in 0..b.len() {
            assert!(Graph::decode_from(&b[..n]).is_err(), "{n}");
        }
        // Every single-byte change decodes to a valid graph or is refused: never a panic.
        for i in 0..b.len() {
            for v in [0u8, 1, 2, 7, 0x80, 0xFF] {
                let mut m = b.clone();
                m[i] = v;
                if let Ok((g2, _)) = Graph::decode_from(&m) {
                    g2.check().unwrap();
                }
            }
        }
    }
}
