//! Splits independent assignments out of rust-hdl's combinational `always @(*)` blocks.
//!
//! rust-hdl emits one `always @(*)` block per module holding all of its combinational logic.
//! Verilator schedules a block as one unit, so when any statement of it reads a top-level input
//! (through the register bus, the controller's command handshake, ...) the whole block, and
//! everything downstream of any signal it drives, is re-evaluated in Verilator's
//! input-combinational pass on every `eval()` as well as after the clock edge. In this design
//! that pulled the whole PE array into the input pass and cost about as much as the clocked
//! logic itself.
//!
//! A statement `x = expr;` at the top level of a block is moved into its own
//! `always @(*) x = expr;` when `x` is assigned nowhere else in the block and `expr` reads no
//! signal the block assigns. Such a statement's settled value is `expr` wherever it sits in the
//! block, so the split changes no settled value, only Verilator's scheduling granularity.
//!
//! A moved statement that reads no signal at all (a literal, or the module's `localparam`s)
//! becomes `assign x = expr;` with `x` declared a `wire`: an `always @(*)` block that reads
//! nothing has no event to wake it, so Icarus (and other event-driven simulators) would never
//! run it and `x` would stay `x`.

/// The block opener and closer exactly as rust-hdl 0.46 indents them.
const OPEN: &str = "    always @(*) begin";
const CLOSE: &str = "    end";
/// Indent of a statement at the top level of a block.
const TOP_INDENT: &str = "        ";

/// `verilog` with independent top-level assignments of every `always @(*)` block split out.
pub fn split_comb_blocks(verilog: &str) -> String {
    let lines: Vec<&str> = verilog.lines().collect();
    let mut out = String::with_capacity(verilog.len() + verilog.len() / 8);
    let mut i = 0;
    while i < lines.len() {
        // A module, or the text up to the next one.
        let len = if lines[i].starts_with("module ") {
            lines[i..]
                .iter()
                .position(|l| l.starts_with("endmodule"))
                .map_or(lines.len() - i, |p| p + 1)
        } else {
            lines[i + 1..]
                .iter()
                .position(|l| l.starts_with("module "))
                .map_or(lines.len() - i, |p| p + 1)
        };
        split_module(&lines[i..i + len], &mut out);
        i += len;
    }
    out
}

/// One module's blocks split; the signals given constant `assign`s are declared `wire`.
fn split_module(lines: &[&str], out: &mut String) {
    let params: Vec<&str> = lines.iter().filter_map(|l| localparam_name(l)).collect();
    let mut text = String::new();
    let mut wires = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i] == OPEN {
            if let Some(len) = lines[i + 1..].iter().position(|l| *l == CLOSE) {
                split_block(&lines[i + 1..i + 1 + len], &params, &mut wires, &mut text);
                i += len + 2;
                continue;
            }
        }
        text.push_str(lines[i]);
        text.push('\n');
        i += 1;
    }
    for line in text.lines() {
        match reg_declaration(line) {
            Some((name, prefix, rest)) if wires.contains(&name) => {
                out.push_str(prefix);
                out.push_str("wire ");
                out.push_str(rest);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
}

/// Writes one block: the hoisted one-line blocks (or constant `assign`s, whose targets are
/// added to `wires`) first, then the rest of the block.
fn split_block<'a>(body: &[&'a str], params: &[&str], wires: &mut Vec<&'a str>, out: &mut String) {
    // A concatenation on the left (`{a, b} = ...`) assigns names this scan does not see.
    if body.iter().any(|l| l.trim_start().starts_with('{')) {
        write_block(body, out);
        return;
    }
    let assigned: Vec<&str> = body.iter().filter_map(|l| assigned_name(l)).collect();
    let mut kept = Vec::with_capacity(body.len());
    for line in body {
        match top_assignment(line) {
            Some((lhs, rhs))
                if assigned.iter().filter(|n| **n == lhs).count() == 1
                    && !identifiers(rhs).any(|id| assigned.contains(&id)) =>
            {
                if identifiers(rhs).all(|id| params.contains(&id)) {
                    out.push_str("    assign ");
                    wires.push(lhs);
                } else {
                    out.push_str("    always @(*) ");
                }
                out.push_str(line.trim_start());
                out.push('\n');
            }
            _ => kept.push(*line),
        }
    }
    if !kept.iter().all(|l| l.trim().is_empty()) {
        write_block(&kept, out);
    }
}

