//! Any bytes given to the ONNX import are imported or refused with an error, never a panic.
//! Run with `cargo +nightly fuzz run import` from `onnx/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(net) = systole_onnx::import_bytes(data, None) {
        let _ = net.describe();
    }
});
