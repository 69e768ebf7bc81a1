//! FLOAT16 and BFLOAT16 initializers (a half-precision export of a framework): read as the f32
//! of the same value, in raw_data and in int32_data, and a non-finite one refused.

use systole_onnx::build::*;
use systole_onnx::proto::{data_type, GraphProto, TensorProto};
use systole_onnx::tensor::half_to_f32;
use systole_onnx::{import_bytes, Net, Op};

/// `v` (each exact in both 16-bit formats) as a 16-bit float tensor.
fn half(name: &str, dims: &[usize], v: &[f32], ty: i32, raw: bool) -> TensorProto {
    let bits: Vec<u16> = v
        .iter()
        .map(|&x| {
            if ty == data_type::BFLOAT16 {
                (x.to_bits() >> 16) as u16
            } else {
                // Normal binary16 values: rebias the exponent, keep the top 10 mantissa bits.
                let b = x.to_bits();
                let (s, e, m) = (b >> 31, (b >> 23) & 0xff, b & 0x7f_ffff);
                if x == 0.0 {
                    (s << 15) as u16
                } else {
                    ((s << 15) | ((e + 15 - 127) << 10) | (m >> 13)) as u16
                }
            }
        })
        .collect();
    let mut t = TensorProto {
        name: name.into(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: ty,
        ..Default::default()
    };
    if raw {
        t.raw_data = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
    } else {
        t.int32_data = bits.iter().map(|&b| b as i32).collect();
    }
    t
}

fn dense(w: TensorProto, b: TensorProto) -> Result<Net, systole_onnx::OnnxError> {
    let g = GraphProto {
        node: vec![
            node("Flatten", "flat", &["x"], &["f"], vec![]),
            node("Gemm", "fc", &["f", "w", "b"], &["y"], vec![]),
        ],
        name: "g".into(),
        initializer: vec![w, b],
        input: vec![value_f32("x", &[None, Some(1), Some(2), Some(2)])],
        output: vec![value_f32("y", &[None, Some(3)])],
        ..Default::default()
    };
    import_bytes(&encode(&model(g, 13, "test", &[])), None)
}

#[test]
fn half_precision_bit_patterns_are_their_values() {
    let f16 = |h| half_to_f32(data_type::FLOAT16, h);
    assert_eq!(f16(0x3c00), 1.0);
    assert_eq!(f16(0xc000), -2.0);
    assert_eq!(f16(0x7bff), 65504.0);
    assert_eq!(f16(0x3555), 0.333_251_95);
    assert_eq!(f16(0x0001), 2f32.powi(-24));
    assert_eq!(f16(0x83ff), -1023.0 * 2f32.powi(-24));
    assert_eq!(f16(0x8000).to_bits(), (-0.0f32).to_bits());
    assert_eq!(f16(0xfc00), f32::NEG_INFINITY);
    assert!(f16(0x7e00).is_nan());
    let bf16 = |h| half_to_f32(data_type::BFLOAT16, h);
    assert_eq!(bf16(0x3f80), 1.0);
    assert_eq!(bf16(0xc0a0), -5.0);
    assert_eq!(bf16(0x3e20), 0.156_25);
}

#[test]
fn float16_and_bfloat16_initializers_are_imported_exactly() {
    let w: Vec<f32> = (0..12).map(|i| (i as f32 - 5.5) * 0.125).collect();
    let b = [0.5, -0.25, 3.0];
    let want = dense(tensor_f32("w", &[4, 3], &w), tensor_f32("b", &[3], &b)).unwrap();
    for ty in [data_type::FLOAT16, data_type::BFLOAT16] {
        for raw in [true, false] {
            let net = dense(
                half("w", &[4, 3], &w, ty, raw),
                half("b", &[3], &b, ty, raw),
            )
            .unwrap();
            let (Op::Dense { w: a, b: ab, .. }, Op::Dense { w: e, b: eb, .. }) =
                (&net.nodes[0].op, &want.nodes[0].op)
            else {
                panic!("{:?}", net.nodes[0].op)
            };
            assert_eq!((a, ab), (e, eb), "type {ty}, raw {raw}");
        }
    }
    // A 16-bit infinity is refused as any non-finite weight is.
    let mut inf = half("w", &[4, 3], &w, data_type::FLOAT16, true);
    inf.raw_data[0..2].copy_from_slice(&0x7c00u16.to_le_bytes());
    let e = dense(inf, tensor_f32("b", &[3], &b))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tensor 'w' holds a value that is not finite"),
        "{e}"
    );
}
