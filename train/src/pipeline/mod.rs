//! Model and hybrid parallelism: a network's layers cut into `S` pipeline *stages* (one MPI rank
//! and one device each), each global batch's units (micro-batch `m` of shard `k`,
//! [`crate::shard::unit`]) flowing forward through the stages as activations and backward as
//! gradients (a GPipe schedule: every unit forward, then every unit backward in reverse), and
//! `D` replicas of the whole pipeline summing their gradients as data-parallel training does.
//!
//! Why any `S`, `D` and placement give the bits of one process (`systole train --shards D
//! --microbatches M`): a unit's computation is one process's, split at layer boundaries. Its
//! operations keep their names (`layer 3 forward`, numbered in the whole model), their
//! remembered formats are keyed by unit, and its seeds are (run seed, step, unit, op index),
//! where a stage goes on at the op index the stage before it stopped at: the index travels
//! with the activation forward and with the gradient backward ([`Message`]). Gradients are
//! summed as exact integers (replicas all-reduce a stage's own parameters), and a stage's
//! update of parameter `i` starts at op index `i · UPDATE_SEEDS`, as in one process.
//!
//! Placement: rank `r` is stage `r % S` of replica `r / S`; replica `q` computes the shards `k`
//! with `k % D == q`. After each epoch every rank gets the whole state (parameters, momentum,
//! remembered formats, loss sums) in one all-reduce, evaluates, and rank 0 writes the
//! checkpoint, which is the one-process run's.

mod links;
mod local;
mod plan;
mod schedule;
mod stage;
mod timeline;

pub use links::{Message, MessageError, StageLinks};
pub use local::{pipeline_step_local, StepMeasure};
pub use plan::{Layers, Placement, StagePlan};
pub use schedule::{placement_setting, run_pipelined};
pub use timeline::{gpipe, Timeline};

#[cfg(test)]
mod tests;
