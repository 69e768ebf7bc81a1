//! A run that lives on the board: the whole training state and the data set are
//! uploaded once and the board runs the steps. The state's wire form ([`TrainState::encode`] /
//! [`TrainState::decode`]) is written here once and used by both sides: the host encodes what
//! it uploads and decodes what it reads back, the firmware the reverse.
//!
//! Wire form (little-endian): magic `STS2`; the network (`Graph`'s wire form: input shape,
//! classes, each node's kind, settings and inputs); rounding u8
//! (`Rounding` code), W u8, master bits u8; run seed u64, step u64, momentum f32 bits; the
//! remembered formats: count u16, each key length u8, key (UTF-8), frac u8; then the `2L`
//! parameters and as many momentum tensors, each rows u32, cols u32, frac u8, words i16.
//! [`TrainState::decode`] checks everything (the network type-checks, shapes against its
//! parameters, words against the
//! master width, fracs against W) so a board never takes a state it cannot train. The
//! parameters-only form ([`TrainState::encode_params`], magic `STP1`) leaves out the momentum
//! tensors: what the host needs to evaluate between checkpoints.

use crate::graph::Graph;
use crate::width::{fits, Widths};
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use systole_core::numeric::max_frac;
use systole_core::tensor::QMatrix;
use systole_core::Rounding;

mod data;
mod dataset;
mod wire;
pub use data::{
    evaluate_resident, run_steps, short_order, RunSteps, StepResult, MAX_RESIDENT_IMAGES,
};
pub use dataset::{bits_for, image_bytes, DataError, DataSet};
use wire::{Reader, Writer};

/// The magic a state's wire form starts with.
pub const MAGIC: [u8; 4] = *b"STS2";
/// The magic of the parameters-only form ([`TrainState::encode_params`]: no momentum
/// tensors), what an evaluation on the host needs.
pub const PARAMS_MAGIC: [u8; 4] = *b"STP2";

/// Everything a run needs to continue its steps: the model, the numeric choices, the counters
/// and the tensors (what a checkpoint holds beside the history).
#[derive(Clone, Debug, PartialEq)]
pub struct TrainState {
    /// The network.
    pub graph: Graph,
    /// Rounding of every conversion.
    pub rounding: Rounding,
    /// Word and master widths.
    pub widths: Widths,
    /// The run's seed (op seeds and the epoch order derive from it).
    pub run_seed: u64,
    /// The next step's id.
    pub step: u64,
    /// SGD momentum.
    pub momentum: f32,
    /// Parameters, in the graph's order.
    pub params: Vec<QMatrix>,
    /// Momentum tensors, shaped as `params`.
    pub velocity: Vec<QMatrix>,
    /// The remembered fractional bits per operation name.
    pub fracs: BTreeMap<String, u32>,
}

/// Why a state's wire form was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// It ends early.
    #[error("the training state ends early")]
    Truncated,
    /// It does not start with [`MAGIC`].
    #[error("not a training state (wrong magic)")]
    Magic,
    /// A field has a value no state has (`what` names it).
    #[error("the training state's {what} is invalid")]
    Field {
        /// The field.
        what: &'static str,
    },
    /// A tensor's shape is not its parameter's.
    #[error("tensor {index} of the training state has the wrong shape for its layer")]
    Shape {
        /// Index among params then velocity.
        index: usize,
    },
    /// A tensor's words or fractional bits do not fit the run's widths.
    #[error("tensor {index} of the training state does not fit the run's word widths")]
    Width {
        /// Index among params then velocity.
        index: usize,
    },
    /// Bytes follow the last tensor.
    #[error("the training state has trailing bytes")]
    Trailing,
}

impl StateError {
    /// A small code for the protocol's error detail.
    pub fn code(&self) -> u16 {
        match self {
            StateError::Truncated => 1,
            StateError::Magic => 2,
            StateError::Field { .. } => 3,
            StateError::Shape { .. } => 4,
            StateError::Width { .. } => 5,
            StateError::Trailing => 6,
        }
    }

