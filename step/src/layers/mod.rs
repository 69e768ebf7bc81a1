//! The layer kinds. Each kind owns all its facts in its own file: its shapes, parameters and
//! MACs ([`Kind`]), its forward and backward pass over [`Arith`] (the host's formats and the
//! board run the same code), its wire form and its line in a model description. A new kind is
//! its file plus one line in [`kinds!`] below.

use crate::arith::{Arith, PoolGeom};
use crate::graph::Shape;
use alloc::string::String;
use alloc::vec::Vec;

mod add;
mod avg_pool;
mod conv2d;
mod dense;
mod flatten;
mod global_avg_pool;
mod max_pool;
mod relu;

pub use add::Add;
pub use avg_pool::AvgPool;
pub use conv2d::Conv2d;
pub use dense::Dense;
pub use flatten::Flatten;
pub use global_avg_pool::GlobalAvgPool;
pub use max_pool::MaxPool;
pub use relu::Relu;

/// The shape of one parameter tensor and the fans its random initialisation uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamShape {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Inputs feeding one output (Glorot's fan-in); 0 for a bias (initialised to zero).
    pub fan_in: usize,
    /// Outputs fed by one input (Glorot's fan-out).
    pub fan_out: usize,
}

/// What a node's forward pass is given.
pub struct Fwd<'a, T> {
    /// The node's inputs' values (batch rows, NCHW columns).
    pub x: &'a [&'a T],
    /// Their shapes per image.
    pub in_shapes: &'a [Shape],
    /// The node's parameters.
    pub params: &'a [T],
    /// Images in the batch.
    pub batch: usize,
}

/// What a node's backward pass is given.
pub struct Bwd<'a, T> {
    /// The gradient of the node's output.
    pub dy: T,
    /// The node's inputs' values, where the kind keeps them ([`Kind::keeps_inputs`]).
    pub x: &'a [Option<&'a T>],
    /// Their shapes per image.
    pub in_shapes: &'a [Shape],
    /// The node's parameters.
    pub params: &'a [T],
    /// What the forward pass saved (max pooling's winners).
    pub saved: Vec<u32>,
    /// For each input, whether its gradient is needed.
    pub need_dx: &'a [bool],
    /// Images in the batch.
    pub batch: usize,
}

/// A backward pass's result: the gradients of the node's parameters (in order) and of each
/// input (`None` where not asked for).
pub type Grads<T> = (Vec<T>, Vec<Option<T>>);

/// The names a node's operations carry: `layer N ...` for the Nth parameter layer (the names
/// remembered formats and reports use), else the node's own name.
#[derive(Clone, Copy, Debug)]
pub struct OpNames<'a> {
    /// The node's name.
    pub node: &'a str,
    /// The node's number among the parameter layers (1-based), if it has parameters.
    pub layer: Option<usize>,
}

impl OpNames<'_> {
    /// The name of operation `what` of this node (`layer 2 forward`, `res1 forward`).
    pub fn op(&self, what: &str) -> String {
        match self.layer {
            Some(n) => alloc::format!("layer {n} {what}"),
            None => alloc::format!("{} {what}", self.node),
        }
    }
}

/// The facts of one layer kind.
pub trait Kind {
    /// The kind's name in descriptions and errors (`Dense`, `Conv2d`, ...).
    const NAME: &'static str;
    /// Inputs the kind takes.
    const ARITY: usize = 1;

    /// The output shape for these input shapes, or what does not fit.
    fn out_shape(&self, x: &[Shape]) -> Result<Shape, String>;
    /// The parameter tensors (none by default).
    fn params(&self, _x: &[Shape]) -> Vec<ParamShape> {
        Vec::new()
    }
    /// Multiply-accumulates of the forward pass per image.
    fn macs(&self, _x: &[Shape], _y: Shape) -> u64 {
        0
    }
    /// Whether the backward pass reads the inputs' values (else they are freed early).
    fn keeps_inputs(&self) -> bool {
        false
    }
    /// The kind's fields in a model description (`64 -> 32`, `3x3 stride 1 pad 1`).
    fn detail(&self) -> String {
        String::new()
    }
    /// The kind's fields in the wire form (each must fit 16 bits to be sent).
    fn wire(&self) -> Vec<usize> {
        Vec::new()
    }
    /// The kind from its wire fields, or `None` where they are not its.
    fn from_wire(f: &[u16]) -> Option<Self>
    where
        Self: Sized;
    /// Number of wire fields.
    const WIRE_FIELDS: usize = 0;

    /// The forward pass: the output and what backward needs saved.
    fn forward<A: Arith>(
        &self,
        a: &mut A,
        names: OpNames<'_>,
        f: Fwd<'_, A::T>,
    ) -> Result<(A::T, Vec<u32>), A::Error>;
    /// The backward pass.
    fn backward<A: Arith>(
        &self,
        a: &mut A,
        names: OpNames<'_>,
        b: Bwd<'_, A::T>,
    ) -> Result<Grads<A::T>, A::Error>;
}

