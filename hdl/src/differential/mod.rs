//! Differential simulation of the hand-written Verilog blocks against their rust-hdl models.
//!
//! The PE, the column converter and the gather engine each have two Verilog descriptions: the
//! hand-written text that `generate_verilog` emits (their `Logic::hdl`), and the Verilog that
//! rust-hdl generates from the block's `#[hdl_gen] kernel`, the same function whose `update`
//! the blocks' unit tests simulate ([`Model::model_hdl`]). [`compare`] emits both as modules
//! `model` and `hand`, drives them under Icarus with the same seeded stimulus (one line of
//! input values per clock cycle, written by the tests in `blocks.rs`), and after every input
//! change compares every output of the two, so a difference in any register shows up on the
//! first cycle it reaches a port. The only outputs compared under a condition are the ones the
//! blocks document as meaningful only then (write data while its write enable is low).

mod blocks;

use crate::icarus;
use rust_hdl_core::prelude::*;
use std::fmt::Write as _;

/// A block with hand-written Verilog beside its rust-hdl model.
pub(crate) trait Model: Block {
    /// The Verilog rust-hdl generates from the block's `#[hdl_gen]` kernel.
    fn model_hdl(&self) -> Verilog;
}

/// One port of the block under test.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Port {
    name: String,
    width: usize,
    input: bool,
}

/// Collects the ports of the top-level block (the atoms one scope down).
#[derive(Default)]
struct PortProbe {
    depth: usize,
    ports: Vec<Port>,
}

impl Probe for PortProbe {
    fn visit_start_scope(&mut self, _name: &str, _node: &dyn Block) {
        self.depth += 1;
    }

    fn visit_atom(&mut self, name: &str, signal: &dyn Atom) {
        let input = match signal.kind() {
            AtomKind::InputParameter => true,
            AtomKind::OutputParameter | AtomKind::OutputPassthrough => false,
            _ => return,
        };
        if self.depth == 1 {
            self.ports.push(Port {
                name: name.to_string(),
                width: signal.bits(),
                input,
            });
        }
    }

    fn visit_end_scope(&mut self, _name: &str, _node: &dyn Block) {
        self.depth -= 1;
    }
}

/// A stand-in that shows the module definer another `hdl` for the top-level block.
struct HdlOf(Verilog);

impl Logic for HdlOf {
    fn update(&mut self) {}

    fn hdl(&self) -> Verilog {
        self.0.clone()
    }
}

impl Block for HdlOf {
    fn connect_all(&mut self) {}
    fn update_all(&mut self) {}
    fn has_changed(&self) -> bool {
        false
    }
    fn accept(&self, _name: &str, _probe: &mut dyn Probe) {}
}

/// `ModuleDefines` with the top-level block's code replaced by `top_hdl`.
struct ModelProbe {
    defines: ModuleDefines,
    depth: usize,
    top_hdl: HdlOf,
}

impl Probe for ModelProbe {
    fn visit_start_scope(&mut self, name: &str, node: &dyn Block) {
        if self.depth == 0 {
            self.defines.visit_start_scope(name, &self.top_hdl);
        } else {
            self.defines.visit_start_scope(name, node);
        }
        self.depth += 1;
    }
    fn visit_start_namespace(&mut self, name: &str, node: &dyn Block) {
        self.defines.visit_start_namespace(name, node);
    }
    fn visit_atom(&mut self, name: &str, signal: &dyn Atom) {
        self.defines.visit_atom(name, signal);
    }
    fn visit_end_namespace(&mut self, name: &str, node: &dyn Block) {
        self.defines.visit_end_namespace(name, node);
    }
    fn visit_end_scope(&mut self, name: &str, node: &dyn Block) {
        self.depth -= 1;
        self.defines.visit_end_scope(name, node);
    }
}

