//! One stage's share of a unit's step: its layers forward (the first stage imports the
//! images, the last computes the loss and its gradient), its layers backward, and its
//! parameters' update. The MPI schedule and the one-process driver both call these.

use super::{Message, StagePlan};
use crate::data::Dataset;
use crate::fixed::{add_exact_at, FixedArith};
use crate::model::{self, Span, Tape};
use crate::shard::{loss_sum_q, GRAD_FRAC};
use crate::{TrainError, Trainer};
use systole_golden::tensor::QMatrix;
use systole_step::arith::Arith;
use systole_step::loss::softmax_xent_scaled;
use systole_step::StepError;

/// A unit between its forward and its backward pass on one stage.
pub struct Pending {
    unit: u32,
    rows: usize,
    tape: Tape<QMatrix>,
    /// The last stage's loss gradient and the op index after it.
    tail: Option<Message>,
}

/// A unit's images: `part` of the training split, `global` images in the whole batch.
pub struct UnitData<'a> {
    /// The unit.
    pub unit: u32,
    /// Its images' indices in the training split.
    pub part: &'a [usize],
    /// Images in the global batch (the loss gradient's divisor).
    pub global: usize,
}

/// What a stage's forward pass of a unit gives: its state for the backward pass, the message
/// for the next stage (none on the last), and on the last stage the unit's loss sum (at
/// `LOSS_FRAC`) and correct count.
pub type Forwarded = (Pending, Option<Message>, (i64, i64));

fn expect_unit(m: &Message, unit: u32, dir: &str) -> Result<(), TrainError> {
    if m.unit == unit {
        return Ok(());
    }
    Err(TrainError::Config(format!(
        "pipeline out of step: the {dir} message of unit {} came where unit {unit} was due (were the stages started with the same options?)",
        m.unit
    )))
}

impl Trainer<FixedArith> {
    /// Stage `s`'s forward pass of unit `u` (`input`: the previous stage's message; none on
    /// the first stage, which imports the images).
    pub(crate) fn stage_forward(
        &mut self,
        plan: &StagePlan,
        s: usize,
        data: &Dataset,
        u: &UnitData<'_>,
        input: Option<Message>,
    ) -> Result<Forwarded, TrainError> {
        let rows = u.part.len();
        let xs = match input {
            None => {
                self.arith.continue_at(self.step, Some(u.unit), 0);
                let images = Self::batch_images(&data.train, u.part, data.features());
                vec![self.arith.import("input", rows, data.features(), &images)?]
            }
            Some(m) => {
                expect_unit(&m, u.unit, "forward")?;
                self.arith.continue_at(self.step, Some(u.unit), m.op_index);
                m.tensors
            }
        };
        let (lr, pr) = (plan.nodes(s), plan.params(s));
        let span = Span {
            lo: lr.start,
            hi: lr.end,
        };
        let (outs, tape) = model::forward_span(
            &mut self.arith,
            &self.graph,
            span,
            &self.params[pr],
            xs,
            rows,
        )?;
        let mut pending = Pending {
            unit: u.unit,
            rows,
            tape,
            tail: None,
        };
        if lr.end < self.graph.nodes.len() {
            let out = Message {
                unit: u.unit,
                op_index: self.arith.op_index(),
                tensors: outs,
            };
            return Ok((pending, Some(out), (0, 0)));
        }
        let h = outs
            .into_iter()
            .next()
            .ok_or_else(|| TrainError::Config("the last stage handed on no logits".into()))?;
        // The last stage: the loss, as `systole_step::step::loss_and_grads` computes it.
        let labels: Vec<u8> = u.part.iter().map(|&i| data.train.labels[i]).collect();
        let (loss, ok, grad) = softmax_xent_scaled(
            &self.arith.to_host(&h),
            &labels,
            self.graph.classes,
            u.global,
        );
        if !loss.is_finite() {
            return Err(StepError::Diverged {
                step: self.step,
                loss,
            }
            .into());
        }
        let dl = self
            .arith
            .import("loss gradient", rows, self.graph.classes, &grad)?;
        pending.tail = Some(Message {
            unit: u.unit,
            op_index: self.arith.op_index(),
            tensors: vec![dl],
        });
        Ok((pending, None, (loss_sum_q(loss, rows), ok as i64)))
    }

    /// Stage `s`'s backward pass of `p` (`grad`: the next stage's message; none on the last
    /// stage): adds its parameters' gradients to `sums` (stage `s`'s parameters, in order,
    /// exact at [`GRAD_FRAC`]) and returns the message for the previous stage (none on the
    /// first).
    pub(crate) fn stage_backward(
        &mut self,
        plan: &StagePlan,
        s: usize,
        p: Pending,
        grad: Option<Message>,
        sums: &mut [Vec<i64>],
    ) -> Result<Option<Message>, TrainError> {
        let g = match (grad, p.tail) {
            (Some(m), _) => {
                expect_unit(&m, p.unit, "backward")?;
                m
            }
            (None, Some(t)) => t,
            (None, None) => {
                return Err(TrainError::Config(format!(
                    "stage {} has no gradient for unit {}",
                    s + 1,
                    p.unit
                )))
            }
        };
        self.arith.continue_at(self.step, Some(p.unit), g.op_index);
        let pr = plan.params(s);
        let (grads, dins) = model::backward_span(
            &mut self.arith,
            &self.graph,
            &self.params[pr],
            p.tape,
            g.tensors,
            p.rows,
        )?;
        for (sum, g) in sums.iter_mut().zip(&grads) {
            add_exact_at(sum, g, GRAD_FRAC);
        }
        Ok((s > 0).then(|| Message {
            unit: p.unit,
            op_index: self.arith.op_index(),
            tensors: dins,
        }))
    }

    /// Zeroed exact sums for stage `s`'s parameters.
    pub(crate) fn stage_sums(&self, plan: &StagePlan, s: usize) -> Vec<Vec<i64>> {
        self.params[plan.params(s)]
            .iter()
            .map(|p| vec![0; p.rows * p.cols])
            .collect()
    }
}