/// Declares [`Layer`] with one variant per kind and forwards every [`Kind`] method to it:
/// the one registration a new kind needs.
macro_rules! kinds {
    ($($tag:literal $v:ident),* $(,)?) => {
        /// One node's layer.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        pub enum Layer {
            $(
                #[doc = concat!("See [`", stringify!($v), "`].")]
                $v($v),
            )*
        }

        impl Layer {
            /// The kind's name.
            pub fn name(&self) -> &'static str {
                match self { $(Layer::$v(_) => <$v as Kind>::NAME,)* }
            }
            /// Inputs the layer takes.
            pub fn arity(&self) -> usize {
                match self { $(Layer::$v(_) => <$v as Kind>::ARITY,)* }
            }
            /// See [`Kind::out_shape`].
            pub fn out_shape(&self, x: &[Shape]) -> Result<Shape, String> {
                match self { $(Layer::$v(k) => k.out_shape(x),)* }
            }
            /// See [`Kind::params`].
            pub fn params(&self, x: &[Shape]) -> Vec<ParamShape> {
                match self { $(Layer::$v(k) => k.params(x),)* }
            }
            /// See [`Kind::macs`].
            pub fn macs(&self, x: &[Shape], y: Shape) -> u64 {
                match self { $(Layer::$v(k) => k.macs(x, y),)* }
            }
            /// See [`Kind::keeps_inputs`].
            pub fn keeps_inputs(&self) -> bool {
                match self { $(Layer::$v(k) => k.keeps_inputs(),)* }
            }
            /// See [`Kind::detail`].
            pub fn detail(&self) -> String {
                match self { $(Layer::$v(k) => k.detail(),)* }
            }
            /// The wire form: the kind's tag and its fields.
            pub fn wire(&self) -> (u8, Vec<usize>) {
                match self { $(Layer::$v(k) => ($tag, k.wire()),)* }
            }
            /// Number of wire fields of the kind tagged `tag` (`None`: no such kind).
            pub fn wire_fields(tag: u8) -> Option<usize> {
                match tag { $($tag => Some(<$v as Kind>::WIRE_FIELDS),)* _ => None }
            }
            /// The layer from its wire tag and fields.
            pub fn from_wire(tag: u8, f: &[u16]) -> Option<Layer> {
                match tag { $($tag => <$v as Kind>::from_wire(f).map(Layer::$v),)* _ => None }
            }
            /// See [`Kind::forward`].
            pub fn forward<A: Arith>(
                &self,
                a: &mut A,
                names: OpNames<'_>,
                f: Fwd<'_, A::T>,
            ) -> Result<(A::T, Vec<u32>), A::Error> {
                match self { $(Layer::$v(k) => k.forward(a, names, f),)* }
            }
            /// See [`Kind::backward`].
            pub fn backward<A: Arith>(
                &self,
                a: &mut A,
                names: OpNames<'_>,
                b: Bwd<'_, A::T>,
            ) -> Result<Grads<A::T>, A::Error> {
                match self { $(Layer::$v(k) => k.backward(a, names, b),)* }
            }
        }
    };
}

kinds! {
    0 Dense,
    1 Conv2d,
    2 Relu,
    3 MaxPool,
    4 AvgPool,
    5 GlobalAvgPool,
    6 Flatten,
    7 Add,
}

/// The one input's shape of a single-input kind.
pub(crate) fn one(x: &[Shape]) -> Shape {
    x.first().copied().unwrap_or(Shape::flat(0))
}

/// Fields of a wire form as `N` values, when there are exactly `N`.
pub(crate) fn fields<const N: usize>(f: &[u16]) -> Option<[usize; N]> {
    let a: [u16; N] = f.try_into().ok()?;
    Some(a.map(usize::from))
}

#[cfg(test)]
mod tests;

/// The output shape of a `kernel x kernel`, `stride` pooling layer over `x`.
pub(crate) fn pool_shape(x: Shape, kernel: usize, stride: usize) -> Result<Shape, String> {
    let g = pool_geom(x, kernel, stride)?;
    Ok(Shape {
        c: g.ch,
        h: g.out_h(),
        w: g.out_w(),
    })
}

/// A pooling layer's settings in a description: `2x2, stride 2`.
pub(crate) fn pool_detail(kernel: usize, stride: usize) -> String {
    alloc::format!("{kernel}x{kernel}, stride {stride}")
}

/// The pooling window of a `kernel x kernel`, `stride` layer over `x`, or what does not fit.
pub(crate) fn pool_geom(x: Shape, kernel: usize, stride: usize) -> Result<PoolGeom, String> {
    let g = PoolGeom {
        ch: x.c,
        h: x.h,
        w: x.w,
        kh: kernel,
        kw: kernel,
        stride,
    };
    if g.valid() {
        Ok(g)
    } else {
        Err(alloc::format!(
            "a {kernel}x{kernel} window with stride {stride} does not fit a {x} input"
        ))
    }
}
