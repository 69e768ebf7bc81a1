//! The import: what it makes of small models written here with the crate's own writer, the
//! folds, and one clear refusal for each kind of bad input.

use systole_onnx::build::*;
use systole_onnx::proto::{GraphProto, NodeProto, TensorProto};
use systole_onnx::{import_bytes, Net, OnnxError, Op, Src};

fn seq(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) * scale)
        .collect()
}

fn graph(
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    input: &[Option<usize>],
    out: &str,
) -> GraphProto {
    GraphProto {
        node: nodes,
        name: "g".into(),
        initializer: inits,
        input: vec![value_f32("x", input)],
        output: vec![value_f32(out, &[None, Some(3)])],
        ..Default::default()
    }
}

fn import(g: GraphProto, opset: i64) -> Result<Net, OnnxError> {
    import_bytes(&encode(&model(g, opset, "test", &[])), None)
}

/// Conv 3x3 pad 1 -> Relu -> MaxPool 2 -> Flatten -> Gemm (transB, alpha, beta) -> Softmax.
fn small_cnn() -> GraphProto {
    let nodes = vec![
        node(
            "Conv",
            "conv",
            &["x", "w", "b"],
            &["c"],
            vec![
                attr_ints("pads", &[1, 1, 1, 1]),
                attr_ints("kernel_shape", &[3, 3]),
            ],
        ),
        node("Relu", "relu", &["c"], &["r"], vec![]),
        node(
            "MaxPool",
            "pool",
            &["r"],
            &["p"],
            vec![
                attr_ints("kernel_shape", &[2, 2]),
                attr_ints("strides", &[2, 2]),
            ],
        ),
        node("Flatten", "flat", &["p"], &["f"], vec![]),
        node(
            "Gemm",
            "fc",
            &["f", "fw", "fb"],
            &["z"],
            vec![
                attr_i("transB", 1),
                attr_f("alpha", 0.5),
                attr_f("beta", 2.0),
            ],
        ),
        node("Softmax", "sm", &["z"], &["y"], vec![attr_i("axis", 1)]),
    ];
    let inits = vec![
        tensor_f32("w", &[2, 1, 3, 3], &seq(18, 0.1)),
        tensor_f32("b", &[2], &[0.5, -0.5]),
        tensor_f32("fw", &[3, 8], &seq(24, 0.25)),
        tensor_f32("fb", &[3], &[1.0, 2.0, 3.0]),
    ];
    graph(nodes, inits, &[None, Some(1), Some(4), Some(4)], "y")
}

#[test]
fn a_small_cnn_becomes_layers_with_systoles_layouts() {
    let net = import(small_cnn(), 13).unwrap();
    assert_eq!((net.input, net.classes), ([1, 4, 4], 3));
    let shapes: Vec<[usize; 3]> = net.nodes.iter().map(|n| n.shape).collect();
    assert_eq!(shapes, vec![[2, 4, 4], [2, 4, 4], [2, 2, 2], [3, 1, 1]]);
    assert!(matches!(
        net.nodes[0].op,
        Op::Conv {
            out_ch: 2,
            kernel: 3,
            stride: 1,
            pad: 1,
            ..
        }
    ));
    assert_eq!(net.nodes[3].inputs, vec![Src::Node(2)]);
    let Op::Dense { out: 3, w, b } = &net.nodes[3].op else {
        panic!("{:?}", net.nodes[3].op)
    };
    // B is 3 x 8 (transB): W[r][c] = alpha * B[c][r]; the bias is beta * C.
    let fw = seq(24, 0.25);
    for r in 0..8 {
        for c in 0..3 {
            assert_eq!(w[r * 3 + c], 0.5 * fw[c * 8 + r], "W[{r}][{c}]");
        }
    }
    assert_eq!(b.as_deref(), Some(&[2.0, 4.0, 6.0][..]));
    let d = net.describe();
    assert!(
        d.contains("conv 3x3 2 stride 1 pad 1") && d.contains("dense 3"),
        "{d}"
    );
    assert!(
        net.notes
            .iter()
            .any(|n| n.contains("'sm' (Softmax) at the output dropped")),
        "{:?}",
        net.notes
    );
    assert!(
        net.notes.iter().any(|n| n.contains("alpha 0.5 and beta 2")),
        "{:?}",
        net.notes
    );
}

