//! ONNX -> [`Net`]: the model-level checks (opsets, the one input and output, limits) and the
//! walk over the nodes; each op's rules are in `ops.rs`. A value is either a constant (an
//! initializer or a `Constant` node's) or an activation: the output of a layer made so far, or
//! the input, with its per-image shape.

use crate::error::{OnnxError, OPSETS};
use crate::net::{Net, Node, Op, Src};
use crate::proto::{attr_type, data_type, AttributeProto, ModelProto, NodeProto, ValueInfoProto};
use crate::tensor::{self, Const};
use prost::Message;
use std::collections::HashMap;
use std::path::Path;
use systole_core::limits::{MAX_MODEL_PARAMS, MAX_TENSOR_WORDS};

/// A float constant's dimensions and values.
pub(crate) type Floats = (Vec<usize>, Vec<f32>);

/// Largest ONNX file read: the most parameters systole trains as f32, plus room for the graph.
pub const MAX_FILE_BYTES: u64 = 4 * MAX_MODEL_PARAMS as u64 + (64 << 20);

/// An activation: a layer's output (or the input) and its per-image shape. `rank` is the ONNX
/// rank with the batch (4: `N x C x H x W`, 2: `N x F` with the shape `(F, 1, 1)`); `head` marks
/// the output of a dropped Softmax, which nothing but the graph output may read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Act {
    pub src: Src,
    pub shape: [usize; 3],
    pub rank: u8,
    pub head: bool,
    /// The int16 output of a QuantizeLinear at this `frac`: only a DequantizeLinear reads it.
    pub q: Option<u32>,
    /// The output of a DequantizeLinear at this `frac` (a rounding point), which a Clip may
    /// saturate to narrower words.
    pub dq: Option<u32>,
}

/// The import's state while it walks the nodes.
pub(crate) struct Builder<'a> {
    pub dir: Option<&'a Path>,
    pub opset: i64,
    pub consts: HashMap<String, Const>,
    pub acts: HashMap<String, Act>,
    /// How many times each value is read (node inputs and graph outputs).
    pub uses: HashMap<String, usize>,
    /// The names that hold each node's output, and how many of their reads were aliases.
    pub names_of: Vec<Vec<String>>,
    pub alias_uses: Vec<usize>,
    pub nodes: Vec<Node>,
    pub notes: Vec<String>,
    /// The input's format from a QuantizeLinear/DequantizeLinear pair on it.
    pub input_frac: Option<u32>,
    /// The element type of each integer constant (a zero point must be INT16).
    pub zero_point_types: HashMap<String, i32>,
    /// The width the Clips after the rounding points saturate to (narrower words).
    pub word_bits: Option<u32>,
    /// Rounding points on activations (DequantizeLinear), and the Clips after them.
    pub points_seen: usize,
    pub clips: usize,
}

/// Reads and imports an ONNX file (external data from beside it).
pub fn import_file(path: &Path) -> Result<Net, OnnxError> {
    let io = |source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_FILE_BYTES {
        return Err(OnnxError::Limit(format!(
            "{} is {len} bytes; systole reads ONNX files of at most {MAX_FILE_BYTES} bytes (2^26 parameters as f32 and the graph)",
            path.display()
        )));
    }
    let bytes = std::fs::read(path).map_err(io)?;
    import_bytes(&bytes, path.parent())
}

