//! The export and the frozen formats: what is written reads back as the same layers, words and
//! formats; the integer rules of the inference.

use systole_onnx::build::encode;
use systole_onnx::infer::{self, average, exact_frac, quantize, Formats};
use systole_onnx::{import_bytes, Net, Node, Op, Src};

fn node(name: &str, op: Op, inputs: Vec<Src>, shape: [usize; 3]) -> Node {
    Node {
        name: name.into(),
        op,
        inputs,
        shape,
        fracs: vec![],
    }
}

fn ramp(n: usize, s: f32) -> Vec<f32> {
    (0..n).map(|i| ((i * 5 % 11) as f32 - 5.0) * s).collect()
}

/// conv -> relu -> avgpool; a second conv; residual add; global average; dense.
fn net() -> Net {
    let conv = |out_ch, inp: usize, b: bool| Op::Conv {
        out_ch,
        kernel: 3,
        stride: 1,
        pad: 1,
        w: ramp(out_ch * inp * 9, 0.07),
        b: b.then(|| ramp(out_ch, 0.01)),
    };
    Net {
        input_name: "input".into(),
        input: [1, 6, 6],
        input_frac: None,
        word_bits: 16,
        classes: 3,
        nodes: vec![
            node("c1", conv(2, 1, true), vec![Src::Input], [2, 6, 6]),
            node("r1", Op::Relu, vec![Src::Node(0)], [2, 6, 6]),
            node(
                "p1",
                Op::AvgPool {
                    kernel: 2,
                    stride: 2,
                },
                vec![Src::Node(1)],
                [2, 3, 3],
            ),
            node("c2", conv(2, 2, false), vec![Src::Node(2)], [2, 3, 3]),
            node("add", Op::Add, vec![Src::Node(3), Src::Node(2)], [2, 3, 3]),
            node(
                "mp",
                Op::MaxPool {
                    kernel: 2,
                    stride: 1,
                },
                vec![Src::Node(4)],
                [2, 2, 2],
            ),
            node("gap", Op::GlobalAvgPool, vec![Src::Node(5)], [2, 1, 1]),
            node(
                "fc",
                Op::Dense {
                    out: 3,
                    w: ramp(6, 0.3),
                    b: Some(vec![0.1, 0.2, 0.3]),
                },
                vec![Src::Node(6)],
                [3, 1, 1],
            ),
        ],
        notes: vec![],
        opset: 21,
        producer: "test".into(),
        metadata: vec![],
    }
}

fn formats() -> Formats {
    Formats {
        word_bits: 16,
        input: 14,
        nodes: vec![
            vec![12, 12],
            vec![],
            vec![13],
            vec![12],
            vec![11],
            vec![],
            vec![12],
            vec![13, 12],
        ],
    }
}

#[test]
fn an_export_reads_back_as_the_same_layers_words_and_formats() {
    let n = net();
    let ws = infer::weights(&n);
    let fm = formats();
    infer::check_formats(&n, &ws, &fm).unwrap();
    let meta = vec![("systole.input".to_string(), "pixel / 16".to_string())];
    let m = systole_onnx::export(&n, &ws, &fm, &meta);
    let back = import_bytes(&encode(&m), None).unwrap();
    assert_eq!(back.formats(), Some(Ok(fm.clone())), "{}", back.describe());
    assert_eq!(back.input, n.input);
    assert_eq!(back.classes, 3);
    let ops: Vec<String> = back.nodes.iter().map(|x| x.op.name()).collect();
    let want: Vec<String> = n.nodes.iter().map(|x| x.op.name()).collect();
    assert_eq!(ops, want);
    let inputs: Vec<_> = back.nodes.iter().map(|x| x.inputs.clone()).collect();
    assert_eq!(
        inputs,
        n.nodes.iter().map(|x| x.inputs.clone()).collect::<Vec<_>>()
    );
    // The float initializers hold the words' values exactly: the same words come back.
    for (a, b) in infer::weights(&back).iter().zip(&ws) {
        match (a, b) {
            (Some(a), Some(b)) => {
                assert_eq!(a.w, b.w);
                assert_eq!(a.b, b.b);
            }
            (None, None) => {}
            _ => panic!("weights differ"),
        }
    }
    assert!(back
        .metadata
        .iter()
        .any(|(k, v)| k == "systole.input" && v == "pixel / 16"));
    assert!(back.metadata.iter().any(|(k, _)| k == "systole.rounding"));
}

#[test]
fn formats_that_break_the_shift_range_are_refused() {
    let n = net();
    let ws = infer::weights(&n);
    let mut fm = formats();
    // A conversion cannot add fractional bits: the sum of words at 12 and 13 bits is exact at 13.
    fm.nodes[4] = vec![14];
    let e = infer::check_formats(&n, &ws, &fm).unwrap_err();
    assert!(
        e.contains("layer 'add': 14 fractional bits from an exact value with 13"),
        "{e}"
    );
    // Nor can a product's: the dense layer's exact sum has 0 + 14 bits.
    let mut fm = formats();
    fm.nodes[6] = vec![0];
    fm.nodes[7][0] = 15;
    let e = infer::check_formats(&n, &ws, &fm).unwrap_err();
    assert!(e.contains("layer 'fc'"), "{e}");
    let mut fm = formats();
    fm.nodes[1] = vec![3];
    assert!(infer::check_formats(&n, &ws, &fm)
        .unwrap_err()
        .contains("'r1' needs 0 formats"));
}

#[test]
fn the_integer_rules_round_to_nearest_even_and_saturate() {
    // sum / n at frac, exact: 5/2 = 2.5 -> 2, 7/2 = 3.5 -> 4, -5/2 -> -2, 1/3 at 2 bits = 1.33 -> 1.
    assert_eq!(average(5, 2, 0, 0), 2);
    assert_eq!(average(7, 2, 0, 0), 4);
    assert_eq!(average(-5, 2, 0, 0), -2);
    assert_eq!(average(1, 3, 0, 2), 1);
    assert_eq!(average(2, 3, 0, 2), 3); // 2.67
    assert_eq!(average(9, 3, 2, 0), 1); // 0.75 -> 1
    assert_eq!(average(1 << 40, 1, 0, 0), i16::MAX);
    assert_eq!(quantize(0.5, 0), 0);
    assert_eq!(quantize(1.5, 0), 2);
    assert_eq!(quantize(-2.5, 1), -5);
    assert_eq!(quantize(10.0, 15), i16::MAX);
    // The largest frac holding every value; -1.0 fits at 15 (-32768), 1.0 does not.
    assert_eq!(exact_frac(&[-1.0]), 15);
    assert_eq!(exact_frac(&[1.0]), 14);
    assert_eq!(exact_frac(&[0.25, -3.0]), 13);
    assert_eq!(exact_frac(&[]), 15);
}
