//! One training step and one evaluation batch over [`Arith`]: the data in (host values of a
//! batch), forward, softmax cross-entropy, backward and the SGD update with momentum, in the
//! order and with the operation names (and so the op seeds) the trainer has always used.

use crate::arith::Arith;
use crate::graph::run;
use crate::graph::Graph;
use crate::profile::{section, Section};
use crate::StepError;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// The network and its batch: the graph, the images of a batch as host values (`rows x
/// features`, row-major) and their labels.
pub struct Batch<'a> {
    /// The network.
    pub graph: &'a Graph,
    /// The images, row-major.
    pub images: &'a [f32],
    /// One label per image.
    pub labels: &'a [u8],
}

impl Batch<'_> {
    fn rows(&self) -> usize {
        self.labels.len()
    }
}

/// The mean loss, the correct count and the gradients (in parameter order) of a batch.
pub type LossAndGrads<T> = (f32, usize, Vec<T>);

/// Forward pass, softmax cross-entropy (gradient divided by `denom`, the global batch size) and
/// backward pass of `batch` at step `step` (for the divergence message): the part of a step the
/// plain and the sharded (data-parallel) paths share. Returns the mean loss, the correct count
/// and the gradients in parameter order.
pub fn loss_and_grads<A: Arith>(
    a: &mut A,
    batch: &Batch<'_>,
    params: &[A::T],
    denom: usize,
    step: u64,
) -> Result<LossAndGrads<A::T>, A::Error> {
    let rows = batch.rows();
    let features = batch.images.len() / rows.max(1);
    let x = a.import("input", rows, features, batch.images)?;
    grads_from(a, batch.graph, params, (x, batch.labels), (denom, step))
}

/// [`loss_and_grads`] from the imported input `x` of the images labelled `labels`.
fn grads_from<A: Arith>(
    a: &mut A,
    graph: &Graph,
    params: &[A::T],
    (x, labels): (A::T, &[u8]),
    (denom, step): (usize, u64),
) -> Result<LossAndGrads<A::T>, A::Error> {
    let rows = labels.len();
    let classes = graph.classes;
    let (logits, tape) = run::forward(a, graph, params, x, rows)?;
    let (loss, ok, grad) = a.softmax_xent(&logits, labels, classes, denom);
    if !loss.is_finite() {
        return Err(StepError::Diverged { step, loss }.into());
    }
    let dlogits = a.import("loss gradient", rows, classes, &grad)?;
    let grads = run::backward(a, graph, params, tape, dlogits, rows)?;
    Ok((loss, ok, grads))
}

/// The SGD update with momentum of every parameter, named `names` (operation
/// `layer N W update`): `v = momentum·v + g`, `w = w - lr·v`.
pub fn update<A: Arith>(
    a: &mut A,
    names: &[String],
    params: &mut [A::T],
    velocity: &mut [A::T],
    grads: &[A::T],
    lr: f32,
    momentum: f32,
) -> Result<(), A::Error> {
    for (i, ((w, v), g)) in params.iter_mut().zip(velocity).zip(grads).enumerate() {
        let name = names.get(i).map_or("parameter", String::as_str);
        let op = format!("{name} update");
        a.sgd(&op, w, v, g, lr, momentum)?;
    }
    Ok(())
}

/// One training step `step` on `batch` at learning rate `lr`: seeds from `step`, forward, loss,
/// backward and update. Returns the mean loss and the correct count.
pub fn train_step<A: Arith>(
    a: &mut A,
    batch: &Batch<'_>,
    params: &mut [A::T],
    velocity: &mut [A::T],
    (step, lr, momentum): (u64, f32, f32),
) -> Result<(f32, usize), A::Error> {
    let _step = section(Section::Step);
    a.begin_step(step);
    let (loss, ok, grads) = loss_and_grads(a, batch, params, batch.rows(), step)?;
    update(
        a,
        &param_names(batch.graph)?,
        params,
        velocity,
        &grads,
        lr,
        momentum,
    )?;
    Ok((loss, ok))
}

