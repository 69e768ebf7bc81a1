//! The hand-written Verilog under `hdl/verilog/`: each file one module with an ANSI header
//! (`module m #(parameter P = ...) (input wire [P-1:0] x, ...);`). Blocks that rust-hdl
//! declares (the PE, the PE pair, the converter) take the file's body with its parameters fixed
//! ([`body_at`]); the SoC instantiates its files as they are. The headers are read here so the
//! tests can hold them to the Rust port lists.

/// Direction of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Dir {
    In,
    Out,
}

/// One port declaration: direction, signedness, range (`15:0`, `W-1:0`; none for one bit), name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Decl {
    pub name: String,
    pub dir: Dir,
    pub signed: bool,
    pub range: Option<String>,
}

/// A module's name, parameter names (in order) and ports (in order).
#[derive(Debug)]
pub(crate) struct Header {
    pub module: String,
    pub params: Vec<String>,
    /// Read by the tests that hold each file to its block's Rust port list.
    #[cfg_attr(not(test), allow(dead_code))]
    pub ports: Vec<Decl>,
}

/// `text` without `//` comments.
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One declaration `input|output [wire|reg] [signed] [[range]] name` (no trailing `,`/`;`).
pub(crate) fn decl(text: &str) -> Option<Decl> {
    let text = text.trim();
    let (dir, rest) = if let Some(r) = text.strip_prefix("input ") {
        (Dir::In, r)
    } else {
        (Dir::Out, text.strip_prefix("output ")?)
    };
    let mut rest = rest.trim_start();
    for kw in ["wire ", "reg "] {
        rest = rest.strip_prefix(kw).unwrap_or(rest).trim_start();
    }
    let signed = rest.starts_with("signed ");
    if signed {
        rest = rest["signed ".len()..].trim_start();
    }
    let range = match rest.strip_prefix('[') {
        Some(r) => {
            let (range, after) = r.split_once(']')?;
            rest = after.trim_start();
            Some(range.replace(' ', ""))
        }
        None => None,
    };
    let name = rest.trim();
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')).then(|| Decl {
        name: name.into(),
        dir,
        signed,
        range,
    })
}

/// Where the first line starting with `module ` starts.
fn module_start(text: &str) -> Option<usize> {
    match text.starts_with("module ") {
        true => Some(0),
        false => text.find("\nmodule ").map(|i| i + 1),
    }
}

/// The header of the first module in `text`.
pub(crate) fn header(text: &str) -> Result<Header, String> {
    let text = strip_comments(text);
    let start = module_start(&text).ok_or("no module")?;
    let head = &text[start + "module ".len()..];
    let end = head.find(");").ok_or("no end of the module header")?;
    let head = &head[..end];
    let module: String = head
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let mut params = Vec::new();
    let ports_text = match head.find("#(") {
        Some(p) => {
            let close = head[p..].find(") (").ok_or("no end of the parameters")? + p;
            for item in head[p + 2..close].split(',') {
                let item = item
                    .trim()
                    .strip_prefix("parameter")
                    .ok_or("not a parameter")?;
                let name = item.split('=').next().unwrap_or("").trim();
                let name = name.rsplit([' ', ']']).next().unwrap_or("").trim();
                params.push(name.to_string());
            }
            &head[close + 3..]
        }
        None => head.split_once('(').ok_or("no port list")?.1,
    };
    let ports = ports_text
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| decl(s).ok_or(format!("not a port declaration: {s:?}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Header {
        module,
        params,
        ports,
    })
}

/// The body of the first module in `text` (between its header and `endmodule`), its first
/// parameters fixed by `localparam` lines in front (`values`, in the header's order). Any
/// further parameters are ones the host module declares itself (rust-hdl's constants).
pub(crate) fn body_at(text: &str, values: &[(&str, u32)]) -> String {
    let h = header(text).expect("the hand-written files have a header");
    debug_assert!(
        h.params.iter().zip(values).all(|(p, (n, _))| p == n) && h.params.len() >= values.len(),
        "{} has parameters {:?}",
        h.module,
        h.params
    );
    let module = module_start(text).expect("a module");
    let start = module + text[module..].find(");\n").expect("header end") + 3;
    let end = text.rfind("endmodule").expect("endmodule");
    let mut out: String = values
        .iter()
        .map(|(n, v)| format!("localparam {n} = {v};\n"))
        .collect();
    out.push_str(&text[start..end]);
    out
}

/// The port declarations in rust-hdl's Verilog of a block (`input wire signed [15:0] a_in;`
/// lines of its first module).
#[cfg(test)]
pub(crate) fn rust_hdl_ports(text: &str) -> Vec<Decl> {
    let first = text.split("endmodule").next().unwrap_or("");
    first
        .lines()
        .filter_map(|l| decl(l.trim().strip_suffix(';')?))
        .collect()
}

/// Asserts that the file's module declares the ports rust-hdl declares for the block whose
/// Verilog is `rust_hdl` (names, directions, signedness, ranges; in any order).
#[cfg(test)]
pub(crate) fn assert_same_ports(file: &str, rust_hdl: &str) {
    let mut want = rust_hdl_ports(rust_hdl);
    let mut got = header(file).unwrap().ports;
    want.sort();
    got.sort();
    assert!(!want.is_empty(), "no ports in the rust-hdl Verilog");
    assert_eq!(got, want);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_read() {
        let h = header(
            "// x\nmodule m #(\n    parameter W = 16,\n    parameter [31:0] A = 32'h0\n) (\n    \
             input wire clock, // c\n    input wire signed [W-1:0] a,\n    output reg [3:0] q\n);\nendmodule\n",
        )
        .unwrap();
        assert_eq!(h.module, "m");
        assert_eq!(h.params, ["W", "A"]);
        assert_eq!(h.ports.len(), 3);
        assert_eq!(h.ports[1].range.as_deref(), Some("W-1:0"));
        assert!(h.ports[1].signed && h.ports[2].dir == Dir::Out);
    }
}
