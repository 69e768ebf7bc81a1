//! The pipelined step in one process: every stage and replica of every unit, in the GPipe
//! order, on this process's one device. It computes what `S x D` ranks compute (a test of the
//! stage code without MPI) and measures each stage's device cycles per unit and the bytes the
//! stages would exchange (the pipeline's bubble and traffic, docs/MEASUREMENTS.md).

use super::{StagePlan, Timeline};
use crate::data::Dataset;
use crate::fixed::FixedArith;
use crate::shard::{unit, unit_part};
use crate::{MaybeDevice, TrainError, Trainer};

/// What one step of a pipeline does, stage by stage.
#[derive(Clone, Debug, Default)]
pub struct StepMeasure {
    /// Device cycles of each unit's forward pass, per stage (`[stage][unit]`, units in order).
    pub forward: Vec<Vec<u64>>,
    /// Device cycles of each unit's backward pass, per stage.
    pub backward: Vec<Vec<u64>>,
    /// Bytes sent across each boundary (stage `s` and `s + 1`), forward and backward together.
    pub boundary_bytes: Vec<u64>,
    /// Words each stage's replicas all-reduce per step (its parameters' gradients), 8 bytes
    /// each.
    pub reduce_words: Vec<u64>,
}

impl StepMeasure {
    /// The GPipe timeline of these cycles (the units of one replica, all of them here).
    pub fn timeline(&self) -> Timeline {
        super::gpipe(&self.forward, &self.backward)
    }
}

fn cycles(t: &Trainer<FixedArith>) -> u64 {
    t.arith.device_stats().map_or(0, |(_, s)| s.cycles)
}

/// One training step of `t` on the global batch `idx` as the pipeline `plan` computes it, all
/// stages and replicas (`cfg.shards` of them) here, then the update. Returns the measure and
/// the step's loss sum (at `LOSS_FRAC`) and correct count.
pub fn pipeline_step_local(
    t: &mut Trainer<FixedArith>,
    plan: &StagePlan,
    data: &Dataset,
    idx: &[usize],
) -> Result<(StepMeasure, (i64, i64)), TrainError> {
    let (shards, micro) = (t.cfg.shards.unwrap_or(1), t.cfg.microbatches.unwrap_or(1));
    let stages = plan.stages();
    let mut m = StepMeasure {
        forward: vec![Vec::new(); stages],
        backward: vec![Vec::new(); stages],
        boundary_bytes: vec![0; stages.saturating_sub(1)],
        reduce_words: (0..stages)
            .map(|s| {
                t.stage_sums(plan, s)
                    .iter()
                    .map(|v| v.len() as u64)
                    .sum::<u64>()
            })
            .collect(),
    };
    let mut sums: Vec<Vec<Vec<i64>>> = (0..stages).map(|s| t.stage_sums(plan, s)).collect();
    let mut pending: Vec<Vec<_>> = (0..stages).map(|_| Vec::new()).collect();
    let (mut loss, mut correct) = (0, 0);
    for k in 0..shards {
        for mb in 0..micro {
            let part = unit_part(idx, shards, k, micro, mb);
            if part.is_empty() {
                continue;
            }
            let u = super::stage::UnitData {
                unit: unit(k, mb, micro),
                part,
                global: idx.len(),
            };
            let mut msg = None;
            for (s, stage_pending) in pending.iter_mut().enumerate() {
                let c0 = cycles(t);
                let (p, out, (l, c)) = t.stage_forward(plan, s, data, &u, msg.take())?;
                m.forward[s].push(cycles(t) - c0);
                if let Some(o) = &out {
                    m.boundary_bytes[s] += o.bytes();
                }
                (loss, correct) = (loss + l, correct + c);
                stage_pending.push(p);
                msg = out;
            }
        }
    }
    // Backward, each stage's units in reverse (the order the MPI schedule runs them in).
    let units = pending[0].len();
    for s in 0..stages {
        m.backward[s] = vec![0; units];
    }
    for j in (0..units).rev() {
        let mut msg = None;
        for s in (0..stages).rev() {
            let p = pending[s]
                .pop()
                .ok_or_else(|| TrainError::Config(format!("stage {} lost a unit", s + 1)))?;
            let c0 = cycles(t);
            let out = t.stage_backward(plan, s, p, msg.take(), &mut sums[s])?;
            m.backward[s][j] = cycles(t) - c0;
            if let Some(o) = &out {
                m.boundary_bytes[s - 1] += o.bytes();
            }
            msg = out;
        }
    }
    for (s, stage_sums) in sums.iter().enumerate() {
        for (i, sum) in plan.params(s).zip(stage_sums) {
            t.update_from_exact(i, sum)?;
        }
    }
    t.step += 1;
    Ok((m, (loss, correct)))
}

impl Trainer<FixedArith> {
    /// The training steps of the next epoch through [`pipeline_step_local`] (no evaluation,
    /// the epoch not counted): one measure per step.
    pub fn pipeline_epoch_local(
        &mut self,
        plan: &StagePlan,
        data: &Dataset,
        steps: Option<usize>,
    ) -> Result<Vec<StepMeasure>, TrainError> {
        let order = self.epoch_order(data);
        let mut out = Vec::new();
        for idx in order
            .chunks(self.cfg.batch)
            .take(steps.unwrap_or(usize::MAX))
        {
            out.push(pipeline_step_local(self, plan, data, idx)?.0);
        }
        Ok(out)
    }
}
