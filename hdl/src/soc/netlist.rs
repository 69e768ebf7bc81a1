//! The SoC's `top` as a checked netlist: blocks described by their ports, nets with widths, and
//! instances connecting one to the other. Every instance sets each parameter of its block and
//! connects each port exactly once, to a net (or a part of one, or a constant) of the port's
//! width; every net has exactly one driver and is read. A wiring mistake is an error naming the
//! instance and port, not a Verilog text that a simulator reads differently.

use crate::HdlError;
use std::collections::BTreeMap;
use std::fmt::Write;

pub(crate) use crate::vfile::Dir;

/// Width of a block's port: fixed, or the value of one of the block's parameters (declared
/// `[P-1:0]` in the Verilog).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Width {
    Bits(u32),
    Param(&'static str),
}

/// One port of a block, as its Verilog module declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Port {
    pub name: String,
    pub dir: Dir,
    pub width: Width,
}

impl Port {
    pub fn new(name: impl Into<String>, dir: Dir, width: Width) -> Self {
        Port {
            name: name.into(),
            dir,
            width,
        }
    }
}

impl Width {
    /// The range as a Verilog header writes it (none for one bit).
    pub fn range(&self) -> Option<String> {
        match self {
            Width::Bits(1) => None,
            Width::Bits(w) => Some(format!("{}:0", w - 1)),
            Width::Param(p) => Some(format!("{p}-1:0")),
        }
    }
}

/// A Verilog module the top instantiates: its name, parameters and ports.
pub(crate) struct Block {
    pub module: &'static str,
    pub params: Vec<&'static str>,
    pub ports: Vec<Port>,
}

/// A parameter value as the instance writes it.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    /// A plain number (also the width of a `Width::Param` port).
    Int(u32),
    /// A 32-bit constant (`32'h...`).
    Word(u32),
    /// One bit.
    Bit(bool),
    /// A string (a file name).
    Text(String),
}

impl Value {
    fn verilog(&self) -> String {
        match self {
            Value::Int(v) => v.to_string(),
            Value::Word(v) => format!("32'h{v:08x}"),
            Value::Bit(b) => format!("1'b{}", u8::from(*b)),
            Value::Text(t) => format!("\"{t}\""),
        }
    }
}

/// A net of the top (a handle from [`Netlist`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Net(usize);

/// What an input port is connected to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Src {
    /// The whole net.
    Net(Net),
    /// Bits `msb..=lsb` of a net.
    Bits(Net, u32, u32),
    /// A constant of `width` bits.
    Const(u32, u64),
}

impl From<Net> for Src {
    fn from(n: Net) -> Self {
        Src::Net(n)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Input,
    Output,
    Wire,
}

#[derive(Clone)]
struct NetInfo {
    name: String,
    width: u32,
    kind: Kind,
    driven: bool,
    read: bool,
    /// Why only some of its bits are read (the declaration is waived from the lint).
    partly_read: Option<&'static str>,
}

/// The top module being wired.
pub(crate) struct Netlist {
    module: String,
    nets: Vec<NetInfo>,
    instances: String,
}

impl Netlist {
    pub fn new(module: &str) -> Self {
        Netlist {
            module: module.into(),
            nets: Vec::new(),
            instances: String::new(),
        }
    }

    fn add(&mut self, name: &str, width: u32, kind: Kind) -> Net {
        debug_assert!(
            self.nets.iter().all(|n| n.name != name),
            "net {name} declared twice"
        );
        self.nets.push(NetInfo {
            name: name.into(),
            width,
            kind,
            // A top input is driven from outside, a top output read outside.
            driven: kind == Kind::Input,
            read: kind == Kind::Output,
            partly_read: None,
        });
        Net(self.nets.len() - 1)
    }

    /// A port of the top driven from outside.
    pub fn input(&mut self, name: &str, width: u32) -> Net {
        self.add(name, width, Kind::Input)
    }

    /// A port of the top driven by an instance.
    pub fn output(&mut self, name: &str, width: u32) -> Net {
        self.add(name, width, Kind::Output)
    }

    /// A net between instances.
    pub fn wire(&mut self, name: &str, width: u32) -> Net {
        self.add(name, width, Kind::Wire)
    }

    /// A net of which the readers take only some bits (`why` goes into the Verilog).
    pub fn partly_read_wire(&mut self, name: &str, width: u32, why: &'static str) -> Net {
        let n = self.wire(name, width);
        self.nets[n.0].partly_read = Some(why);
        n
    }

