//! Data-parallel training step (fixed point): the global batch is split into a fixed number of
//! shards, each rank computes the gradients of its shards, and the gradients are summed exactly.
//!
//! Why this is bit-exact for any rank count: a shard's computation depends only on (run seed,
//! step, shard index) — its op seeds and remembered fractional bits are keyed by shard, never by
//! rank — and its loss gradient is divided by the *global* batch size. Each gradient word is
//! widened to an exact `i64` at [`GRAD_FRAC`] fractional bits (a left shift), shards are added
//! locally and then across ranks as integers (exact and order-independent), and the sum is
//! converted to 16 bits once, with seeds shared by all ranks. So 1 rank running S shards and
//! K ranks running S/K shards each end with identical weights.
//!
//! Micro-batches (`--microbatches M`, gradient accumulation) are the same rule one level down:
//! shard `k`'s images are split into `M` contiguous micro-batches, and micro-batch `m` of shard
//! `k` is the *unit* `k·M + m` ([`unit`]): its seeds and remembered fractional bits are keyed by
//! the unit (so, by shard and micro-batch; with `M` = 1 the unit is the shard, as before), its
//! gradients are widened to exact `i64` at [`GRAD_FRAC`] and added into the same sums. Integer
//! sums are exact and order-free, so the micro-batches of a step may be computed in any order,
//! by any process, and a pipeline's stages ([`crate::pipeline`]) compute exactly these units.

use super::arith::Arith;
use super::fixed::{add_exact_at, shard_key, FixedArith};
use super::model::{self, Graph};
use super::{rng, EpochRecord, Observer, TrainError, Trainer};
use crate::data::Dataset;
use crate::dist::Collective;

/// Common fractional bits of summed gradients: the contract's common scale of exact partial
/// sums (tensors never carry more than 15).
pub const GRAD_FRAC: u32 = systole_golden::split::SUM_FRAC;

/// Training losses travel as integers with this many fractional bits (exact sums).
pub(crate) const LOSS_FRAC: u32 = 24;

/// The loss sum of `rows` images of mean loss `loss`, as an integer at `LOSS_FRAC`.
pub(crate) fn loss_sum_q(loss: f32, rows: usize) -> i64 {
    (loss as f64 * rows as f64 * (1u64 << LOSS_FRAC) as f64).round() as i64
}

/// Seeds the update of one parameter draws (the gradient's conversion, then the momentum and
/// the weight in [`crate::arith::Arith::sgd`]): parameter `i`'s update starts at op index
/// `i` times this, so a pipeline stage updating only its own parameters uses the seeds one
/// process uses.
pub(crate) const UPDATE_SEEDS: u32 = 3;

/// Shard `k` of `s` of a global batch: a contiguous slice (possibly empty).
pub fn shard_range(len: usize, s: usize, k: usize) -> std::ops::Range<usize> {
    k * len / s..(k + 1) * len / s
}

/// Whether shard `k` is computed by `rank` of `size` ranks.
pub fn owns(k: usize, rank: usize, size: usize) -> bool {
    k % size == rank
}

/// Unit (the key of seeds and formats) of micro-batch `m` of shard `k`, `micro` micro-batches
/// a shard.
pub fn unit(k: usize, m: usize, micro: usize) -> u32 {
    (k * micro + m) as u32
}

/// The images of unit (`k`, `m`) in the global batch `idx`: micro-batch `m` of `micro` of
/// shard `k` of `shards` (possibly empty: an empty unit is skipped by every process).
pub fn unit_part(idx: &[usize], shards: usize, k: usize, micro: usize, m: usize) -> &[usize] {
    let part = &idx[shard_range(idx.len(), shards, k)];
    &part[shard_range(part.len(), micro, m)]
}

