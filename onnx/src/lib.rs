//! ONNX in and out. The protobuf messages systole reads and writes ([`proto`], declared with
//! prost's derive: no protoc, nothing generated at build time), the import of a network into a
//! neutral form ([`Net`]: layers with their weights in systole's layouts, every op and attribute
//! checked, anything else refused naming the node) and the helpers that write ONNX ([`build`]).
#![deny(missing_docs)]

pub mod build;
pub mod calibrate;
mod error;
mod export;
pub mod graph;
mod import;
pub mod infer;
pub mod net;
mod ops;
mod ops_names;
#[allow(missing_docs)]
pub mod proto;
pub mod tensor;

pub use error::{OnnxError, OPSETS, SUPPORTED_OPS};
pub use export::{export, EXPORT_OPSET};
pub use import::{import_bytes, import_file, MAX_FILE_BYTES};
pub use net::{Net, Node, Op, Src};