    /// Instance `inst` of `block` with `params` and the port connections `conns`
    /// (outputs to whole nets), checked against the block's description.
    pub fn instance(
        &mut self,
        block: &Block,
        inst: &str,
        params: &[(&str, Value)],
        conns: &[(&str, Src)],
    ) -> Result<(), HdlError> {
        // A refused instance leaves no net marked driven or read.
        let before = self.nets.clone();
        let r = self.try_instance(block, inst, params, conns);
        if r.is_err() {
            self.nets = before;
        }
        r
    }

    fn try_instance(
        &mut self,
        block: &Block,
        inst: &str,
        params: &[(&str, Value)],
        conns: &[(&str, Src)],
    ) -> Result<(), HdlError> {
        let err = |what: String| {
            HdlError::Block(format!("SoC wiring, {inst} ({}): {what}", block.module))
        };
        let set: BTreeMap<&str, &Value> = params.iter().map(|(k, v)| (*k, v)).collect();
        let want: Vec<&str> = block.params.to_vec();
        let mut got: Vec<&str> = set.keys().copied().collect();
        let mut sorted = want.clone();
        sorted.sort_unstable();
        got.sort_unstable();
        if got != sorted || set.len() != params.len() {
            return Err(err(format!("parameters {got:?}, the block has {want:?}")));
        }
        let mut text = block.module.to_string();
        if !params.is_empty() {
            let list: Vec<String> = block
                .params
                .iter()
                .map(|p| format!("    .{p}({})", set[p].verilog()))
                .collect();
            let _ = write!(text, " #(\n{}\n)", list.join(",\n"));
        }
        let _ = writeln!(text, " {inst}(");
        let mut lines = Vec::new();
        for port in &block.ports {
            let mut found = conns.iter().filter(|(p, _)| *p == port.name);
            let Some((_, src)) = found.next() else {
                return Err(err(format!("port {} is not connected", port.name)));
            };
            if found.next().is_some() {
                return Err(err(format!("port {} is connected twice", port.name)));
            }
            let width = match port.width {
                Width::Bits(w) => w,
                Width::Param(p) => match set[p] {
                    Value::Int(w) => *w,
                    v => return Err(err(format!("width parameter {p} is {v:?}, not a number"))),
                },
            };
            let (expr, src_width) = self.connect(port.dir, *src).map_err(&err)?;
            if src_width != width {
                return Err(err(format!(
                    "port {} is {width} bits, connected to {expr} of {src_width}",
                    port.name
                )));
            }
            lines.push(format!("    .{}({expr})", port.name));
        }
        if let Some((p, _)) = conns
            .iter()
            .find(|(p, _)| block.ports.iter().all(|port| port.name != *p))
        {
            return Err(err(format!("the block has no port {p}")));
        }
        let _ = writeln!(text, "{}\n);", lines.join(",\n"));
        self.instances.push_str(&text);
        Ok(())
    }

    /// The connection's Verilog and width, marking the net driven or read.
    fn connect(&mut self, dir: Dir, src: Src) -> Result<(String, u32), String> {
        match (dir, src) {
            (Dir::Out, Src::Net(n)) => {
                let net = &mut self.nets[n.0];
                if net.driven {
                    return Err(format!("{} has a second driver", net.name));
                }
                net.driven = true;
                Ok((net.name.clone(), net.width))
            }
            (Dir::Out, other) => Err(format!("an output drives {other:?}, not a whole net")),
            (Dir::In, Src::Net(n)) => {
                let net = &mut self.nets[n.0];
                net.read = true;
                Ok((net.name.clone(), net.width))
            }
            (Dir::In, Src::Bits(n, msb, lsb)) => {
                let net = &mut self.nets[n.0];
                if msb < lsb || msb >= net.width {
                    return Err(format!(
                        "bits [{msb}:{lsb}] of {} ({} bits)",
                        net.name, net.width
                    ));
                }
                net.read = true;
                let sel = match msb == lsb {
                    true => format!("{}[{msb}]", net.name),
                    false => format!("{}[{msb}:{lsb}]", net.name),
                };
                Ok((sel, msb - lsb + 1))
            }
            (Dir::In, Src::Const(w, v)) => Ok((format!("{w}'d{v}"), w)),
        }
    }