/// The shape of the ONNX model zoo's MNIST network: SAME_UPPER convolutions without bias, each
/// followed by an Add of a per-channel constant, Reshape to N x 256, MatMul + Add.
#[test]
fn same_padding_and_constant_adds_fold_into_biases() {
    let nodes = vec![
        node(
            "Conv",
            "c1",
            &["x", "w1"],
            &["c1o"],
            vec![
                attr_s("auto_pad", "SAME_UPPER"),
                attr_ints("kernel_shape", &[5, 5]),
            ],
        ),
        node("Add", "a1", &["c1o", "b1"], &["a1o"], vec![]),
        node("Relu", "r1", &["a1o"], &["r1o"], vec![]),
        node(
            "MaxPool",
            "p1",
            &["r1o"],
            &["p1o"],
            vec![
                attr_ints("kernel_shape", &[2, 2]),
                attr_ints("strides", &[2, 2]),
            ],
        ),
        node(
            "Constant",
            "shape",
            &[],
            &["s"],
            vec![attr_t("value", tensor_i64("s", &[2], &[1, 32]))],
        ),
        node("Reshape", "flat", &["p1o", "s"], &["f"], vec![]),
        node("MatMul", "mm", &["f", "w2"], &["m"], vec![]),
        node("Add", "a2", &["m", "b2"], &["y"], vec![]),
    ];
    let inits = vec![
        tensor_f32("w1", &[2, 1, 5, 5], &seq(50, 0.01)),
        tensor_f32("b1", &[2, 1, 1], &[0.25, -0.25]),
        tensor_f32("w2", &[32, 3], &seq(96, 0.02)),
        tensor_f32("b2", &[1, 3], &[0.1, 0.2, 0.3]),
    ];
    let net = import(
        graph(nodes, inits, &[Some(1), Some(1), Some(8), Some(8)], "y"),
        8,
    )
    .unwrap();
    assert_eq!(net.nodes.len(), 4, "{}", net.describe());
    assert!(
        matches!(&net.nodes[0].op, Op::Conv { pad: 2, kernel: 5, b: Some(b), .. } if b == &[0.25, -0.25])
    );
    assert!(
        matches!(&net.nodes[3].op, Op::Dense { out: 3, b: Some(b), .. } if b == &[0.1, 0.2, 0.3])
    );
    assert_eq!(net.nodes[0].shape, [2, 8, 8]);
    assert_eq!(
        net.notes
            .iter()
            .filter(|n| n.contains("folded into the bias"))
            .count(),
        2
    );
}

#[test]
fn batch_normalization_folds_into_the_convolution_before_it() {
    let (scale, shift, mean, var) = (
        [2.0f32, 0.5],
        [0.1f32, -0.2],
        [0.3f32, -0.4],
        [4.0f32, 0.25],
    );
    let nodes = vec![
        node("Conv", "c", &["x", "w"], &["co"], vec![]),
        node(
            "BatchNormalization",
            "bn",
            &["co", "s", "sh", "m", "v"],
            &["bo"],
            vec![attr_f("epsilon", 0.0)],
        ),
        node("GlobalAveragePool", "gap", &["bo"], &["g"], vec![]),
        node("Flatten", "fl", &["g"], &["f"], vec![]),
        node("Gemm", "fc", &["f", "fw"], &["y"], vec![]),
    ];
    let w = seq(18, 0.1);
    let inits = vec![
        tensor_f32("w", &[2, 1, 3, 3], &w),
        tensor_f32("s", &[2], &scale),
        tensor_f32("sh", &[2], &shift),
        tensor_f32("m", &[2], &mean),
        tensor_f32("v", &[2], &var),
        tensor_f32("fw", &[2, 3], &seq(6, 0.5)),
    ];
    let net = import(
        graph(nodes, inits, &[None, Some(1), Some(5), Some(5)], "y"),
        15,
    )
    .unwrap();
    let Op::Conv {
        w: fw, b: Some(fb), ..
    } = &net.nodes[0].op
    else {
        panic!()
    };
    for o in 0..2 {
        let f = scale[o] / var[o].sqrt();
        for j in 0..9 {
            assert_eq!(fw[o * 9 + j], w[o * 9 + j] * f);
        }
        assert_eq!(fb[o], -mean[o] * f + shift[o]);
    }
    assert_eq!(net.nodes[1].op, Op::GlobalAvgPool);
}

#[test]
fn a_residual_add_joins_two_branches_and_dead_nodes_are_dropped() {
    let nodes = vec![
        node(
            "Conv",
            "c1",
            &["x", "w1", "b1"],
            &["c1o"],
            vec![attr_ints("pads", &[1, 1, 1, 1])],
        ),
        node("Relu", "r1", &["c1o"], &["r1o"], vec![]),
        node(
            "Conv",
            "c2",
            &["r1o", "w2"],
            &["c2o"],
            vec![attr_ints("pads", &[1, 1, 1, 1])],
        ),
        node("Add", "res", &["c2o", "r1o"], &["s"], vec![]),
        node("Relu", "dead", &["s"], &["unused"], vec![]),
        node("GlobalAveragePool", "gap", &["s"], &["y"], vec![]),
    ];
    let inits = vec![
        tensor_f32("w1", &[3, 1, 3, 3], &seq(27, 0.1)),
        tensor_f32("b1", &[3], &[0.0, 0.1, 0.2]),
        tensor_f32("w2", &[3, 3, 3, 3], &seq(81, 0.05)),
    ];
    let mut g = graph(nodes, inits, &[None, Some(1), Some(4), Some(4)], "y");
    g.output = vec![value_f32("y", &[None, Some(3), Some(1), Some(1)])];
    let net = import(g, 17).unwrap();
    assert_eq!(net.nodes.len(), 5, "{}", net.describe());
    assert_eq!(net.nodes[3].op, Op::Add);
    assert_eq!(net.nodes[3].inputs, vec![Src::Node(2), Src::Node(1)]);
    assert!(net
        .notes
        .iter()
        .any(|n| n.contains("'dead' (relu) does not reach the output")));
}

