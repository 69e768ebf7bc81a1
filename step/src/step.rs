//! One training step and one evaluation batch over [`Arith`]: the data in (host values of a
//! batch), forward, softmax cross-entropy, backward and the SGD update with momentum, in the
//! order and with the operation names (and so the op seeds) the trainer has always used.

use crate::arith::Arith;
use crate::loss::{softmax_xent, softmax_xent_scaled};
use crate::model::{self, Cache, Layer};
use crate::profile::{section, Section};
use crate::StepError;
use alloc::format;
use alloc::vec::Vec;

/// The network and its batch: the layers, the images of a batch as host values (`rows x
/// features`, row-major) and their labels.
pub struct Batch<'a> {
    /// The model's layers.
    pub layers: &'a [Layer],
    /// Number of classes (the last layer's outputs).
    pub classes: usize,
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
    let (logits, caches): (A::T, Vec<Cache<A::T>>) =
        model::forward(a, batch.layers, params, x, rows)?;
    let logits = a.to_host(&logits);
    let (loss, ok, grad) = {
        let _softmax = section(Section::Softmax);
        softmax_xent_scaled(&logits, batch.labels, batch.classes, denom)
    };
    if !loss.is_finite() {
        return Err(StepError::Diverged { step, loss }.into());
    }
    let dlogits = a.import("loss gradient", rows, batch.classes, &grad)?;
    let grads = model::backward(a, batch.layers, params, caches, dlogits, rows)?;
    Ok((loss, ok, grads))
}

/// The SGD update with momentum of every parameter `i` (operation `layer N W update`):
/// `v = momentum·v + g`, `w = w - lr·v`.
pub fn update<A: Arith>(
    a: &mut A,
    params: &mut [A::T],
    velocity: &mut [A::T],
    grads: &[A::T],
    lr: f32,
    momentum: f32,
) -> Result<(), A::Error> {
    for (i, ((w, v), g)) in params.iter_mut().zip(velocity).zip(grads).enumerate() {
        let op = format!("{} update", model::param_name(i));
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
    update(a, params, velocity, &grads, lr, momentum)?;
    Ok((loss, ok))
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
    let (logits, _) = model::forward(a, batch.layers, params, x, rows)?;
    let (loss, ok, _) = softmax_xent(&a.to_host(&logits), batch.labels, batch.classes);
    Ok((loss, ok))
}