fn write_block(body: &[&str], out: &mut String) {
    out.push_str(OPEN);
    out.push('\n');
    for l in body {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(CLOSE);
    out.push('\n');
}

/// The name a `localparam` line declares.
fn localparam_name(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("localparam ")?;
    let (lhs, _) = rest.split_once('=')?;
    lhs.split_whitespace().last().filter(|n| is_identifier(n))
}

/// `(name, text before "reg ", text after "reg ")` of a declaration `[output ]reg [signed]
/// [range] name;` as rust-hdl writes it.
fn reg_declaration(line: &str) -> Option<(&str, &str, &str)> {
    let at = line.find("reg ")?;
    let prefix = &line[..at];
    if !matches!(prefix.trim(), "" | "output") {
        return None;
    }
    let rest = &line[at + 4..];
    let name = rest.strip_suffix(';')?.split_whitespace().last()?;
    is_identifier(name).then_some((name, prefix, rest))
}

/// `(lhs, rhs)` of a plain `lhs = rhs;` at the block's top level (no index on the left).
fn top_assignment(line: &str) -> Option<(&str, &str)> {
    let s = line.strip_prefix(TOP_INDENT)?;
    if s.starts_with(' ') {
        return None;
    }
    let (lhs, rhs) = s.split_once(" = ")?;
    let rhs = rhs.strip_suffix(';')?;
    (is_identifier(lhs) && !rhs.contains(';')).then_some((lhs, rhs))
}

/// The variable a line assigns (blocking or not, indexed or not, after a case label).
fn assigned_name(line: &str) -> Option<&str> {
    let s = line.trim_start();
    let eq = s.find('=')?;
    let mut lhs = s[..eq].trim_end_matches(['<', ' ']);
    if let Some((_, after)) = lhs.rsplit_once(':') {
        lhs = after.trim();
    }
    if let Some((name, _)) = lhs.split_once('[') {
        lhs = name.trim();
    }
    is_identifier(lhs).then_some(lhs)
}

fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '$')
}

/// The identifiers an expression reads; sized literals (`16'h0`) and `$signed` yield none.
fn identifiers(expr: &str) -> impl Iterator<Item = &str> {
    let bytes = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let word =
            |j: usize| bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_' || bytes[j] == b'$';
        if c == b'\'' || c == b'$' || c.is_ascii_digit() {
            // A literal's base and digits, a system function, or a number: skip the word.
            i += 1;
            while i < bytes.len() && word(i) {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && word(i) {
                i += 1;
            }
            out.push(&expr[start..i]);
        } else {
            i += 1;
        }
    }
    out.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn independent_assignments_are_split_out() {
        let v = "    always @(*) begin\n        a$clock = clock;\n        d = q;\n        if (en) begin\n            d = x;\n        end\n        y = d & 16'hff;\n        o = q$q;\n    end\n";
        let s = split_comb_blocks(v);
        assert!(s.contains("    always @(*) a$clock = clock;\n"));
        assert!(s.contains("    always @(*) o = q$q;\n"));
        // `d` is assigned twice and `y` reads it: both stay in the block, in order.
        assert!(s.contains("    always @(*) begin\n        d = q;\n        if (en) begin\n            d = x;\n        end\n        y = d & 16'hff;\n    end\n"));
    }

    #[test]
    fn constant_assignments_become_wires() {
        let v = "module m(o, i);\n    output reg [15:0] o;\n    input wire i;\n    localparam  one = 1;\n    reg  k;\n    reg  [3:0] y;\n    always @(*) begin\n        o = 16'h0;\n        k = one;\n        y = i;\n    end\nendmodule\n";
        let s = split_comb_blocks(v);
        assert!(s.contains("    output wire [15:0] o;\n"), "{s}");
        assert!(s.contains("    wire  k;\n"), "{s}");
        assert!(s.contains("    reg  [3:0] y;\n"), "{s}");
        assert!(
            s.contains("    assign o = 16'h0;\n    assign k = one;\n    always @(*) y = i;\n"),
            "{s}"
        );
        assert!(!s.contains("always @(*) begin"), "{s}");
    }

    #[test]
    fn literals_and_system_functions_are_not_reads() {
        let ids: Vec<&str> = identifiers("$signed(prod) + 32'hdead_beef + base").collect();
        assert_eq!(ids, ["prod", "base"]);
    }

    #[test]
    fn concatenated_targets_keep_the_block() {
        let v = "    always @(*) begin\n        {a, b} = c;\n        d = e;\n    end\n";
        assert_eq!(split_comb_blocks(v), v);
    }
}