/// Checks `--microbatches micro` against `shards` shards of a `batch`: each shard's images must
/// split evenly into the micro-batches (the epoch's last, smaller batch then splits as evenly
/// as it can).
pub fn check_microbatches(micro: usize, shards: usize, batch: usize) -> Result<(), TrainError> {
    if micro == 0 {
        return Err(TrainError::Config(
            "--microbatches must be at least 1".into(),
        ));
    }
    let units = micro.saturating_mul(shards);
    if units > systole_core::limits::MAX_SHARDS {
        return Err(TrainError::Config(format!(
            "--microbatches {micro} x --shards {shards} is more than the {} parts a batch can be split into",
            systole_core::limits::MAX_SHARDS
        )));
    }
    if !batch.is_multiple_of(units) {
        return Err(TrainError::Config(format!(
            "--microbatches {micro} does not divide the batch: --batch {batch} must be a multiple of --shards {shards} x --microbatches {micro} = {units}"
        )));
    }
    Ok(())
}

/// Names of the offloaded operations whose `frac` is remembered per unit.
pub(crate) fn offloaded_ops(graph: &Graph) -> Vec<String> {
    let layers = graph.params().map_or(0, |p| {
        p.iter()
            .map(|p| p.node)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    });
    (1..=layers)
        .flat_map(|n| ["forward", "backward dW", "backward dX"].map(|o| format!("layer {n} {o}")))
        .collect()
}

/// The shard count `shards` (1 when not given), if it spreads evenly over `ranks` MPI ranks.
pub fn check_shards(shards: Option<usize>, ranks: usize) -> Result<usize, TrainError> {
    let s = shards.unwrap_or(1);
    if s == 0 || !s.is_multiple_of(ranks) {
        return Err(TrainError::Config(format!(
            "--shards {s} must be a positive multiple of the {ranks} MPI ranks"
        )));
    }
    Ok(s)
}

impl Trainer<FixedArith> {
    /// Gradients (exact, at [`GRAD_FRAC`]) of unit `k` of the batch, the images `part` of
    /// `global`, plus its loss sum (at `LOSS_FRAC`) and correct count.
    fn shard_grads(
        &mut self,
        data: &Dataset,
        part: &[usize],
        global: usize,
        k: u32,
        sums: &mut [Vec<i64>],
    ) -> Result<(i64, i64), TrainError> {
        self.arith.begin_shard(self.step, Some(k));
        let (loss, ok, grads) = self.loss_and_grads(data, part, global)?;
        for (s, g) in sums.iter_mut().zip(&grads) {
            add_exact_at(s, g, GRAD_FRAC);
        }
        Ok((loss_sum_q(loss, part.len()), ok as i64))
    }

    /// The update of parameter `i` from its summed gradient `sum` (exact, at [`GRAD_FRAC`]):
    /// converted once, then SGD with momentum, with the seeds of op indices
    /// `i · UPDATE_SEEDS..` of the step's shared part, whichever process runs it.
    pub(crate) fn update_from_exact(&mut self, i: usize, sum: &[i64]) -> Result<(), TrainError> {
        let first = i as u32 * UPDATE_SEEDS;
        self.arith.continue_at(self.step, None, first);
        let op = format!("{} update", model::param_names(&self.graph)?[i]);
        let (r, cols) = (self.params[i].rows, self.params[i].cols);
        let g = self.arith.from_exact(&op, r, cols, sum, GRAD_FRAC)?;
        self.arith.sgd(
            &op,
            &mut self.params[i],
            &mut self.velocity[i],
            &g,
            self.cfg.lr_at(self.epoch),
            self.cfg.momentum,
        )?;
        debug_assert_eq!(self.arith.op_index(), first + UPDATE_SEEDS);
        Ok(())
    }

