//! Where the run's data set lives on the board: resident (uploaded once, packed at the bits
//! its pixels need) when it fits the board's heap beside the state and the step, else each
//! request's batches in the epoch's order.
//!
//! The fit is decided from the board's own numbers where it has them: its heap (`PING`) and,
//! on a board that measures its heap (`HEAP_USE`, the training image), the step's heap as the
//! board measured it running the epoch's first batch (a probe step whose result is dropped:
//! the state goes up again). A board that cannot measure (older firmware, the pty board
//! simulator) is planned by the host's estimate of the step ([`step_estimate`]), and the
//! run's header says which.

use super::{dev_err, state_of};
use crate::data::Dataset;
use crate::fixed::FixedArith;
use crate::{TrainError, Trainer};
use systole_device::board_train::{BoardTraining, MAX_RUN_STEPS};
use systole_step::resident::{DataSet, MAX_RESIDENT_IMAGES};
use systole_step::step::EVAL_BATCH;

/// Heap kept free beside everything counted, for the first-fit heap's fragmentation: a
/// thirty-second of the heap.
pub(crate) fn margin(heap: usize) -> usize {
    heap / 32
}

/// Bytes the board keeps per image of a resident set beside its packed pixels and label:
/// its place in the epoch's order (a 16-bit index, `systole_step::resident::short_order`).
pub(crate) const ORDER_BYTES: usize = 2;

/// The numbers a fit is decided from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fit {
    /// The board's heap.
    pub heap: usize,
    /// The training state on the board.
    pub state: usize,
    /// Heap one step takes on top of the state and its data.
    pub step: usize,
    /// `step` was measured on the board (else estimated by the host).
    pub measured: bool,
    /// The whole training set on the board (packed pixels and labels).
    pub set: usize,
    /// Images in it.
    pub images: usize,
    /// Bytes of one image's record on the board.
    pub record: usize,
    /// The test split on the board (packed pixels and labels); 0 when the board does not
    /// evaluate (older firmware).
    pub test: usize,
    /// Heap one evaluation takes on top of everything resident (measured with `step`, or
    /// the host's estimate at the evaluation's batch).
    pub eval: usize,
    /// The probe left the test split on the board.
    pub test_uploaded: bool,
}

/// How the board trains: the data set resident, or each request's batches uploaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The data set is uploaded once.
    pub resident: bool,
    /// Batches one `RUN_STEPS` runs.
    pub per_upload: usize,
}

impl Fit {
    /// Heap the resident set needs beside the step: the state, the set, its order, the step
    /// and the margin.
    pub(crate) fn resident_need(&self) -> usize {
        self.state + self.set + ORDER_BYTES * self.images + self.step + margin(self.heap)
    }

    /// Heap the resident set and the test split need beside the step or the evaluation (the
    /// epoch's order is dropped for the evaluation): the state, both sets, the larger of the
    /// step with the order and the evaluation, and the margin.
    pub(crate) fn evaluating_need(&self) -> usize {
        self.state
            + self.set
            + self.test
            + (self.step + ORDER_BYTES * self.images).max(self.eval)
            + margin(self.heap)
    }

    /// Whether the board evaluates on its own test split under `plan`: the board does, the
    /// training set is resident and the test split fits beside it.
    pub(crate) fn board_evaluates(&self, plan: &Plan) -> bool {
        self.test > 0 && plan.resident && self.evaluating_need() <= self.heap
    }

    /// The plan at batch size `batch`, or `None` when not even one batch fits beside the step.
    pub(crate) fn plan(&self, batch: usize) -> Option<Plan> {
        if self.resident_need() <= self.heap && self.images <= MAX_RESIDENT_IMAGES {
            return Some(Plan {
                resident: true,
                per_upload: MAX_RUN_STEPS,
            });
        }
        let fixed = self.state + self.step + margin(self.heap);
        let per_batch = batch * (self.record + ORDER_BYTES);
        let room = self.heap.checked_sub(fixed)?;
        (room >= per_batch).then(|| Plan {
            resident: false,
            per_upload: (room / per_batch).clamp(1, MAX_RUN_STEPS),
        })
    }

