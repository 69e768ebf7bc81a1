//! The network as a directed acyclic graph of layers ([`Graph`]): nodes in topological order,
//! each reading the network's input or earlier nodes' outputs, the last node's output the
//! logits (softmax cross-entropy is the implicit head). [`Graph::check`] type-checks it before
//! anything is allocated; [`run`] walks it forward and backward over any [`crate::Arith`], the
//! same walk on the host and on the board.

use crate::layers::{Layer, ParamShape};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

pub mod builtin;
pub mod run;
mod wire;
pub use wire::WireError;

/// One image's tensor, NCHW: `c` maps of `h x w`; a vector is `(n, 1, 1)`. A batch is a
/// matrix with one row per image and `c·h·w` columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Shape {
    /// Channels.
    pub c: usize,
    /// Height.
    pub h: usize,
    /// Width.
    pub w: usize,
}

impl Shape {
    /// A vector of `n` values.
    pub fn flat(n: usize) -> Shape {
        Shape { c: n, h: 1, w: 1 }
    }
    /// Values per image (`0` if that overflows).
    pub fn features(&self) -> usize {
        self.c
            .checked_mul(self.h)
            .and_then(|x| x.checked_mul(self.w))
            .unwrap_or(0)
    }
}

impl core::fmt::Display for Shape {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.h == 1 && self.w == 1 {
            write!(f, "{}", self.c)
        } else {
            write!(f, "{}x{}x{}", self.c, self.h, self.w)
        }
    }
}

/// Where a node's input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Src {
    /// The network's input.
    Input,
    /// The output of an earlier node (its index).
    Node(usize),
}

/// One layer of the graph and the tensors it reads.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Node {
    /// A name unique in the graph (`conv1`, an ONNX node's name).
    pub name: String,
    /// What it computes.
    pub layer: Layer,
    /// Its inputs, as many as the layer takes.
    pub inputs: Vec<Src>,
}

/// A network: its input shape, its classes and its nodes in topological order.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Graph {
    /// One image's shape.
    pub input: Shape,
    /// Classes: the last node's outputs.
    pub classes: usize,
    /// The nodes; the last one's output is the logits.
    pub nodes: Vec<Node>,
}

/// Why a graph does not type-check.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{msg}", node.as_ref().map(|n| format!("layer '{n}': ")).unwrap_or_default())]
pub struct GraphError {
    /// The node at fault, where one is.
    pub node: Option<String>,
    /// What is wrong and how to fix it.
    pub msg: String,
}

impl GraphError {
    fn at(node: &Node, msg: String) -> GraphError {
        GraphError {
            node: Some(node.name.clone()),
            msg: format!("{} {msg}", node.layer.name()),
        }
    }
    pub(crate) fn whole(msg: String) -> GraphError {
        GraphError { node: None, msg }
    }
}

/// A parameter tensor of the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    /// The node it belongs to.
    pub node: usize,
    /// Its name (`layer 2 W`).
    pub name: String,
    /// Shape and fans.
    pub shape: ParamShape,
}

/// The most nodes a graph may have.
pub const MAX_NODES: usize = 4096;

use systole_core::limits::MAX_TENSOR_WORDS;

impl Graph {
    /// An empty graph for images of `input` and `classes` classes.
    pub fn new(input: Shape, classes: usize) -> Graph {
        Graph {
            input,
            classes,
            nodes: Vec::new(),
        }
    }

    /// Appends node `name` reading `inputs`, after checking they exist and their shapes fit;
    /// returns its index.
    pub fn push(&mut self, name: &str, layer: Layer, inputs: &[Src]) -> Result<usize, GraphError> {
        self.nodes.push(Node {
            name: name.to_string(),
            layer,
            inputs: inputs.to_vec(),
        });
        let k = self.nodes.len() - 1;
        if let Err(e) = self.node_shape(k, &self.shapes_upto(k)?) {
            self.nodes.pop();
            return Err(e);
        }
        Ok(k)
    }

    /// Appends `layer` reading the last node's output (the input for the first node), named
    /// after its kind and position (`relu3`).
    pub fn then(&mut self, layer: Layer) -> Result<usize, GraphError> {
        let src = match self.nodes.len() {
            0 => Src::Input,
            n => Src::Node(n - 1),
        };
        let name = format!(
            "{}{}",
            layer.name().to_ascii_lowercase(),
            self.nodes.len() + 1
        );
        self.push(&name, layer, &[src])
    }