/// The block's two descriptions as Verilog text: modules `model` (rust-hdl's kernel) and
/// `hand` (the hand-written text), each with the submodules it instantiates.
fn both_verilogs<B: Model>(block: &mut B) -> (String, String) {
    block.connect_all();
    let mut model = ModelProbe {
        defines: ModuleDefines::default(),
        depth: 0,
        top_hdl: HdlOf(block.model_hdl()),
    };
    block.accept("model", &mut model);
    let mut hand = ModuleDefines::default();
    block.accept("hand", &mut hand);
    let model = crate::prune::prune_unreached_modules(&model.defines.defines(), "model");
    let hand = crate::prune::prune_unreached_modules(&hand.defines(), "hand");
    (model, hand)
}

/// What a differential run saw.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// Cycles simulated (one per stimulus line).
    pub cycles: usize,
    /// Output values that differed (the first ten are described in `report`).
    pub mismatches: usize,
    /// Compared output values that were unknown (`x`) in the model.
    pub unknown: usize,
    /// Per compared output: cycles a 1-bit output was high, or changes of a wider one.
    pub coverage: Vec<(String, usize)>,
    /// vvp's output.
    pub report: String,
}

impl Outcome {
    /// The coverage count of `output`.
    pub fn covered(&self, output: &str) -> usize {
        self.coverage
            .iter()
            .find(|(n, _)| n == output)
            .map_or(0, |(_, c)| *c)
    }
}

/// One differential run: `block`'s two descriptions driven by `stimulus` (per cycle, the values
/// of `inputs` in that order; `inputs` must name every input port but `clock`). `only_when`
/// lists `(output name prefix, condition)`: such outputs are compared only while the Verilog
/// condition over the model's outputs (`m_` + name) holds. `mutation` replaces text of the
/// hand-written module once (the tests' proof that a change is caught).
pub(crate) fn compare<B: Model>(
    mut block: B,
    name: &str,
    inputs: &[&str],
    stimulus: &[Vec<u64>],
    only_when: &[(&str, &str)],
    mutation: Option<(&str, &str)>,
) -> Outcome {
    let mut probe = PortProbe::default();
    block.accept("top", &mut probe);
    let ports = probe.ports;
    let mut driven: Vec<&str> = ports
        .iter()
        .filter(|p| p.input && p.name != "clock")
        .map(|p| p.name.as_str())
        .collect();
    let mut named = inputs.to_vec();
    driven.sort_unstable();
    named.sort_unstable();
    assert_eq!(driven, named, "{name}: the stimulus must drive every input");
    let (model, mut hand) = both_verilogs(&mut block);
    if let Some((from, to)) = mutation {
        assert!(
            hand.contains(from),
            "{name}: mutation target {from:?} absent"
        );
        hand = hand.replacen(from, to, 1);
    }
    let widths: Vec<usize> = inputs
        .iter()
        .map(|i| ports.iter().find(|p| p.name == *i).map_or(64, |p| p.width))
        .collect();
    let mut stim = String::new();
    for line in stimulus {
        let words: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{:x}", v & (u64::MAX >> (64 - w))))
            .collect();
        let _ = writeln!(stim, "{}", words.join(" "));
    }
    let tb = testbench(&ports, inputs, only_when);
    let dir = std::env::temp_dir().join(format!(
        "systole-diff-{}-{name}-{}",
        std::process::id(),
        mutation.is_some()
    ));
    let out = icarus::run(
        &dir,
        "tb",
        &[("model.v", &model), ("hand.v", &hand), ("tb.v", &tb)],
        &[("stim.txt", &stim)],
        &[],
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"))
    .stdout;
    let field = |key: &str| -> usize {
        out.split_whitespace()
            .skip_while(|w| *w != key)
            .nth(1)
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no {key} in the simulation output:\n{out}"))
    };
    let coverage = out
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("COVER ")?.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.parse().ok()?))
        })
        .collect();
    Outcome {
        cycles: field("CYCLES"),
        mismatches: field("MISMATCHES"),
        unknown: field("UNKNOWN"),
        coverage,
        report: out,
    }
}