    /// Like [`Trainer::train_epoch`], with each batch split into `cfg.shards` shards spread
    /// over the ranks of `dist` (which must divide the shard count).
    pub fn train_epoch_sharded(
        &mut self,
        data: &Dataset,
        obs: &mut dyn Observer,
        dist: &dyn Collective,
    ) -> Result<EpochRecord, TrainError> {
        let t0 = std::time::Instant::now();
        let shards = check_shards(self.cfg.shards, dist.size())?;
        let micro = self.cfg.microbatches.unwrap_or(1);
        let n = data
            .train
            .len()
            .min(self.cfg.train_limit.unwrap_or(usize::MAX));
        let order = rng::epoch_order(self.cfg.seed, self.epoch as u64, n);
        obs.epoch_start(self.epoch + 1, n.div_ceil(self.cfg.batch));
        let shapes: Vec<(usize, usize)> = self.params.iter().map(|p| (p.rows, p.cols)).collect();
        let (mut loss_sum, mut correct) = (0i64, 0i64);
        let sat0 = super::saturation_totals(&self.arith);
        for idx in order.chunks(self.cfg.batch) {
            let mut sums: Vec<Vec<i64>> = shapes.iter().map(|&(r, c)| vec![0; r * c]).collect();
            let (mut l, mut c) = (0, 0);
            for k in (0..shards).filter(|&k| owns(k, dist.rank(), dist.size())) {
                for m in 0..micro {
                    let part = unit_part(idx, shards, k, micro, m);
                    if !part.is_empty() {
                        let u = unit(k, m, micro);
                        let (lk, ck) = self.shard_grads(data, part, idx.len(), u, &mut sums)?;
                        (l, c) = (l + lk, c + ck);
                    }
                }
            }
            // One all-reduce per step: every gradient, then the loss and correct count.
            let mut buf: Vec<i64> = sums.concat();
            buf.extend([l, c]);
            dist.all_reduce_sum_i64(&mut buf);
            loss_sum += buf[buf.len() - 2];
            correct += buf[buf.len() - 1];
            let mut at = 0;
            for (i, &(r, cols)) in shapes.iter().enumerate() {
                self.update_from_exact(i, &buf[at..at + r * cols])?;
                at += r * cols;
            }
            self.step += 1;
            obs.batch_done();
            // A stop on one rank alone would leave the others waiting in a collective.
            if dist.size() == 1 {
                self.stop_if_asked(obs)?;
            }
        }
        self.sync_fracs(shards, micro, dist);
        self.epoch += 1;
        let (test_loss, test_acc) = self.evaluate(&data.test, data.features())?;
        let rec = EpochRecord {
            epoch: self.epoch,
            train_loss: (loss_sum as f64 / (1u64 << LOSS_FRAC) as f64 / n as f64) as f32,
            train_acc: 100.0 * correct as f32 / n as f32,
            test_acc,
            test_loss,
            seconds: t0.elapsed().as_secs_f64(),
            retries: super::saturation_totals(&self.arith).0 - sat0.0,
            saturated_words: super::saturation_totals(&self.arith).1 - sat0.1,
        };
        self.history.push(rec.clone());
        obs.epoch_end(&rec);
        Ok(rec)
    }

    /// Gives every rank the remembered fractional bits of every shard (each shard's owner
    /// contributes its own), so a checkpoint holds the whole state whatever the rank count and
    /// a resumed run continues bit for bit.
    fn sync_fracs(&mut self, shards: usize, micro: usize, dist: &dyn Collective) {
        let ops = offloaded_ops(&self.graph);
        let units = shards * micro;
        let mut fracs = self.arith.state();
        let mut buf = vec![0i64; units * ops.len()];
        for u in (0..units).filter(|&u| owns(u / micro, dist.rank(), dist.size())) {
            for (j, op) in ops.iter().enumerate() {
                if let Some(&f) = fracs.get(&shard_key(u as u32, op)) {
                    buf[u * ops.len() + j] = f as i64 + 1;
                }
            }
        }
        dist.all_reduce_sum_i64(&mut buf);
        for u in 0..units {
            for (j, op) in ops.iter().enumerate() {
                if buf[u * ops.len() + j] > 0 {
                    fracs.insert(shard_key(u as u32, op), (buf[u * ops.len() + j] - 1) as u32);
                }
            }
        }
        self.arith.set_state(fracs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_the_batch_once() {
        for len in [1usize, 5, 32] {
            for s in [1usize, 2, 3, 4] {
                let mut seen = vec![0; len];
                for k in 0..s {
                    for i in shard_range(len, s, k) {
                        seen[i] += 1;
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "len {len} shards {s}");
            }
        }
        assert!(owns(3, 1, 2) && !owns(3, 0, 2));
    }
}
