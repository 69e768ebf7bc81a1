//! What can go wrong reading or writing an ONNX file: each case one message that names what is
//! wrong and, where there is one, the fix.

use std::path::PathBuf;

/// The ops the import takes (the message of every refusal lists them).
pub const SUPPORTED_OPS: &[&str] = &[
    "Conv",
    "Gemm",
    "MatMul",
    "Add",
    "Relu",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Flatten",
    "Reshape",
    "BatchNormalization",
    "Softmax",
    "LogSoftmax",
    "Constant",
    "Identity",
    "Dropout",
    "QuantizeLinear",
    "DequantizeLinear",
    "Clip",
];

/// The opsets of the default domain the import reads.
pub const OPSETS: std::ops::RangeInclusive<i64> = 8..=21;

/// An ONNX file systole cannot read or write.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Not a well-formed ONNX protobuf (truncated, corrupt or another kind of file).
    #[error(
        "not a readable ONNX model ({0}): the file is truncated, corrupt or not ONNX; re-export it"
    )]
    Decode(String),
    /// A node systole does not run, or runs only with other attributes.
    #[error("node '{node}' ({op}): {msg}. systole imports {}", supported())]
    Unsupported {
        /// The node's name (or its op and place when it has none).
        node: String,
        /// Its op type.
        op: String,
        /// What about it is not supported.
        msg: String,
    },
    /// The model as a whole does not fit (inputs, outputs, opsets, shapes, missing tensors).
    #[error("{0}")]
    Model(String),
    /// A tensor or the file is larger than systole allocates.
    #[error("{0}")]
    Limit(String),
}

fn supported() -> String {
    format!(
        "opsets {} to {} of the default domain and these ops: {}",
        OPSETS.start(),
        OPSETS.end(),
        SUPPORTED_OPS.join(", ")
    )
}