    /// What a protocol error detail from [`StateError::code`] means.
    pub fn describe(code: u16) -> &'static str {
        match code {
            1 => "the training state ends early",
            2 => "not a training state (wrong magic)",
            3 => "a field of the training state is invalid",
            4 => "a tensor of the training state has the wrong shape for its layer",
            5 => "a tensor of the training state does not fit the run's word widths",
            6 => "the training state has trailing bytes",
            _ => "the training state was refused",
        }
    }
}

/// `(rows, cols)` of each parameter of `graph`, in order (empty if it does not type-check).
pub fn param_shapes(graph: &Graph) -> Vec<(usize, usize)> {
    graph
        .params()
        .map(|p| {
            p.into_iter()
                .map(|p| (p.shape.rows, p.shape.cols))
                .collect()
        })
        .unwrap_or_default()
}

impl TrainState {
    /// The arithmetic of this state's run, its products on `products` (the remembered formats
    /// stay in the state: [`run_steps`] moves them in and back).
    pub fn arith<P: crate::Products>(&self, products: P) -> crate::Fixed<P> {
        crate::Fixed::with_widths(products, self.rounding, self.run_seed, self.widths)
    }

    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_to(true, Vec::new())
    }

    /// The parameters-only form: the wire form under [`PARAMS_MAGIC`] without the momentum
    /// tensors (what the host needs to evaluate; half the bytes).
    pub fn encode_params(&self) -> Vec<u8> {
        self.encode_to(false, Vec::new())
    }

    /// Bytes of the wire form (`with_velocity`) or of the parameters-only form.
    pub fn encoded_len(&self, with_velocity: bool) -> usize {
        let layers = self.graph.encoded_len();
        let fracs: usize = self.fracs.keys().map(|k| k.len() + 2).sum();
        let tensors = self.params.len()
            + if with_velocity {
                self.velocity.len()
            } else {
                0
            };
        let words: usize = self.params.iter().map(|t| t.data.len()).sum::<usize>()
            + if with_velocity {
                self.velocity.iter().map(|t| t.data.len()).sum()
            } else {
                0
            };
        4 + layers + 3 + 8 + 8 + 4 + 2 + fracs + 9 * tensors + 2 * words
    }

    /// The wire form (`with_velocity`) or the parameters-only form, appended to `out`: given
    /// [`TrainState::encoded_len`] bytes of room, it allocates nothing (the board reserves
    /// the room first, so a heap without it refuses instead of failing an allocation).
    pub fn encode_to(&self, with_velocity: bool, mut out: Vec<u8>) -> Vec<u8> {
        out.reserve(self.encoded_len(with_velocity));
        let mut w = Writer(out);
        w.bytes(if with_velocity { &MAGIC } else { &PARAMS_MAGIC });
        self.graph.encode_to(&mut w.0);
        w.u8(self.rounding as u8);
        w.u8(self.widths.word() as u8);
        w.u8(self.widths.master() as u8);
        w.u64(self.run_seed);
        w.u64(self.step);
        w.u32(self.momentum.to_bits());
        write_formats(&mut w, &self.fracs);
        let velocity = if with_velocity {
            &self.velocity[..]
        } else {
            &[]
        };
        for t in self.params.iter().chain(velocity) {
            w.u32(t.rows as u32);
            w.u32(t.cols as u32);
            w.u8(t.frac as u8);
            for &x in &t.data {
                w.bytes(&x.to_le_bytes());
            }
        }
        w.0
    }

    /// Checks that [`TrainState::encode`] can carry this state (field widths of the wire form):
    /// the host calls it before an upload.
    pub fn encodable(&self) -> bool {
        self.graph.encodable()
            && self.fracs.len() <= u16::MAX as usize
            && self
                .fracs
                .iter()
                .all(|(k, &f)| k.len() <= u8::MAX as usize && f <= u8::MAX as u32)
    }

    /// Parses and checks a wire form.
    pub fn decode(bytes: &[u8]) -> Result<TrainState, StateError> {
        Self::decode_form(bytes, true)
    }

    /// Parses and checks a parameters-only form ([`TrainState::encode_params`]); the state's
    /// `velocity` is empty.
    pub fn decode_params(bytes: &[u8]) -> Result<TrainState, StateError> {
        Self::decode_form(bytes, false)
    }

    fn decode_form(bytes: &[u8], with_velocity: bool) -> Result<TrainState, StateError> {
        let mut r = Reader(bytes);
        let magic = if with_velocity { MAGIC } else { PARAMS_MAGIC };
        if r.take(4)? != magic {
            return Err(StateError::Magic);
        }
        let field = |what| StateError::Field { what };
        let (graph, used) = Graph::decode_from(r.0).map_err(|e| match e {
            crate::graph::WireError::Truncated => StateError::Truncated,
            _ => field("network"),
        })?;
        r.take(used)?;
        let shapes = param_shapes(&graph);
        let np = shapes.len();
        let rounding = Rounding::from_code(r.u8()?.into()).ok_or(field("rounding"))?;
        let (word, master) = (u32::from(r.u8()?), u32::from(r.u8()?));
        let widths = Widths::new(word, master).map_err(|_| field("word widths"))?;
        let (run_seed, step) = (r.u64()?, r.u64()?);
        let momentum = f32::from_bits(r.u32()?);
        if !momentum.is_finite() {
            return Err(field("momentum"));
        }
        let fracs = read_formats(&mut r, word)?;
        let count = if with_velocity { 2 * np } else { np };
        let mut tensors = Vec::with_capacity(count);
        for index in 0..count {
            let (rows, cols) = (r.u32()? as usize, r.u32()? as usize);
            let frac = u32::from(r.u8()?);
            if shapes.get(index % np.max(1)) != Some(&(rows, cols)) {
                return Err(StateError::Shape { index });
            }
            let words = r.take(
                rows.checked_mul(cols)
                    .and_then(|n| n.checked_mul(2))
                    .ok_or(StateError::Truncated)?,
            )?;
            let data: Vec<i16> = words
                .chunks_exact(2)
                .map(|c| i16::from_le_bytes([c[0], c[1]]))
                .collect();
            let q = QMatrix::from_vec(rows, cols, frac, data)
                .map_err(|_| StateError::Width { index })?;
            if !fits(&q, master) {
                return Err(StateError::Width { index });
            }
            tensors.push(q);
        }
        if !r.0.is_empty() {
            return Err(StateError::Trailing);
        }
        let velocity = match with_velocity {
            true => tensors.split_off(np),
            false => Vec::new(),
        };
        Ok(TrainState {
            graph,
            rounding,
            widths,
            run_seed,
            step,
            momentum,
            params: tensors,
            velocity,
            fracs,
        })
    }
}

