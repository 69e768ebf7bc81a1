//! Drops the modules of the generated Verilog that the top module does not reach.
//!
//! rust-hdl emits a module for every block instance, including the children of a block whose
//! Verilog is hand-written (the PE's register submodules, see `pe`), which then are instantiated
//! nowhere. Left in, they are extra top-level candidates for every tool reading the file and
//! cost Verilator parse time.

use std::collections::{BTreeMap, BTreeSet};

/// `verilog` with only `top` and the modules it instantiates, directly or not, in their order.
/// Text outside modules (comments) is kept.
pub fn prune_unreached_modules(verilog: &str, top: &str) -> String {
    let chunks = split_modules(verilog);
    let bodies: BTreeMap<&str, &str> = chunks.iter().filter_map(|c| c.module).collect();
    let mut reached = BTreeSet::from([top]);
    let mut todo = vec![top];
    while let Some(m) = todo.pop() {
        let Some(body) = bodies.get(m) else { continue };
        for line in body.lines() {
            if let Some(kind) = instantiated_module(line) {
                if let Some((&name, _)) = bodies.get_key_value(kind) {
                    if reached.insert(name) {
                        todo.push(name);
                    }
                }
            }
        }
    }
    let mut out = String::with_capacity(verilog.len());
    for c in &chunks {
        if c.module.is_none_or(|(name, _)| reached.contains(name)) {
            out.push_str(c.text);
        }
    }
    out
}

/// A piece of the file: one module (`module` to `endmodule` line) or the text between modules.
struct Chunk<'a> {
    text: &'a str,
    /// `(name, text)` when the chunk is a module.
    module: Option<(&'a str, &'a str)>,
}

fn split_modules(verilog: &str) -> Vec<Chunk<'_>> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut current: Option<&str> = None;
    let mut pos = 0;
    for line in verilog.split_inclusive('\n') {
        let end = pos + line.len();
        match current {
            None => {
                if let Some(name) = module_name(line) {
                    if pos > start {
                        chunks.push(Chunk {
                            text: &verilog[start..pos],
                            module: None,
                        });
                    }
                    start = pos;
                    current = Some(name);
                }
            }
            Some(name) => {
                if line.starts_with("endmodule") {
                    let text = &verilog[start..end];
                    chunks.push(Chunk {
                        text,
                        module: Some((name, text)),
                    });
                    start = end;
                    current = None;
                }
            }
        }
        pos = end;
    }
    if start < verilog.len() {
        // An unterminated module (not produced by the generator) is kept as plain text.
        chunks.push(Chunk {
            text: &verilog[start..],
            module: None,
        });
    }
    chunks
}

/// The name declared by a `module name(` line.
fn module_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("module ")?;
    let name = &rest[..rest.find(['(', ' ', ';'])?];
    (!name.is_empty()).then_some(name)
}

/// The module type of an instantiation line `kind instance(`.
fn instantiated_module(line: &str) -> Option<&str> {
    let mut words = line.trim().split(' ');
    let kind = words.next()?;
    let inst = words.next()?;
    (words.next().is_none() && inst.ends_with('(') && inst.len() > 1).then_some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreached_modules_are_dropped_and_the_rest_kept_in_order() {
        let v = "// head\nmodule top(a);\n    mid$x m(\n        .a(a)\n    );\nendmodule\n\n\
                 module orphan(a);\n    leaf l(\n    );\nendmodule // orphan\n\
                 module mid$x(a);\n    leaf l(\n    );\nendmodule // mid\n\
                 module leaf(a);\nendmodule // leaf\n";
        let p = prune_unreached_modules(v, "top");
        assert!(!p.contains("orphan"), "{p}");
        assert_eq!(
            p,
            "// head\nmodule top(a);\n    mid$x m(\n        .a(a)\n    );\nendmodule\n\n\
             module mid$x(a);\n    leaf l(\n    );\nendmodule // mid\n\
             module leaf(a);\nendmodule // leaf\n"
        );
    }

    #[test]
    fn nothing_is_dropped_when_everything_is_reached() {
        let v = "module top(a);\n    leaf l(\n    );\nendmodule\nmodule leaf(a);\nendmodule\n";
        assert_eq!(prune_unreached_modules(v, "top"), v);
    }
}