/// [`train_step`] on a batch given as its images (host values, row-major) and labels, the
/// images dropped once imported (the board's heap holds them only that long): the same
/// operations in the same order, so the same bits.
pub fn train_step_owned<A: Arith>(
    a: &mut A,
    graph: &Graph,
    (images, labels): SplitBatch,
    (params, velocity): (&mut [A::T], &mut [A::T]),
    (step, lr, momentum): (u64, f32, f32),
) -> Result<(f32, usize), A::Error> {
    let _step = section(Section::Step);
    a.begin_step(step);
    let rows = labels.len();
    let x = a.import("input", rows, images.len() / rows.max(1), &images)?;
    drop(images);
    let (loss, ok, grads) = grads_from(a, graph, params, (x, &labels), (rows, step))?;
    update(
        a,
        &param_names(graph)?,
        params,
        velocity,
        &grads,
        lr,
        momentum,
    )?;
    Ok((loss, ok))
}

/// Images per evaluation batch: part of the step's definition (the cut decides each batch's
/// seeds and the formats an evaluation remembers), the same on the host and on the board.
/// 32: a batch of 256 would take about 64 KiB of the training image's heap for its images
/// alone.
pub const EVAL_BATCH: usize = 32;

/// Step ids of evaluation batches live far above training steps so their seeds never collide.
pub const EVAL_STEP_BASE: u64 = 1 << 62;

/// The step id of evaluation batch `b` after `epochs` completed epochs.
pub fn eval_step_id(epochs: u64, b: usize) -> u64 {
    EVAL_STEP_BASE + epochs * 65536 + b as u64
}

/// Loss and correct count of `batch` under the seeds of step id `step` (no gradients).
pub fn evaluate_batch<A: Arith>(
    a: &mut A,
    batch: &Batch<'_>,
    params: &[A::T],
    step: u64,
) -> Result<(f32, usize), A::Error> {
    a.begin_step(step);
    let rows = batch.rows();
    let features = batch.images.len() / rows.max(1);
    let x = a.import("input", rows, features, batch.images)?;
    forward_loss(a, batch.graph, params, x, batch.labels)
}

/// The forward pass from the imported input `x` and its loss and correct count.
fn forward_loss<A: Arith>(
    a: &mut A,
    graph: &Graph,
    params: &[A::T],
    x: A::T,
    labels: &[u8],
) -> Result<(f32, usize), A::Error> {
    let (logits, _) = run::forward(a, graph, params, x, labels.len())?;
    Ok(a.softmax_loss(&logits, labels, graph.classes))
}

/// The images (host values, row-major) and labels of some images of a split.
pub type SplitBatch = (Vec<f32>, Vec<u8>);

/// The evaluation of a split of `n` images after `epochs` completed epochs, one implementation
/// for the host trainer and the board: batches of [`EVAL_BATCH`] in the split's order, batch
/// `b` under the seeds of [`eval_step_id`]`(epochs, b)`, each batch's images from
/// `images(range)` (dropped once imported: the board's heap holds them only that long).
/// Returns the mean loss (the batches' losses weighted by their images, summed in `f64`) and
/// the correct count. The remembered formats change as a batch's would.
pub fn evaluate<A: Arith>(
    a: &mut A,
    graph: &Graph,
    params: &[A::T],
    (epochs, n): (u64, usize),
    images: &mut dyn FnMut(core::ops::Range<usize>) -> SplitBatch,
) -> Result<(f32, usize), A::Error> {
    let (mut loss_sum, mut correct) = (0f64, 0usize);
    for (b, start) in (0..n).step_by(EVAL_BATCH).enumerate() {
        let (x, labels) = {
            let (values, labels) = images(start..(start + EVAL_BATCH).min(n));
            let rows = labels.len();
            a.begin_step(eval_step_id(epochs, b));
            let x = a.import("input", rows, values.len() / rows.max(1), &values)?;
            (x, labels)
        };
        let (loss, ok) = forward_loss(a, graph, params, x, &labels)?;
        loss_sum += loss as f64 * labels.len() as f64;
        correct += ok;
    }
    Ok(((loss_sum / n.max(1) as f64) as f32, correct))
}

/// The names of the graph's parameters (`layer N W`), in order.
pub fn param_names(graph: &Graph) -> Result<Vec<String>, StepError> {
    Ok(graph
        .params()
        .map_err(|e| StepError::Shape {
            op: String::from("network"),
            msg: e.to_string(),
        })?
        .into_iter()
        .map(|p| p.name)
        .collect())
}
