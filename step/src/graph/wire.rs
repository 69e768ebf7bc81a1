//! The graph's wire form, written and read by the host and the board (inside the training
//! state's wire form). Little-endian: input `c`, `h`, `w` u16; classes u16; node count u16;
//! each node: kind tag u8 (`Layer::wire`), the kind's fields u16 each, then its inputs u16
//! each (as many as the kind takes; 0 the network's input, `j + 1` node `j`). Names are not
//! sent (nodes are named `n1`, `n2`, ... on decode): no name changes a result, only messages.

use super::{Graph, Shape, Src, MAX_NODES};
use crate::layers::Layer;
use alloc::vec::Vec;

/// Why a graph's wire form was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// It ends early.
    #[error("the network's description ends early")]
    Truncated,
    /// A value no graph has.
    #[error("the network's {0} is invalid")]
    Field(&'static str),
    /// It decodes but does not type-check.
    #[error("the network does not type-check: {0}")]
    Check(super::GraphError),
}

impl Graph {
    /// Whether every field fits the wire form's 16 bits.
    pub fn encodable(&self) -> bool {
        let small = |v: usize| v <= u16::MAX as usize;
        small(self.input.c)
            && small(self.input.h)
            && small(self.input.w)
            && small(self.classes)
            && self.nodes.len() < MAX_NODES
            && self.nodes.iter().all(|n| {
                n.name.len() <= u8::MAX as usize && n.layer.wire().1.into_iter().all(small)
            })
    }

    /// Bytes of [`Graph::encode_to`]'s output.
    pub fn encoded_len(&self) -> usize {
        10 + self
            .nodes
            .iter()
            .map(|n| 2 + n.name.len() + 2 * n.layer.wire().1.len() + 2 * n.inputs.len())
            .sum::<usize>()
    }

    /// Appends the wire form to `out`.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        let u16s = |out: &mut Vec<u8>, v: usize| out.extend_from_slice(&(v as u16).to_le_bytes());
        for v in [
            self.input.c,
            self.input.h,
            self.input.w,
            self.classes,
            self.nodes.len(),
        ] {
            u16s(out, v);
        }
        for n in &self.nodes {
            let (tag, f) = n.layer.wire();
            out.push(n.name.len() as u8);
            out.extend_from_slice(n.name.as_bytes());
            out.push(tag);
            for v in f {
                u16s(out, v);
            }
            for s in &n.inputs {
                u16s(
                    out,
                    match *s {
                        Src::Input => 0,
                        Src::Node(j) => j + 1,
                    },
                );
            }
        }
    }

    /// Reads a wire form from the front of `bytes`; returns the graph and the bytes it took.
    pub fn decode_from(bytes: &[u8]) -> Result<(Graph, usize), WireError> {
        let mut at = 0usize;
        let head = bytes.get(..10).ok_or(WireError::Truncated)?;
        let f = |i: usize| usize::from(u16::from_le_bytes([head[2 * i], head[2 * i + 1]]));
        let input = Shape {
            c: f(0),
            h: f(1),
            w: f(2),
        };
        let (classes, count) = (f(3), f(4));
        if count > MAX_NODES {
            return Err(WireError::Field("layer count"));
        }
        at += 10;
        let mut g = Graph::new(input, classes);
        for _ in 0..count {
            let len = usize::from(*bytes.get(at).ok_or(WireError::Truncated)?);
            let name = bytes
                .get(at + 1..at + 1 + len)
                .ok_or(WireError::Truncated)?;
            let name = core::str::from_utf8(name).map_err(|_| WireError::Field("layer name"))?;
            at += 1 + len;
            let tag = *bytes.get(at).ok_or(WireError::Truncated)?;
            at += 1;
            let nf = Layer::wire_fields(tag).ok_or(WireError::Field("layer kind"))?;
            let mut read = |n: usize| -> Result<Vec<u16>, WireError> {
                let b = bytes.get(at..at + 2 * n).ok_or(WireError::Truncated)?;
                at += 2 * n;
                Ok(b.chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect())
            };
            let fields = read(nf)?;
            let layer = Layer::from_wire(tag, &fields).ok_or(WireError::Field("layer settings"))?;
            let inputs = read(layer.arity())?
                .into_iter()
                .map(|v| match v {
                    0 => Src::Input,
                    j => Src::Node(usize::from(j) - 1),
                })
                .collect::<Vec<_>>();
            g.push(name, layer, &inputs).map_err(WireError::Check)?;
        }
        g.check().map_err(WireError::Check)?;
        Ok((g, at))
    }
}