    /// The output shape of node `k` given the shapes of the nodes before it.
    fn node_shape(&self, k: usize, before: &[Shape]) -> Result<Shape, GraphError> {
        let n = &self.nodes[k];
        if n.inputs.len() != n.layer.arity() {
            return Err(GraphError::at(
                n,
                format!(
                    "takes {} input(s), given {}",
                    n.layer.arity(),
                    n.inputs.len()
                ),
            ));
        }
        let mut x = Vec::with_capacity(n.inputs.len());
        for s in &n.inputs {
            x.push(match *s {
                Src::Input => self.input,
                Src::Node(j) if j < k => before[j],
                Src::Node(j) if j < self.nodes.len() => {
                    return Err(GraphError::at(
                        n,
                        format!("reads '{}', which comes later: the graph must be acyclic with nodes in topological order", self.nodes[j].name),
                    ))
                }
                Src::Node(j) => {
                    return Err(GraphError::at(n, format!("reads node {j}, which does not exist")))
                }
            });
        }
        let y = n
            .layer
            .out_shape(&x)
            .map_err(|m| GraphError::at(n, format!("on input {}: {m}", join(&x))))?;
        // Every size stays far from overflowing a 32-bit usize (the board's), so no count of
        // words can wrap.
        if y.features() == 0 || y.features() > MAX_TENSOR_WORDS {
            return Err(GraphError::at(
                n,
                format!(
                    "gives {y} values per image; systole takes at most {MAX_TENSOR_WORDS} (2^26)"
                ),
            ));
        }
        for p in n.layer.params(&x) {
            if p.rows
                .checked_mul(p.cols)
                .is_none_or(|w| w > MAX_TENSOR_WORDS)
            {
                return Err(GraphError::at(
                    n,
                    format!("needs a {} x {} parameter; systole allocates at most {MAX_TENSOR_WORDS} (2^26) words per tensor", p.rows, p.cols),
                ));
            }
        }
        Ok(y)
    }

    fn shapes_upto(&self, k: usize) -> Result<Vec<Shape>, GraphError> {
        let mut s = Vec::with_capacity(k);
        for i in 0..k {
            let y = self.node_shape(i, &s)?;
            s.push(y);
        }
        Ok(s)
    }

    /// The output shape of every node.
    pub fn shapes(&self) -> Result<Vec<Shape>, GraphError> {
        self.shapes_upto(self.nodes.len())
    }

    /// The input shapes of node `k`, given every node's output shape.
    pub fn in_shapes(&self, k: usize, shapes: &[Shape]) -> Vec<Shape> {
        self.nodes[k]
            .inputs
            .iter()
            .map(|s| match *s {
                Src::Input => self.input,
                Src::Node(j) => shapes[j],
            })
            .collect()
    }

    /// Type-checks the whole graph: shapes, unique names, every node's output used, the
    /// last node giving one logit per class.
    pub fn check(&self) -> Result<Vec<Shape>, GraphError> {
        let Some(last) = self.nodes.last() else {
            return Err(GraphError::whole("the network has no layers".into()));
        };
        if self.nodes.len() > MAX_NODES {
            return Err(GraphError::whole(format!(
                "the network has {} layers; systole takes at most {MAX_NODES}",
                self.nodes.len()
            )));
        }
        if self.input.features() == 0 || self.input.features() > MAX_TENSOR_WORDS {
            return Err(GraphError::whole(format!(
                "the input shape {} is empty or larger than systole takes",
                self.input
            )));
        }
        let shapes = self.shapes()?;
        for (k, n) in self.nodes.iter().enumerate() {
            if self.nodes[..k].iter().any(|m| m.name == n.name) {
                return Err(GraphError::at(
                    n,
                    "has the name of an earlier layer: names must be unique".into(),
                ));
            }
            let used = self.nodes[k + 1..]
                .iter()
                .any(|m| m.inputs.contains(&Src::Node(k)));
            if k + 1 < self.nodes.len() && !used {
                return Err(GraphError::at(
                    n,
                    "is used by no later layer: every layer but the last must feed another".into(),
                ));
            }
        }
        let out = shapes[shapes.len() - 1];
        if out != Shape::flat(self.classes) || self.classes < 2 {
            return Err(GraphError::at(
                last,
                format!(
                    "gives {out} values per image but the network must end in one logit per class ({} classes): end with a Dense layer of {} outputs",
                    self.classes, self.classes
                ),
            ));
        }
        Ok(shapes)
    }

