//! The training steps run on a resident data set ([`run_steps`]): each epoch's order drawn
//! with the trainer's own shuffle ([`crate::rng::epoch_order`]), each batch's images the very
//! `f32` values the host trains with ([`DataSet::images`]), so a step on the board is the
//! host's step bit for bit.

use super::{DataSet, TrainState};
use crate::profile::{section, Section};
use crate::step::train_step_owned;
use crate::{Fixed, Products, StepError};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Which steps of an epoch to run: batches `first_batch..first_batch + steps` of epoch
/// `epochs_done + 1` at batch size `batch` and learning rate `lr`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunSteps {
    /// Epochs completed before this one (its order's stream is `epochs_done + 1`).
    pub epochs_done: u64,
    /// The first batch of the epoch to run.
    pub first_batch: usize,
    /// Steps to run.
    pub steps: usize,
    /// Images per batch (the last batch of an epoch may have fewer).
    pub batch: usize,
    /// The epoch's learning rate (a scheduled rate, `systole_core::schedule`).
    pub lr: f32,
}

impl RunSteps {
    /// Batches of an epoch over `n` images.
    pub fn batches(&self, n: usize) -> usize {
        n.div_ceil(self.batch.max(1))
    }

    /// Whether the steps lie inside an epoch over `n` images.
    pub fn fits(&self, n: usize) -> bool {
        self.batch > 0
            && self.steps > 0
            && self
                .first_batch
                .checked_add(self.steps)
                .is_some_and(|end| end <= self.batches(n))
    }
}

/// One step's result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepResult {
    /// The batch's mean loss.
    pub loss: f32,
    /// Correct predictions in the batch.
    pub correct: usize,
}

/// Most images a resident data set has: its order is kept in 16-bit indices (2 B an image on
/// the board instead of 4).
pub const MAX_RESIDENT_IMAGES: usize = 1 << 16;

/// The epoch's order ([`crate::rng::epoch_order`]) in 16-bit indices, for a data set of at
/// most [`MAX_RESIDENT_IMAGES`] images (`None` above).
pub fn short_order(run_seed: u64, epochs_done: u64, n: usize) -> Option<Vec<u16>> {
    (n <= MAX_RESIDENT_IMAGES).then(|| {
        crate::rng::epoch_order(run_seed, epochs_done, n)
            .into_iter()
            .map(|i| i as u16)
            .collect()
    })
}

/// Runs the steps `req` names on `data` in `order` (the epoch's, [`short_order`]),
/// updating `state` (tensors, remembered formats, the step counter) exactly as the host
/// trainer's steps do; `each` sees every step's result. `a` is the state's arithmetic
/// ([`TrainState::arith`]); the remembered formats live in `state` between calls. After an
/// error `state` is part-way through a step: drop it.
pub fn run_steps<P: Products>(
    a: &mut Fixed<P>,
    state: &mut TrainState,
    data: &DataSet,
    order: &[u16],
    req: &RunSteps,
    each: &mut dyn FnMut(StepResult),
) -> Result<(), P::Error> {
    if !req.fits(order.len()) {
        return Err(StepError::Shape {
            op: String::from("run steps"),
            msg: format!(
                "batches {}..{} of an epoch of {} batches",
                req.first_batch,
                req.first_batch.saturating_add(req.steps),
                req.batches(order.len())
            ),
        }
        .into());
    }
    a.fracs = core::mem::take(&mut state.fracs);
    for b in req.first_batch..req.first_batch + req.steps {
        let idx: Vec<usize> = order[b * req.batch..((b + 1) * req.batch).min(order.len())]
            .iter()
            .map(|&i| usize::from(i))
            .collect();
        let idx = &idx[..];
        let (images, labels) = {
            let _images = section(Section::BatchImages);
            let labels: Vec<u8> = idx.iter().map(|&i| data.labels[i]).collect();
            (data.images(idx), labels)
        };
        let (loss, correct) = train_step_owned(
            a,
            &state.graph,
            (images, labels),
            (&mut state.params, &mut state.velocity),
            (state.step, req.lr, state.momentum),
        )?;
        state.step += 1;
        each(StepResult { loss, correct });
    }
    state.fracs = core::mem::take(&mut a.fracs);
    Ok(())
}

/// The evaluation of `state` on the resident split `data` after `epochs` completed epochs:
/// [`crate::step::evaluate`] over its images in their stored order, the remembered formats
/// moved in from `state` and back (an evaluation changes them as the host's does). Returns the
/// mean loss and the correct count. After an error `state`'s formats are part-way through an
/// evaluation: drop it.
pub fn evaluate_resident<P: Products>(
    a: &mut Fixed<P>,
    state: &mut TrainState,
    data: &DataSet,
    epochs: u64,
) -> Result<(f32, usize), P::Error> {
    a.fracs = core::mem::take(&mut state.fracs);
    let result = crate::step::evaluate(
        a,
        &state.graph,
        &state.params,
        (epochs, data.len()),
        &mut |range| {
            let idx: Vec<usize> = range.collect();
            let labels = idx.iter().map(|&i| data.labels[i]).collect();
            (data.images(&idx), labels)
        },
    );
    state.fracs = core::mem::take(&mut a.fracs);
    result
}
