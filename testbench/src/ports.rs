//! The ports of a rust-hdl block, read from the block itself (the same walk rust-hdl's Verilog
//! generator makes), so the shim, the Rust handle and the Verilog agree by construction.

use rust_hdl_core::prelude::*;
use rust_hdl_core::type_descriptor::TypeKind;

/// Direction of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Driven by the testbench.
    Input,
    /// Driven by the block.
    Output,
    /// A tristate port (`Signal<InOut, _>`): not supported by the testbench.
    InOut,
}

/// One port of the block under test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// The rust-hdl name (a field name; `bus$field` for a field of an interface).
    pub name: String,
    /// Width in bits.
    pub width: usize,
    /// Direction.
    pub dir: Dir,
    /// Declared `Signed<N>`: [`crate::Testbench::read_signed`] sign-extends it.
    pub signed: bool,
    /// A rust-hdl `Clock`.
    pub clock: bool,
}

impl PortInfo {
    /// The member name Verilator gives the port in C++ (`$` becomes `__024`).
    pub(crate) fn cpp(&self) -> String {
        self.name.replace('$', "__024")
    }

    /// 32-bit words Verilator stores the port in when it is wider than 64 bits.
    pub(crate) fn words32(&self) -> usize {
        self.width.div_ceil(32)
    }
}

/// Collects the atoms one scope below the top: the block's own ports.
#[derive(Default)]
struct PortProbe {
    depth: usize,
    ports: Vec<PortInfo>,
}

impl Probe for PortProbe {
    fn visit_start_scope(&mut self, _name: &str, _node: &dyn Block) {
        self.depth += 1;
    }

    fn visit_atom(&mut self, name: &str, signal: &dyn Atom) {
        let dir = match signal.kind() {
            AtomKind::InputParameter => Dir::Input,
            AtomKind::OutputParameter | AtomKind::OutputPassthrough => Dir::Output,
            AtomKind::InOutParameter => Dir::InOut,
            _ => return,
        };
        if self.depth == 1 {
            let desc = signal.descriptor();
            self.ports.push(PortInfo {
                name: name.to_string(),
                width: signal.bits(),
                dir,
                signed: matches!(desc.kind, TypeKind::Signed(_)),
                clock: desc.name == "clock",
            });
        }
    }

    fn visit_end_scope(&mut self, _name: &str, _node: &dyn Block) {
        self.depth -= 1;
    }
}

/// The ports of `block` (a rust-hdl block, its ports at the top), in declaration order: the
/// list [`crate::Testbench::new`] builds the shim from.
pub fn block_ports(block: &dyn Block) -> Vec<PortInfo> {
    let mut probe = PortProbe::default();
    block.accept("top", &mut probe);
    probe.ports
}