    /// The node and position in its parameter list of each parameter tensor, in order, with
    /// names `layer N W` / `layer N b` (N counts the nodes that have parameters).
    pub fn params(&self) -> Result<Vec<ParamInfo>, GraphError> {
        let shapes = self.shapes()?;
        let mut out = Vec::new();
        let mut layer = 0;
        for k in 0..self.nodes.len() {
            let p = self.nodes[k].layer.params(&self.in_shapes(k, &shapes));
            if p.is_empty() {
                continue;
            }
            layer += 1;
            for (i, shape) in p.into_iter().enumerate() {
                let what = if i == 0 { "W" } else { "b" };
                out.push(ParamInfo {
                    node: k,
                    name: format!("layer {layer} {what}"),
                    shape,
                });
            }
        }
        Ok(out)
    }

    /// Multiply-accumulates of each node's forward pass per image.
    pub fn macs(&self) -> Result<Vec<u64>, GraphError> {
        let shapes = self.shapes()?;
        Ok((0..self.nodes.len())
            .map(|k| {
                self.nodes[k]
                    .layer
                    .macs(&self.in_shapes(k, &shapes), shapes[k])
            })
            .collect())
    }

    /// A table of the network: each layer's kind, settings, inputs, output shape, parameters
    /// and MACs per image, and the totals.
    pub fn describe(&self) -> Result<String, GraphError> {
        let shapes = self.shapes()?;
        let macs = self.macs()?;
        let params = self.params()?;
        let mut s = format!(
            "{:<4} {:<12} {:<13} {:<30} {:<14} {:>10} {:>10} {:>12}\n",
            "#", "name", "kind", "settings", "input", "output", "params", "MACs"
        );
        s += &format!(
            "{:<4} {:<12} {:<13} {:<30} {:<14} {:>10} {:>10} {:>12}\n",
            "",
            "input",
            "",
            "",
            "",
            self.input.to_string(),
            "",
            ""
        );
        for (k, n) in self.nodes.iter().enumerate() {
            let inputs: Vec<String> = n
                .inputs
                .iter()
                .map(|s| match *s {
                    Src::Input => "input".to_string(),
                    Src::Node(j) => self.nodes[j].name.clone(),
                })
                .collect();
            let p: usize = params
                .iter()
                .filter(|p| p.node == k)
                .map(|p| p.shape.rows * p.shape.cols)
                .sum();
            s += &format!(
                "{:<4} {:<12} {:<13} {:<30} {:<14} {:>10} {:>10} {:>12}\n",
                k + 1,
                n.name,
                n.layer.name(),
                n.layer.detail(),
                inputs.join(", "),
                shapes[k].to_string(),
                p,
                macs[k]
            );
        }
        let total: usize = params.iter().map(|p| p.shape.rows * p.shape.cols).sum();
        s += &format!(
            "{} layers, {} parameters, {} MACs per image (forward)\n",
            self.nodes.len(),
            total,
            macs.iter().sum::<u64>()
        );
        Ok(s)
    }

    /// For each node, the nodes that read its output.
    pub fn consumers(&self) -> Vec<Vec<usize>> {
        let mut c = vec![Vec::new(); self.nodes.len()];
        for (k, n) in self.nodes.iter().enumerate() {
            for s in &n.inputs {
                if let Src::Node(j) = *s {
                    c[j].push(k);
                }
            }
        }
        c
    }

    /// The tensors that cross into node `at` from before it: each source that a node at or
    /// after `at` reads and that is the network's input or a node before `at`, the input
    /// first, then the nodes in order. A pipeline stage starting at `at` receives these.
    pub fn crossing(&self, at: usize) -> Vec<Src> {
        let mut input = false;
        let mut before = vec![false; at.min(self.nodes.len())];
        for n in self.nodes.iter().skip(at) {
            for s in &n.inputs {
                match *s {
                    Src::Input => input = true,
                    Src::Node(j) if j < at => before[j] = true,
                    Src::Node(_) => {}
                }
            }
        }
        let nodes = (0..before.len()).filter(|&j| before[j]).map(Src::Node);
        input
            .then_some(Src::Input)
            .into_iter()
            .chain(nodes)
            .collect()
    }
}

fn join(x: &[Shape]) -> String {
    x.iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(" and ")
}

#[cfg(test)]
mod tests;