/// Imports an ONNX model from its bytes; `dir` is where its external data lives (`None`: the
/// model has none).
pub fn import_bytes(bytes: &[u8], dir: Option<&Path>) -> Result<Net, OnnxError> {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(OnnxError::Limit(format!(
            "the model is {} bytes; systole reads ONNX files of at most {MAX_FILE_BYTES} bytes",
            bytes.len()
        )));
    }
    let model = ModelProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    let opset = default_opset(&model)?;
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| OnnxError::Decode("the file has no graph".into()))?;
    if !graph.sparse_initializer.is_empty() {
        return Err(OnnxError::Model(
            "the graph has sparse initializers, which systole does not read: store them dense"
                .into(),
        ));
    }
    let mut b = Builder {
        dir,
        opset,
        consts: HashMap::new(),
        acts: HashMap::new(),
        uses: HashMap::new(),
        names_of: Vec::new(),
        alias_uses: Vec::new(),
        nodes: Vec::new(),
        notes: Vec::new(),
        input_frac: None,
        zero_point_types: HashMap::new(),
        word_bits: None,
        points_seen: 0,
        clips: 0,
    };
    for t in &graph.initializer {
        b.zero_point_types.insert(t.name.clone(), t.data_type);
        b.consts.insert(t.name.clone(), tensor::decode(t, dir)?);
    }
    let (input_name, input, rank) = the_input(&graph.input, &b.consts)?;
    b.acts.insert(
        input_name.clone(),
        Act {
            src: Src::Input,
            shape: input,
            rank,
            head: false,
            q: None,
            dq: None,
        },
    );
    let out = the_output(&graph.output)?;
    for n in &graph.node {
        for i in n.input.iter().filter(|i| !i.is_empty()) {
            *b.uses.entry(i.clone()).or_default() += 1;
        }
    }
    *b.uses.entry(out.clone()).or_default() += 1;
    for (i, n) in graph.node.iter().enumerate() {
        let name = if n.name.is_empty() {
            format!("{} #{}", n.op_type, i + 1)
        } else {
            n.name.clone()
        };
        b.node(n, &name)?;
    }
    let act = *b.acts.get(&out).ok_or_else(|| {
        OnnxError::Model(format!(
            "the graph output '{out}' is not computed from the input by the nodes systole imports"
        ))
    })?;
    let classes = act.shape[0];
    if act.shape[1] != 1 || act.shape[2] != 1 {
        return Err(OnnxError::Model(format!(
            "the graph output '{out}' is {}x{}x{} per image; systole trains networks whose output is a vector of class scores",
            act.shape[0], act.shape[1], act.shape[2]
        )));
    }
    let Src::Node(last) = act.src else {
        return Err(OnnxError::Model(
            "the graph output is its input: there is no layer".into(),
        ));
    };
    if b.clips > 0 && b.clips != b.points_seen {
        return Err(OnnxError::Model(format!(
            "the model saturates {} of its {} rounding points to {}-bit words with a Clip, the others to 16 bits: systole's words have one width",
            b.clips,
            b.points_seen,
            b.word_bits.unwrap_or(16)
        )));
    }
    let input_frac = b.input_frac;
    let word_bits = b.word_bits.unwrap_or(crate::infer::WORD_BITS);
    let nodes = prune(b.nodes, last, &mut b.notes);
    let params: usize = nodes.iter().map(|n| n.op.params()).sum();
    if params > MAX_MODEL_PARAMS {
        return Err(OnnxError::Limit(format!(
            "the model has {params} parameters; systole trains at most {MAX_MODEL_PARAMS} (2^26)"
        )));
    }
    Ok(Net {
        input_name,
        input,
        input_frac,
        word_bits,
        classes,
        nodes,
        notes: b.notes,
        opset,
        producer: format!("{} {}", model.producer_name, model.producer_version),
        metadata: model
            .metadata_props
            .iter()
            .map(|e| (e.key.clone(), e.value.clone()))
            .collect(),
    })
}

/// The default domain's opset, refused outside [`OPSETS`].
fn default_opset(m: &ModelProto) -> Result<i64, OnnxError> {
    let v = m
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .ok_or_else(|| {
            OnnxError::Model("the model imports no opset of the default ONNX domain".into())
        })?;
    if !OPSETS.contains(&v) {
        return Err(OnnxError::Model(format!(
            "the model uses opset {v}; systole imports opsets {} to {}: convert it (onnx.version_converter)",
            OPSETS.start(),
            OPSETS.end()
        )));
    }
    Ok(v)
}