/// The remembered formats' wire form (count u16, then each key length u8, key, frac u8), as
/// in the state's and `FORMATS_WRITE`'s.
pub fn encode_formats(fracs: &BTreeMap<String, u32>) -> Vec<u8> {
    let mut w = Writer::default();
    write_formats(&mut w, fracs);
    w.0
}

/// Parses and checks a formats' wire form for words of `word` bits.
pub fn decode_formats(bytes: &[u8], word: u32) -> Result<BTreeMap<String, u32>, StateError> {
    let mut r = Reader(bytes);
    let fracs = read_formats(&mut r, word)?;
    if !r.0.is_empty() {
        return Err(StateError::Trailing);
    }
    Ok(fracs)
}

fn write_formats(w: &mut Writer, fracs: &BTreeMap<String, u32>) {
    w.u16(fracs.len() as u16);
    for (k, &f) in fracs {
        w.u8(k.len() as u8);
        w.bytes(k.as_bytes());
        w.u8(f as u8);
    }
}

fn read_formats(r: &mut Reader<'_>, word: u32) -> Result<BTreeMap<String, u32>, StateError> {
    let field = |what| StateError::Field { what };
    let mut fracs = BTreeMap::new();
    for _ in 0..r.u16()? {
        let n = usize::from(r.u8()?);
        let key = core::str::from_utf8(r.take(n)?).map_err(|_| field("operation name"))?;
        let f = u32::from(r.u8()?);
        if f > max_frac(word) {
            return Err(field("remembered fractional bits"));
        }
        fracs.insert(String::from(key), f);
    }
    Ok(fracs)
}

#[cfg(test)]
mod tests;