fn refusal(g: GraphProto, opset: i64) -> String {
    import(g, opset).unwrap_err().to_string()
}

fn with_node(i: usize, f: impl FnOnce(&mut NodeProto)) -> GraphProto {
    let mut g = small_cnn();
    f(&mut g.node[i]);
    g
}

#[test]
fn unsupported_ops_and_attributes_are_refused_naming_the_node() {
    let e = refusal(with_node(1, |n| n.op_type = "Sigmoid".into()), 13);
    assert!(
        e.contains("node 'relu' (Sigmoid): op Sigmoid is not supported")
            && e.contains("Conv, Gemm"),
        "{e}"
    );
    let e = refusal(with_node(0, |n| n.attribute.push(attr_i("group", 2))), 13);
    assert!(e.contains("node 'conv' (Conv): group other than 1"), "{e}");
    let e = refusal(
        with_node(0, |n| n.attribute[0] = attr_ints("pads", &[1, 1, 0, 0])),
        13,
    );
    assert!(e.contains("equal zero padding"), "{e}");
    let e = refusal(
        with_node(0, |n| n.attribute.push(attr_ints("strides", &[1, 2]))),
        13,
    );
    assert!(e.contains("strides [1, 2]"), "{e}");
    let e = refusal(with_node(0, |n| n.attribute.push(attr_i("mystery", 1))), 13);
    assert!(e.contains("attribute 'mystery' is not supported"), "{e}");
    let e = refusal(
        with_node(2, |n| n.attribute.push(attr_ints("pads", &[1, 1, 1, 1]))),
        13,
    );
    assert!(e.contains("padded pooling"), "{e}");
    let e = refusal(with_node(4, |n| n.attribute[0] = attr_i("transA", 1)), 13);
    assert!(e.contains("transA"), "{e}");
    // Softmax anywhere but at the output.
    let mut g = small_cnn();
    g.node.swap(4, 5);
    g.node[4].input[0] = "f".into();
    g.node[4].output[0] = "sf".into();
    g.node[5].input[0] = "sf".into();
    g.node[5].output[0] = "y".into();
    let e = refusal(g, 13);
    assert!(e.contains("only as the model's last op"), "{e}");
    let e = refusal(with_node(0, |n| n.domain = "com.microsoft".into()), 13);
    assert!(e.contains("domain 'com.microsoft'"), "{e}");
}

#[test]
fn a_constant_add_that_cannot_be_a_bias_is_refused() {
    // The convolution's output is read twice: the Add cannot fold into its bias.
    let nodes = vec![
        node("Conv", "c", &["x", "w"], &["co"], vec![]),
        node("Add", "a", &["co", "k"], &["ao"], vec![]),
        node("Add", "res", &["ao", "co"], &["s"], vec![]),
        node("GlobalAveragePool", "gap", &["s"], &["y"], vec![]),
    ];
    let inits = vec![
        tensor_f32("w", &[3, 1, 1, 1], &[1.0, 2.0, 3.0]),
        tensor_f32("k", &[3, 1, 1], &[1.0; 3]),
    ];
    let e = refusal(
        graph(nodes, inits, &[None, Some(1), Some(2), Some(2)], "y"),
        13,
    );
    assert!(
        e.contains("node 'a' (Add)") && e.contains("nothing else reads"),
        "{e}"
    );
}

#[test]
fn bad_inputs_outputs_and_opsets_are_refused() {
    let e = refusal(small_cnn(), 7);
    assert!(e.contains("opset 7") && e.contains("8 to 21"), "{e}");
    let e = refusal(small_cnn(), 22);
    assert!(e.contains("opset 22"), "{e}");
    let mut g = small_cnn();
    g.input[0] = value_f32("x", &[None, Some(1), None, Some(4)]);
    let e = refusal(g, 13);
    assert!(
        e.contains("dynamic dimension 2") && e.contains("fixed"),
        "{e}"
    );
    let mut g = small_cnn();
    g.input.push(value_f32("x2", &[None, Some(3)]));
    let e = refusal(g, 13);
    assert!(e.contains("2 inputs (x, x2)"), "{e}");
    // The file's input does not fit its first layer.
    let mut g = small_cnn();
    g.input[0] = value_f32("x", &[None, Some(2), Some(4), Some(4)]);
    let e = refusal(g, 13);
    assert!(e.contains("node 'conv'") && e.contains("2 channels"), "{e}");
}

