//! The C ABI's one hand-kept fact: `ffi::PortIn` and the shim's C++ `struct PortIn` must lay
//! out the same fields at the same offsets. The Rust struct is the reference: its offsets and
//! sizes (`offset_of!`) become `static_assert`s compiled against the `struct PortIn` of the
//! very shim `build.rs` writes (same Verilog, same generator), so a field swapped, resized,
//! added or dropped on either side fails here, naming the field.

use crate::ffi::PortIn;
use crate::ports;
use std::process::Command;
use systole_core::ArrayConfig;

/// `(name, offset, size)` of every field of `PortIn`; the pattern has no `..`, so a field
/// added to the struct does not compile until it is listed.
macro_rules! rust_layout {
    ($($field:ident),* $(,)?) => {{
        let PortIn { $($field: _),* } = PortIn::idle();
        let idle = PortIn::idle();
        vec![$((
            stringify!($field),
            core::mem::offset_of!(PortIn, $field),
            core::mem::size_of_val(&idle.$field),
        )),*]
    }};
}

fn rust_fields() -> Vec<(&'static str, usize, usize)> {
    rust_layout!(
        reg_addr, reg_wdata, reg_we, a_en, a_bank, a_row, a_data, b_en, b_bank, b_row, b_data,
        c_bank, c_row, fm_en, fm_row, fm_data,
    )
}

/// The `struct PortIn { ... };` of the shim `build.rs` writes for a 2x2 array.
fn shim_struct() -> String {
    let n = 2;
    let top = ports::TopPorts::of(&ArrayConfig::square(n)).unwrap();
    let cpp = ports::shim_cpp("sa2", &top, None);
    let start = cpp
        .find("struct PortIn {")
        .expect("the generated shim has no `struct PortIn {`");
    let len = cpp[start..]
        .find("};")
        .expect("`struct PortIn` is not closed")
        + 2;
    cpp[start..start + len].to_string()
}

/// C++ that compiles only when the shim's struct has the Rust layout.
fn probe(shim_struct: &str, fields: &[(&str, usize, usize)]) -> String {
    let mut s = format!("#include <cstddef>\n#include <cstdint>\n{shim_struct}\n");
    s += &format!(
        "static_assert(sizeof(PortIn) == {}, \"PortIn: Rust's size is {}\");\n",
        core::mem::size_of::<PortIn>(),
        core::mem::size_of::<PortIn>()
    );
    for (name, offset, size) in fields {
        s += &format!(
            "static_assert(offsetof(PortIn, {name}) == {offset}, \"PortIn::{name}: Rust's offset is {offset}\");\n\
             static_assert(sizeof(PortIn::{name}) == {size}, \"PortIn::{name}: Rust's size is {size}\");\n"
        );
    }
    s
}

#[test]
fn port_in_has_the_same_layout_in_rust_and_in_the_shim() {
    let fields = rust_fields();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("port_in_layout.cpp");
    std::fs::write(&src, probe(&shim_struct(), &fields)).unwrap();
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let out = Command::new(&cxx)
        .args(["-std=c++17", "-fsyntax-only"])
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C++ compiler `{cxx}` ({e}): ./x installs g++"));
    assert!(
        out.status.success(),
        "the shim's struct PortIn differs from ffi::PortIn:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