    /// `target` driven by the OR of `inputs` (each of `target`'s width).
    pub fn or(&mut self, target: Net, inputs: &[Net]) -> Result<(), HdlError> {
        let t = &self.nets[target.0];
        let (name, width) = (t.name.clone(), t.width);
        if let Some(bad) = inputs.iter().find(|i| self.nets[i.0].width != width) {
            return Err(HdlError::Block(format!(
                "SoC wiring: {} is not {width} bits like {name}",
                self.nets[bad.0].name
            )));
        }
        let (expr, _) = self
            .connect(Dir::Out, Src::Net(target))
            .map_err(HdlError::Block)?;
        let terms: Vec<String> = inputs
            .iter()
            .map(|i| self.connect(Dir::In, Src::Net(*i)).map(|(e, _)| e))
            .collect::<Result<_, _>>()
            .map_err(HdlError::Block)?;
        let _ = writeln!(self.instances, "assign {expr} = {};", terms.join(" | "));
        Ok(())
    }

    /// The module's text, once every net is driven and read.
    pub fn finish(self) -> Result<String, HdlError> {
        for n in &self.nets {
            if !n.driven {
                return Err(HdlError::Block(format!(
                    "SoC wiring: nothing drives {}",
                    n.name
                )));
            }
            if !n.read {
                return Err(HdlError::Block(format!(
                    "SoC wiring: nothing reads {}",
                    n.name
                )));
            }
        }
        let ports: Vec<&str> = self
            .nets
            .iter()
            .filter(|n| n.kind != Kind::Wire)
            .map(|n| n.name.as_str())
            .collect();
        let mut v = format!("module {}({});\n", self.module, ports.join(", "));
        for n in &self.nets {
            let range = match n.width {
                1 => String::new(),
                w => format!(" [{}:0]", w - 1),
            };
            let kind = match n.kind {
                Kind::Input => "input wire",
                Kind::Output => "output wire",
                Kind::Wire => "wire",
            };
            match n.partly_read {
                Some(why) => {
                    let _ = writeln!(
                        v,
                        "/* verilator lint_off UNUSEDSIGNAL */\n// {why}\n{kind}{range} {};\n\
                         /* verilator lint_on UNUSEDSIGNAL */",
                        n.name
                    );
                }
                None => {
                    let _ = writeln!(v, "{kind}{range} {};", n.name);
                }
            }
        }
        v.push_str(&self.instances);
        v.push_str("endmodule\n");
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block() -> Block {
        Block {
            module: "m",
            params: vec!["W"],
            ports: vec![
                Port::new("a", Dir::In, Width::Param("W")),
                Port::new("y", Dir::Out, Width::Bits(1)),
            ],
        }
    }

    #[test]
    fn a_wiring_mistake_is_refused_by_name() {
        let b = block();
        let mut nl = Netlist::new("top");
        let a = nl.input("a", 4);
        let y = nl.output("y", 1);
        let w4 = [("W", Value::Int(4))];
        let e = |r: Result<(), HdlError>| r.unwrap_err().to_string();
        assert!(
            e(nl.instance(&b, "u", &w4, &[("a", a.into())])).contains("port y is not connected")
        );
        assert!(e(nl.instance(
            &b,
            "u",
            &[("W", Value::Int(3))],
            &[("a", a.into()), ("y", y.into())]
        ))
        .contains("port a is 3 bits"));
        assert!(
            e(nl.instance(&b, "u", &[], &[("a", a.into()), ("y", y.into())]))
                .contains("parameters")
        );
        assert!(e(nl.instance(
            &b,
            "u",
            &w4,
            &[("a", a.into()), ("y", y.into()), ("z", a.into())]
        ))
        .contains("no port z"));
        assert!(
            e(nl.instance(&b, "u", &w4, &[("a", a.into()), ("y", Src::Bits(a, 0, 0))]))
                .contains("not a whole net")
        );
        nl.instance(&b, "u", &w4, &[("a", a.into()), ("y", y.into())])
            .unwrap();
        assert!(
            e(nl.instance(&b, "v", &w4, &[("a", a.into()), ("y", y.into())]))
                .contains("second driver")
        );
        let mut open = Netlist::new("top");
        let _ = open.wire("floating", 2);
        assert!(open
            .finish()
            .unwrap_err()
            .to_string()
            .contains("nothing drives floating"));
    }
}
