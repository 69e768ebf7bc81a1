//! Writing ONNX: nodes, attributes, tensors and value infos, as the export and the tests make
//! them.

use crate::proto::{
    attr_type, data_type, AttributeProto, Dimension, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto,
    TypeTensor, ValueInfoProto,
};
use prost::Message;

/// A node of the default domain.
pub fn node(
    op: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attrs: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: name.to_string(),
        op_type: op.to_string(),
        attribute: attrs,
        ..Default::default()
    }
}

/// An INT attribute.
pub fn attr_i(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::INT,
        i: v,
        ..Default::default()
    }
}

/// A FLOAT attribute.
pub fn attr_f(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::FLOAT,
        f: v,
        ..Default::default()
    }
}

/// An INTS attribute.
pub fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::INTS,
        ints: v.to_vec(),
        ..Default::default()
    }
}

/// A STRING attribute.
pub fn attr_s(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::STRING,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// A TENSOR attribute.
pub fn attr_t(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::TENSOR,
        t: Some(t),
        ..Default::default()
    }
}

/// A FLOAT tensor (raw little-endian data).
pub fn tensor_f32(name: &str, dims: &[usize], v: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: data_type::FLOAT,
        raw_data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// An INT64 tensor.
pub fn tensor_i64(name: &str, dims: &[usize], v: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: data_type::INT64,
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

/// A scalar of element type `ty` holding `v` (an INT16 zero point, an INT32 constant...).
pub fn scalar_int(name: &str, ty: i32, v: i32) -> TensorProto {
    TensorProto {
        name: name.into(),
        data_type: ty,
        int32_data: vec![v],
        ..Default::default()
    }
}

/// A float tensor value: `dims` with `None` for a symbolic (batch) dimension named `N`.
pub fn value_f32(name: &str, dims: &[Option<usize>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| match d {
            Some(v) => Dimension {
                dim_value: Some(*v as i64),
                ..Default::default()
            },
            None => Dimension {
                dim_param: Some("N".into()),
                ..Default::default()
            },
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeTensor {
                elem_type: data_type::FLOAT,
                shape: Some(TensorShapeProto { dim }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A model of one graph at `opset` of the default domain, IR version 7 (opset 13's), with
/// `metadata`.
pub fn model(
    graph: GraphProto,
    opset: i64,
    producer: &str,
    metadata: &[(&str, &str)],
) -> ModelProto {
    ModelProto {
        ir_version: 7,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        producer_name: producer.into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        graph: Some(graph),
        metadata_props: metadata
            .iter()
            .map(|(k, v)| StringStringEntryProto {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..Default::default()
    }
}

/// The model's bytes.
pub fn encode(m: &ModelProto) -> Vec<u8> {
    m.encode_to_vec()
}