#[test]
fn truncated_corrupt_and_oversized_files_are_one_clear_error() {
    let bytes = encode(&model(small_cnn(), 13, "t", &[]));
    for cut in [bytes.len() / 2, bytes.len() - 1, 3] {
        let e = import_bytes(&bytes[..cut], None).unwrap_err();
        assert!(
            matches!(e, OnnxError::Decode(_) | OnnxError::Model(_)),
            "{cut}: {e}"
        );
        assert!(
            e.to_string().contains("corrupt") || e.to_string().contains("missing"),
            "{cut}: {e}"
        );
    }
    let e = import_bytes(b"this is not a protobuf at all, just text", None).unwrap_err();
    assert!(e.to_string().contains("not a readable ONNX model"), "{e}");
    // 2^40 elements declared: refused from the dims, nothing allocated.
    let mut g = small_cnn();
    g.initializer[0].dims = vec![1 << 20, 1 << 20];
    let e = refusal(g, 13);
    assert!(
        e.contains("tensor 'w' of shape [1048576, 1048576] has more than 67108864"),
        "{e}"
    );
    // Fewer bytes than the dims say.
    let mut g = small_cnn();
    g.initializer[1].raw_data.pop();
    let e = refusal(g, 13);
    assert!(
        e.contains("tensor 'b' of shape [2] should hold 8 bytes of data but holds 7"),
        "{e}"
    );
}

#[test]
fn external_data_is_read_from_beside_the_model_and_a_missing_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = small_cnn();
    let w = seq(18, 0.1);
    let t = &mut g.initializer[0];
    t.raw_data.clear();
    t.data_location = systole_onnx::proto::DATA_LOCATION_EXTERNAL;
    let kv = |k: &str, v: &str| systole_onnx::proto::StringStringEntryProto {
        key: k.into(),
        value: v.into(),
    };
    t.external_data = vec![
        kv("location", "w.bin"),
        kv("offset", "4"),
        kv("length", "72"),
    ];
    let bytes = encode(&model(g.clone(), 13, "t", &[]));
    let e = import_bytes(&bytes, Some(dir.path()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tensor 'w'") && e.contains("w.bin") && e.contains("cannot be opened"),
        "{e}"
    );
    let mut data = vec![0u8; 4];
    data.extend(w.iter().flat_map(|x| x.to_le_bytes()));
    std::fs::write(dir.path().join("w.bin"), &data[..40]).unwrap();
    let e = import_bytes(&bytes, Some(dir.path()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("truncated"), "{e}");
    std::fs::write(dir.path().join("w.bin"), &data).unwrap();
    let net = import_bytes(&bytes, Some(dir.path())).unwrap();
    assert!(matches!(&net.nodes[0].op, Op::Conv { w: got, .. } if *got == w));
    g.initializer[0].external_data[0] = kv("location", "../w.bin");
    let e = import_bytes(&encode(&model(g, 13, "t", &[])), Some(dir.path()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("inside the model's folder"), "{e}");
}

/// Thousands of mutated valid models (bytes flipped, cut, duplicated, varints stretched), a
/// fixed seed: every one is imported or refused with an error, none panics.
#[test]
fn mutated_models_never_panic() {
    let seeds = [encode(&model(small_cnn(), 13, "t", &[])), {
        let mut g = small_cnn();
        g.node[0].attribute = vec![attr_s("auto_pad", "SAME_LOWER")];
        encode(&model(g, 9, "t", &[]))
    }];
    let mut s = 0x5eed_0001_u64;
    let mut next = move || {
        // SplitMix64: the same mutations on every run.
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let (mut ok, mut refused) = (0, 0);
    for i in 0..4000 {
        let mut b = seeds[i % seeds.len()].clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() % b.len() as u64) as usize;
            match next() % 5 {
                0 => b[at] ^= 1 << (next() % 8),
                1 => b[at] = next() as u8,
                2 => b.truncate(at.max(1)),
                3 => {
                    let piece: Vec<u8> = b[at..(at + 8).min(b.len())].to_vec();
                    b.splice(at..at, piece);
                }
                _ => b[at] = 0xff,
            }
        }
        match import_bytes(&b, None) {
            Ok(net) => {
                ok += 1;
                let _ = net.describe();
            }
            Err(e) => {
                refused += 1;
                assert!(!e.to_string().is_empty());
            }
        }
    }
    // Both outcomes occur, so the mutations reach past the decoder.
    assert!(
        ok > 50 && refused > 1000,
        "{ok} imported, {refused} refused"
    );
}