    /// The plan in words, for the run's header.
    pub(crate) fn describe(&self, plan: &Plan, bits: u8) -> String {
        let step = match self.measured {
            true => format!("the step's {} B measured on the board", self.step),
            false => format!(
                "the step's {} B estimated by the host (the board does not measure its heap)",
                self.step
            ),
        };
        let placed = match plan.resident {
            true => format!(
                "data set resident: {} images at {bits} bits a pixel, {} B uploaded once",
                self.images, self.set
            ),
            false => format!(
                "data set uploaded batch by batch, {} batches a request: it does not fit beside the step",
                plan.per_upload
            ),
        };
        let test = match (self.test, self.board_evaluates(plan)) {
            (0, _) => String::new(),
            (t, true) => format!(
                "; test split resident ({t} B, its evaluation's {} B {}): {} B in all with it",
                self.eval,
                if self.measured { "measured" } else { "estimated" },
                self.evaluating_need()
            ),
            (t, false) => format!(
                "; the test split ({t} B, its evaluation's {} B) does not fit beside it: the host evaluates",
                self.eval
            ),
        };
        format!(
            "{placed}; heap {} B: state {} B, {step}, data set {} B + order {} B, margin {} B, {} B in all{test}",
            self.heap,
            self.state,
            self.set,
            ORDER_BYTES * self.images,
            margin(self.heap),
            self.resident_need()
        )
    }
}

/// The host's estimate of a step's heap beside the state and the data set, for a board that
/// does not measure its own: the batch's largest activations (the images as f32 and as words,
/// each layer's outputs and gradients kept for the backward pass) and twice the parameters
/// (gradients, the update's new tensors), plus 16 KiB.
pub(crate) fn step_estimate(t: &Trainer<FixedArith>, batch: usize, features: usize) -> usize {
    // Each parameter layer's output: a dense layer's outputs, a convolution's maps.
    let g = t.graph();
    let shapes = g.shapes().unwrap_or_default();
    let mut layers: Vec<usize> = g
        .params()
        .unwrap_or_default()
        .iter()
        .map(|p| p.node)
        .collect();
    layers.dedup();
    let widest: usize = layers
        .iter()
        .filter_map(|&k| shapes.get(k))
        .map(|s| s.features())
        .sum();
    let params: usize = t.params.iter().map(|p| p.data.len()).sum();
    batch * features * 6 + batch * widest * 2 * 6 + params * 2 * 3 + 16 * 1024
}

/// The numbers for `t`'s run on `set`: on a board that measures its heap, one probe step on
/// the epoch's first batch (the state and that batch uploaded, `HEAP_USE` around one
/// `RUN_STEPS`); the board's state is then the probe's, so the caller uploads the run's state
/// again. Else, and when the host's estimate leaves no room for one batch beside the step (the
/// estimate is above the measured need: 59 kB against 27 kB for the digits MLP at batch 32),
/// the host's estimate.
pub(crate) fn measure(
    t: &Trainer<FixedArith>,
    board: &mut BoardTraining<'_>,
    set: &DataSet,
    test: Option<&DataSet>,
) -> Result<Fit, TrainError> {
    let heap = board.heap_bytes() as usize;
    let state_bytes = state_of(t).encode().len();
    let (batch, n) = (t.cfg.batch, set.len());
    let mut fit = Fit {
        heap,
        state: state_bytes,
        step: step_estimate(t, batch, set.features),
        measured: false,
        set: set.memory_bytes(),
        images: n,
        record: set.record_bytes(),
        test: test.map_or(0, |s| s.memory_bytes()),
        eval: step_estimate(t, EVAL_BATCH, set.features),
        test_uploaded: false,
    };
    // A board that cannot measure is planned by the estimate; so is one whose heap the
    // estimate says cannot hold even one batch beside the step: the caller refuses it before
    // any upload, rather than let the probe step fail an allocation on the board (a panic
    // and a restart there).
    if fit.plan(batch).is_none()
        || board
            .heap_use()
            .map_err(dev_err("asking the board's heap"))?
            .is_none()
    {
        return Ok(fit);
    }
    let order = systole_step::rng::epoch_order(t.cfg.seed, t.epoch as u64, n);
    let first = set.select(&order[..batch.min(n)]);
    board
        .write_state(&state_of(t))
        .map_err(dev_err("uploading the training state"))?;
    board
        .write_data(&first)
        .map_err(dev_err("uploading the probe step's batch"))?;
    let before = board
        .heap_use()
        .map_err(dev_err("asking the board's heap"))?;
    let epoch = u32::try_from(t.epoch).map_err(|_| TrainError::Config("too many epochs".into()))?;
    let batch16 = u16::try_from(batch)
        .map_err(|_| TrainError::Config(format!("--batch {batch} is over the board's 65535")))?;
    board
        .run_steps((epoch, 0), 1, batch16, t.cfg.lr_at(t.epoch), true)
        .map_err(dev_err("the probe step on the board"))?;
    let after = board
        .heap_use()
        .map_err(dev_err("asking the board's heap"))?;
    if let (Some(before), Some(after)) = (before, after) {
        let batch_bytes = first.memory_bytes();
        fit.state = (before.in_use as usize).saturating_sub(batch_bytes);
        fit.step = (after.peak as usize).saturating_sub(before.in_use as usize);
        fit.measured = true;
    }
    // The evaluation's heap, measured as the step's: the test split up (it stays for the
    // run), `HEAP_USE` around one `EVALUATE` (its formats are the probe's: the run's state
    // goes up again).
    // Before the probe, the evaluation's heap by the measured step's: a batch of
    // `EVAL_BATCH` images forward only takes less than a step's forward and backward over as
    // many (scaled up for a smaller training batch), so the probe never runs out of heap.
    fit.eval = fit.step * EVAL_BATCH.div_ceil(batch);
    if let Some(test) = test.filter(|_| fit.plan(batch).is_some_and(|p| fit.board_evaluates(&p))) {
        board
            .write_test_data(test)
            .map_err(dev_err("uploading the test split"))?;
        fit.test_uploaded = true;
        let before = board
            .heap_use()
            .map_err(dev_err("asking the board's heap"))?;
        board
            .evaluate(epoch)
            .map_err(dev_err("the probe evaluation on the board"))?;
        let after = board
            .heap_use()
            .map_err(dev_err("asking the board's heap"))?;
        if let (Some(before), Some(after)) = (before, after) {
            fit.eval = (after.peak as usize).saturating_sub(before.in_use as usize);
        }
    }
    Ok(fit)
}