/// The graph's one real input (not an initializer): float, `N x C x H x W` or `N x F`, every
/// dimension but the batch fixed.
fn the_input(
    inputs: &[ValueInfoProto],
    consts: &HashMap<String, Const>,
) -> Result<(String, [usize; 3], u8), OnnxError> {
    let real: Vec<&ValueInfoProto> = inputs
        .iter()
        .filter(|i| !consts.contains_key(&i.name))
        .collect();
    let [inp] = real[..] else {
        let names: Vec<&str> = real.iter().map(|i| i.name.as_str()).collect();
        return Err(OnnxError::Model(format!(
            "the graph has {} inputs ({}); systole imports networks with one image input",
            real.len(),
            names.join(", ")
        )));
    };
    let name = &inp.name;
    let t = inp
        .r#type
        .as_ref()
        .and_then(|t| t.tensor_type.as_ref())
        .ok_or_else(|| OnnxError::Model(format!("the input '{name}' is not a tensor")))?;
    if t.elem_type != data_type::FLOAT {
        return Err(OnnxError::Model(format!(
            "the input '{name}' has element type {}; systole feeds float images (type 1, FLOAT)",
            t.elem_type
        )));
    }
    let dims = t.shape.as_ref().map(|s| &s.dim[..]).unwrap_or(&[]);
    let fixed = |i: usize| -> Result<usize, OnnxError> {
        match dims[i].dim_value {
            Some(v) if v > 0 && v as u64 <= MAX_TENSOR_WORDS as u64 => Ok(v as usize),
            Some(v) => Err(OnnxError::Model(format!(
                "the input '{name}' has dimension {i} of size {v}; sizes must be 1 to {MAX_TENSOR_WORDS}"
            ))),
            None => Err(OnnxError::Model(format!(
                "the input '{name}' has a dynamic dimension {i} ('{}'): systole needs a fixed image shape; export the model with fixed channels, height and width",
                dims[i].dim_param.as_deref().unwrap_or("")
            ))),
        }
    };
    let (shape, rank) = match dims.len() {
        4 => ([fixed(1)?, fixed(2)?, fixed(3)?], 4),
        2 => ([fixed(1)?, 1, 1], 2),
        r => {
            return Err(OnnxError::Model(format!(
            "the input '{name}' has rank {r}; systole takes N x C x H x W images or N x F vectors"
        )))
        }
    };
    let words = shape[0]
        .checked_mul(shape[1])
        .and_then(|x| x.checked_mul(shape[2]));
    if words.is_none_or(|w| w > MAX_TENSOR_WORDS) {
        return Err(OnnxError::Limit(format!(
            "the input '{name}' of {shape:?} per image is larger than systole allocates ({MAX_TENSOR_WORDS} words)"
        )));
    }
    Ok((name.clone(), shape, rank))
}

fn the_output(outputs: &[ValueInfoProto]) -> Result<String, OnnxError> {
    match outputs {
        [o] => Ok(o.name.clone()),
        _ => Err(OnnxError::Model(format!(
            "the graph has {} outputs; systole imports networks with one output (the class scores)",
            outputs.len()
        ))),
    }
}

/// Keeps the layers the output depends on (the output's own is then the last), renumbered.
fn prune(nodes: Vec<Node>, last: usize, notes: &mut Vec<String>) -> Vec<Node> {
    let mut keep = vec![false; nodes.len()];
    keep[last] = true;
    for i in (0..=last).rev() {
        if keep[i] {
            for s in &nodes[i].inputs {
                if let Src::Node(j) = *s {
                    keep[j] = true;
                }
            }
        }
    }
    let mut index = vec![usize::MAX; nodes.len()];
    let mut out = Vec::new();
    for (i, mut n) in nodes.into_iter().enumerate() {
        if !keep[i] {
            notes.push(format!(
                "'{}' ({}) does not reach the output: dropped",
                n.name,
                n.op.name()
            ));
            continue;
        }
        for s in &mut n.inputs {
            if let Src::Node(j) = s {
                *j = index[*j];
            }
        }
        index[i] = out.len();
        out.push(n);
    }
    out
}

