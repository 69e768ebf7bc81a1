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

use super::arith::Arith;
use super::fixed::{add_exact_at, shard_key, FixedArith};
use super::model::{self, Layer};
use super::{rng, EpochRecord, Observer, TrainError, Trainer};
use crate::data::Dataset;
use crate::dist::Collective;

/// Common fractional bits of summed gradients: the contract's common scale of exact partial
/// sums (tensors never carry more than 15).
pub const GRAD_FRAC: u32 = systole_golden::split::SUM_FRAC;

/// Training losses travel as integers with this many fractional bits (exact sums).
const LOSS_FRAC: u32 = 24;

/// Shard `k` of `s` of a global batch: a contiguous slice (possibly empty).
pub fn shard_range(len: usize, s: usize, k: usize) -> std::ops::Range<usize> {
    k * len / s..(k + 1) * len / s
}

/// Whether shard `k` is computed by `rank` of `size` ranks.
pub fn owns(k: usize, rank: usize, size: usize) -> bool {
    k % size == rank
}

/// Names of the offloaded operations whose `frac` is remembered per shard.
fn offloaded_ops(layers: &[Layer]) -> Vec<String> {
    (1..=layers.len())
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
    /// Gradients (exact, at [`GRAD_FRAC`]) of shard `k` of the batch `idx`, plus its loss sum
    /// (at `LOSS_FRAC`) and correct count.
    fn shard_grads(
        &mut self,
        data: &Dataset,
        part: &[usize],
        global: usize,
        k: usize,
        sums: &mut [Vec<i64>],
    ) -> Result<(i64, i64), TrainError> {
        self.arith.begin_shard(self.step, Some(k as u32));
        let (loss, ok, grads) = self.loss_and_grads(data, part, global)?;
        for (s, g) in sums.iter_mut().zip(&grads) {
            add_exact_at(s, g, GRAD_FRAC);
        }
        let loss_q = (loss as f64 * part.len() as f64 * (1u64 << LOSS_FRAC) as f64).round();
        Ok((loss_q as i64, ok as i64))
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
        let n = data
            .train
            .len()
            .min(self.cfg.train_limit.unwrap_or(usize::MAX));
        let mut order: Vec<usize> = (0..n).collect();
        rng::stream(self.cfg.seed, self.epoch as u64 + 1).shuffle(&mut order);
        obs.epoch_start(self.epoch + 1, n.div_ceil(self.cfg.batch));
        let shapes: Vec<(usize, usize)> = self.params.iter().map(|p| (p.rows, p.cols)).collect();
        let (mut loss_sum, mut correct) = (0i64, 0i64);
        let sat0 = super::saturation_totals(&self.arith);
        for idx in order.chunks(self.cfg.batch) {
            let mut sums: Vec<Vec<i64>> = shapes.iter().map(|&(r, c)| vec![0; r * c]).collect();
            let (mut l, mut c) = (0, 0);
            for k in (0..shards).filter(|&k| owns(k, dist.rank(), dist.size())) {
                let part = &idx[shard_range(idx.len(), shards, k)];
                if !part.is_empty() {
                    let (lk, ck) = self.shard_grads(data, part, idx.len(), k, &mut sums)?;
                    (l, c) = (l + lk, c + ck);
                }
            }
            // One all-reduce per step: every gradient, then the loss and correct count.
            let mut buf: Vec<i64> = sums.concat();
            buf.extend([l, c]);
            dist.all_reduce_sum_i64(&mut buf);
            loss_sum += buf[buf.len() - 2];
            correct += buf[buf.len() - 1];
            self.arith.begin_shard(self.step, None);
            let mut at = 0;
            for (i, &(r, cols)) in shapes.iter().enumerate() {
                let op = format!("{} update", model::param_name(i));
                let g = self
                    .arith
                    .from_exact(&op, r, cols, &buf[at..at + r * cols], GRAD_FRAC)?;
                at += r * cols;
                self.arith.sgd(
                    &op,
                    &mut self.params[i],
                    &mut self.velocity[i],
                    &g,
                    self.cfg.lr_at(self.epoch),
                    self.cfg.momentum,
                )?;
            }
            self.step += 1;
            obs.batch_done();
        }
        self.sync_fracs(shards, dist);
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
    fn sync_fracs(&mut self, shards: usize, dist: &dyn Collective) {
        let ops = offloaded_ops(&self.layers);
        let mut fracs = self.arith.state();
        let mut buf = vec![0i64; shards * ops.len()];
        for k in (0..shards).filter(|&k| owns(k, dist.rank(), dist.size())) {
            for (j, op) in ops.iter().enumerate() {
                if let Some(&f) = fracs.get(&shard_key(k as u32, op)) {
                    buf[k * ops.len() + j] = f as i64 + 1;
                }
            }
        }
        dist.all_reduce_sum_i64(&mut buf);
        for k in 0..shards {
            for (j, op) in ops.iter().enumerate() {
                if buf[k * ops.len() + j] > 0 {
                    fracs.insert(shard_key(k as u32, op), (buf[k * ops.len() + j] - 1) as u32);
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