/// The refusal of a board whose heap has no room for one batch beside the step.
pub(crate) fn no_room(fit: &Fit, data: &Dataset, t: &Trainer<FixedArith>) -> TrainError {
    let cfg = &t.cfg;
    let need = fit.state + fit.step + margin(fit.heap) + cfg.batch * (fit.record + ORDER_BYTES);
    TrainError::Config(format!(
        "{} at batch {} needs about {need} bytes of the board's heap (state {}, step {}{}, one batch {}, margin {}), the board has {}: train a smaller model or batch, or drive the step from the host with --host-step",
        cfg.model.describe(data.channels, data.height, data.width, data.classes),
        cfg.batch,
        fit.state,
        fit.step,
        if fit.measured { " measured on the board" } else { " estimated" },
        cfg.batch * (fit.record + ORDER_BYTES),
        margin(fit.heap),
        fit.heap,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digits MLP at batch 32 on the training SoC: 1,438 images at 41 B.
    fn digits(heap: usize, step: usize) -> Fit {
        Fit {
            heap,
            state: 10_000,
            step,
            measured: true,
            set: 1_438 * 41,
            images: 1_438,
            record: 41,
            test: 0,
            eval: 0,
            test_uploaded: false,
        }
    }

    #[test]
    fn resident_when_everything_fits_else_as_many_batches_as_fit() {
        // The margin: a thirty-second of the training image's heap.
        assert_eq!(margin(108_172), 3_380);
        // State, set 58,958, order 2,876, step 30,000, margin heap/32.
        let need = 10_000 + 58_958 + 2_876 + 30_000;
        let heap = (need + 1) * 32 / 31 + 32;
        let fit = digits(heap, 30_000);
        assert!(fit.resident_need() <= heap);
        assert_eq!(
            fit.plan(32),
            Some(Plan {
                resident: true,
                per_upload: MAX_RUN_STEPS
            })
        );
        // A byte of step more than the heap takes: batch by batch, as many as fit.
        let over = digits(heap, 30_000 + heap - fit.resident_need() + 1);
        let plan = over.plan(32).unwrap();
        assert!(!plan.resident);
        let room = heap - 10_000 - over.step - margin(heap);
        assert_eq!(plan.per_upload, room / (32 * 43));
        // No room for one batch: refused.
        assert_eq!(
            digits(heap, heap - 10_000 - margin(heap) - 32 * 43 + 1).plan(32),
            None
        );
        assert!(digits(heap, heap - 10_000 - margin(heap) - 32 * 43)
            .plan(32)
            .is_some());
        assert_eq!(digits(20_000, 30_000).plan(32), None);
    }

    #[test]
    fn the_header_names_what_decided() {
        let fit = digits(200_000, 30_000);
        let text = fit.describe(&fit.plan(32).unwrap(), 5);
        assert!(
            text.contains("1438 images at 5 bits a pixel, 58958 B uploaded once"),
            "{text}"
        );
        assert!(
            text.contains("step's 30000 B measured on the board"),
            "{text}"
        );
        let est = Fit {
            measured: false,
            ..fit
        };
        let text = est.describe(&est.plan(32).unwrap(), 5);
        assert!(text.contains("estimated by the host"), "{text}");
    }
}