impl Builder<'_> {
    /// A refusal of node `node` (`op`).
    pub fn refuse(&self, n: &NodeProto, node: &str, msg: impl Into<String>) -> OnnxError {
        OnnxError::Unsupported {
            node: node.to_string(),
            op: n.op_type.clone(),
            msg: msg.into(),
        }
    }

    /// Refuses any attribute of `n` not in `known`, and any that refers to a function's.
    pub fn known_attrs(&self, n: &NodeProto, node: &str, known: &[&str]) -> Result<(), OnnxError> {
        for a in &n.attribute {
            if !a.ref_attr_name.is_empty() {
                return Err(self.refuse(
                    n,
                    node,
                    format!("attribute '{}' refers to a function's", a.name),
                ));
            }
            if !known.contains(&a.name.as_str()) {
                return Err(self.refuse(
                    n,
                    node,
                    format!(
                        "attribute '{}' is not supported (known: {})",
                        a.name,
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn attr<'n>(
        &self,
        n: &'n NodeProto,
        node: &str,
        name: &str,
        ty: i32,
    ) -> Result<Option<&'n AttributeProto>, OnnxError> {
        match n.attribute.iter().find(|a| a.name == name) {
            Some(a) if a.r#type != ty => Err(self.refuse(
                n,
                node,
                format!("attribute '{name}' has type {}, expected {ty}", a.r#type),
            )),
            a => Ok(a),
        }
    }

    /// An INT attribute, or `default`.
    pub fn attr_i(
        &self,
        n: &NodeProto,
        node: &str,
        name: &str,
        default: i64,
    ) -> Result<i64, OnnxError> {
        Ok(self
            .attr(n, node, name, attr_type::INT)?
            .map_or(default, |a| a.i))
    }

    /// A FLOAT attribute, or `default`.
    pub fn attr_f(
        &self,
        n: &NodeProto,
        node: &str,
        name: &str,
        default: f32,
    ) -> Result<f32, OnnxError> {
        Ok(self
            .attr(n, node, name, attr_type::FLOAT)?
            .map_or(default, |a| a.f))
    }

    /// An INTS attribute, if present.
    pub fn attr_ints(
        &self,
        n: &NodeProto,
        node: &str,
        name: &str,
    ) -> Result<Option<Vec<i64>>, OnnxError> {
        Ok(self
            .attr(n, node, name, attr_type::INTS)?
            .map(|a| a.ints.clone()))
    }

    /// A STRING attribute, or `default`.
    pub fn attr_s(
        &self,
        n: &NodeProto,
        node: &str,
        name: &str,
        default: &str,
    ) -> Result<String, OnnxError> {
        Ok(self
            .attr(n, node, name, attr_type::STRING)?
            .map_or(default.to_string(), |a| {
                String::from_utf8_lossy(&a.s).into_owned()
            }))
    }

    /// Input `i` of `n` as an activation that a layer may read.
    pub fn act(&self, n: &NodeProto, node: &str, i: usize) -> Result<Act, OnnxError> {
        let name = n
            .input
            .get(i)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| self.refuse(n, node, format!("input {i} is missing")))?;
        match self.acts.get(name) {
            Some(a) if a.head => Err(self.refuse(
                n,
                node,
                format!("it reads '{name}', the output of a Softmax; Softmax/LogSoftmax is supported only as the model's last op (the loss's head)"),
            )),
            Some(a) if a.q.is_some() => Err(self.refuse(
                n,
                node,
                format!("it reads '{name}', the int16 output of a QuantizeLinear; systole takes QuantizeLinear only directly followed by DequantizeLinear"),
            )),
            Some(a) => Ok(*a),
            None if self.consts.contains_key(name) => Err(self.refuse(
                n,
                node,
                format!("input '{name}' is a constant where systole needs the activations"),
            )),
            None => Err(self.refuse(n, node, format!("input '{name}' is not computed before this node"))),
        }
    }

    /// Input `i` of `n` as a constant, `None` when it is absent (an optional input).
    pub fn konst(&self, n: &NodeProto, node: &str, i: usize) -> Result<Option<&Const>, OnnxError> {
        let Some(name) = n.input.get(i).filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        self.consts.get(name).map(Some).ok_or_else(|| {
            self.refuse(n, node, format!("input '{name}' must be a constant (an initializer or a Constant node's output)"))
        })
    }

    /// Input `i` as a float constant.
    pub fn floats(&self, n: &NodeProto, node: &str, i: usize) -> Result<Option<Floats>, OnnxError> {
        match self.konst(n, node, i)? {
            None => Ok(None),
            Some(c) => match c.floats() {
                Some(v) => Ok(Some((c.dims.clone(), v.to_vec()))),
                None => Err(self.refuse(n, node, format!("input {i} must be a float tensor"))),
            },
        }
    }

    /// Appends a layer reading `inputs`, named `node`, whose output is `n`'s first output.
    pub fn emit(
        &mut self,
        n: &NodeProto,
        node: &str,
        op: Op,
        inputs: Vec<Src>,
        shape: [usize; 3],
        rank: u8,
    ) -> Result<(), OnnxError> {
        let words = shape[0]
            .checked_mul(shape[1])
            .and_then(|x| x.checked_mul(shape[2]));
        if words.is_none_or(|w| w > MAX_TENSOR_WORDS || w == 0) {
            return Err(self.refuse(n, node, format!("its output of {shape:?} per image is empty or larger than systole allocates ({MAX_TENSOR_WORDS} words)")));
        }
        let out = self.output(n, node)?;
        let i = self.nodes.len();
        self.nodes.push(Node {
            name: node.to_string(),
            op,
            inputs,
            shape,
            fracs: Vec::new(),
        });
        self.names_of.push(vec![out.clone()]);
        self.alias_uses.push(0);
        self.acts.insert(
            out,
            Act {
                src: Src::Node(i),
                shape,
                rank,
                head: false,
                q: None,
                dq: None,
            },
        );
        Ok(())
    }

    /// Makes `n`'s first output another name for `a` (Identity, Flatten, a dropped Softmax...).
    pub fn alias(&mut self, n: &NodeProto, node: &str, a: Act) -> Result<(), OnnxError> {
        let out = self.output(n, node)?;
        if let Src::Node(i) = a.src {
            self.names_of[i].push(out.clone());
            self.alias_uses[i] += 1;
        }
        self.acts.insert(out, a);
        Ok(())
    }

    fn output(&self, n: &NodeProto, node: &str) -> Result<String, OnnxError> {
        if let Some(extra) = n
            .output
            .iter()
            .skip(1)
            .find(|o| !o.is_empty() && self.uses.contains_key(*o))
        {
            return Err(self.refuse(
                n,
                node,
                format!("its extra output '{extra}' is read; systole gives only the first"),
            ));
        }
        let out = n
            .output
            .first()
            .filter(|o| !o.is_empty())
            .ok_or_else(|| self.refuse(n, node, "it has no output"))?;
        if self.acts.contains_key(out) || self.consts.contains_key(out) {
            return Err(self.refuse(n, node, format!("its output '{out}' is already defined")));
        }
        Ok(out.clone())
    }

    /// The layer `a` comes from when a constant op may be folded into it: a Dense or Conv
    /// whose output nothing else reads.
    pub fn foldable(&self, a: &Act) -> Option<usize> {
        let Src::Node(i) = a.src else { return None };
        // The value read must be the layer's own output (not a flattened view of it).
        let rank = match self.nodes[i].op {
            Op::Dense { .. } => 2,
            Op::Conv { .. } => 4,
            _ => return None,
        };
        if a.rank != rank || a.shape != self.nodes[i].shape {
            return None;
        }
        let reads: usize = self.names_of[i]
            .iter()
            .map(|s| self.uses.get(s).copied().unwrap_or(0))
            .sum();
        (reads.checked_sub(self.alias_uses[i]) == Some(1)).then_some(i)
    }

    /// Names of the values a constant-only node defines are kept as constants.
    pub fn set_const(&mut self, n: &NodeProto, node: &str, c: Const) -> Result<(), OnnxError> {
        let out = self.output(n, node)?;
        self.consts.insert(out, c);
        Ok(())
    }

    /// Whether `name` is read by anything (a node or the graph output).
    pub fn is_read(&self, name: &str) -> bool {
        self.uses.contains_key(name)
    }
}