/// The testbench module `tb`: reads one line of `inputs` per cycle from `stim.txt`, lets the
/// combinational logic settle, compares every output of `model` and `hand`, then clocks both.
fn testbench(ports: &[Port], inputs: &[&str], only_when: &[(&str, &str)]) -> String {
    let range = |w: usize| format!("[{}:0]", w - 1);
    let mut v = String::from("module tb;\n    reg clock = 1'b0;\n");
    let mut conns_m = vec![".clock(clock)".to_string()];
    let mut conns_h = conns_m.clone();
    for p in ports.iter().filter(|p| p.name != "clock") {
        if p.input {
            let _ = writeln!(v, "    reg {} {};", range(p.width), p.name);
            conns_m.push(format!(".{0}({0})", p.name));
            conns_h.push(format!(".{0}({0})", p.name));
        } else {
            let _ = writeln!(v, "    wire {0} m_{1}, h_{1};", range(p.width), p.name);
            conns_m.push(format!(".{0}(m_{0})", p.name));
            conns_h.push(format!(".{0}(h_{0})", p.name));
        }
    }
    for (i, p) in ports.iter().filter(|p| !p.input).enumerate() {
        let _ = writeln!(
            v,
            "    integer cov_{i} = 0;\n    reg {} prev_{i} = 0;",
            range(p.width)
        );
    }
    let _ = writeln!(v, "    model m({});", conns_m.join(", "));
    let _ = writeln!(v, "    hand h({});", conns_h.join(", "));
    let fmt = vec!["%h"; inputs.len()].join(" ");
    let _ = write!(
        v,
        "    integer fd, code, cycle, errors, unknown;
    initial begin
        fd = $fopen(\"stim.txt\", \"r\");
        cycle = 0;
        errors = 0;
        unknown = 0;
        code = $fscanf(fd, \"{fmt}\\n\", {});
        while (code == {}) begin
            #1;
",
        inputs.join(", "),
        inputs.len()
    );
    for (i, p) in ports.iter().filter(|p| !p.input).enumerate() {
        let when = only_when
            .iter()
            .find(|(prefix, _)| p.name.starts_with(prefix))
            .map_or("1'b1", |(_, c)| c);
        let cover = if p.width == 1 {
            format!("if (m_{} === 1'b1) cov_{i} = cov_{i} + 1;", p.name)
        } else {
            format!(
                "if (m_{0} !== prev_{i}) cov_{i} = cov_{i} + 1;\n                prev_{i} = m_{0};",
                p.name
            )
        };
        let _ = write!(
            v,
            "            if ({when}) begin
                {cover}
                if (^m_{0} === 1'bx) unknown = unknown + 1;
                if (m_{0} !== h_{0}) begin
                    errors = errors + 1;
                    if (errors <= 10)
                        $display(\"cycle %0d: {0} model %h hand %h\", cycle, m_{0}, h_{0});
                end
            end
",
            p.name
        );
    }
    let _ = write!(
        v,
        "            clock = 1'b1;
            #1;
            clock = 1'b0;
            cycle = cycle + 1;
            code = $fscanf(fd, \"{fmt}\\n\", {});
        end
        $display(\"CYCLES %0d MISMATCHES %0d UNKNOWN %0d\", cycle, errors, unknown);
{}        $finish;
    end
endmodule
",
        inputs.join(", "),
        ports
            .iter()
            .filter(|p| !p.input)
            .enumerate()
            .map(|(i, p)| format!("        $display(\"COVER {} %0d\", cov_{i});\n", p.name))
            .collect::<String>()
    );
    v
}

/// Small deterministic generator for the stimulus (splitmix64).
pub(crate) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `true` with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// A value below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// One of `values`.
    pub fn pick(&mut self, values: &[u64]) -> u64 {
        values[self.below(values.len() as u64) as usize]
    }
}
