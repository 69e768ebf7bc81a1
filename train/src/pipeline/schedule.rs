//! The pipelined run over MPI: each rank one stage of one replica, the GPipe schedule per step
//! (every unit forward, then every unit backward in reverse), the replicas' all-reduce of the
//! stage's gradients, the stage's update, and after each epoch the whole state on every rank.

use super::stage::UnitData;
use super::{Placement, StageLinks, StagePlan};
use crate::data::Dataset;
use crate::dist::{Collective, Setting};
use crate::fixed::{shard_key, FixedArith};
use crate::model::Params;
use crate::run::{check_fresh_start, drive, fixed_arith, RunOptions, RunSummary};
use crate::shard::{offloaded_ops, owns, unit, unit_part, LOSS_FRAC};
use crate::{EpochRecord, Observer, Precision, TrainConfig, TrainError, Trainer};
use systole_golden::tensor::QMatrix;
use systole_step::arith::Arith;

/// The setting the ranks must agree on besides the run's options: the stages and the cut.
pub fn placement_setting(plan: Option<&StagePlan>) -> Setting {
    let value = plan.map_or("1 stage".to_string(), |p| {
        format!("{} stages, cut after layer(s) {}", p.stages(), p.cut_text())
    });
    Setting::new("--stages and --cut", value)
}

/// Runs `cfg` as this rank's stage of a pipeline of `stages` stages (at least 2) cut by `cut`
/// (see [`StagePlan::new`]), with `cfg.shards` replicas; `dist` must hold `stages x shards`
/// ranks, from `start` (a model file's weights; `None`: the seed's) unless the run resumes.
/// Every rank returns the same summary; rank 0 writes the checkpoint.
pub fn run_pipelined(
    cfg: &TrainConfig,
    data: &Dataset,
    opts: &RunOptions,
    obs: &mut dyn Observer,
    dist: &dyn Collective,
    (stages, cut, start): (usize, Option<&[usize]>, Option<&Params>),
) -> Result<RunSummary, TrainError> {
    cfg.validate()?;
    check_fresh_start(opts)?;
    if cfg.precision != Precision::Fixed16 {
        return Err(TrainError::Config(
            "only --precision fixed16 can be trained in pipeline stages".into(),
        ));
    }
    let graph = cfg.graph_that_fits(data)?;
    let plan = StagePlan::new(&graph, stages, cut)?;
    let place = Placement::of_rank(
        plan.clone(),
        cfg.shards.unwrap_or(1),
        dist.rank(),
        dist.size(),
    )?;
    let setting = [placement_setting(Some(&plan))];
    // Made at the first epoch, after the ranks have agreed on the stages.
    let mut links: Option<Box<dyn StageLinks + '_>> = None;
    drive(
        cfg,
        data,
        Trainer::start(cfg.clone(), data, fixed_arith(cfg, opts)?, start)?,
        opts,
        obs,
        (dist, &setting),
        &mut |t, d, o| {
            if links.is_none() {
                links = Some(dist.stage_links(stages).ok_or_else(|| {
                    TrainError::Config(
                        "--stages needs MPI: build systole with --features mpi and start it with mpirun"
                            .into(),
                    )
                })?);
            }
            let l = links
                .as_deref()
                .ok_or_else(|| TrainError::Config("no links".into()))?;
            t.train_epoch_pipelined(d, o, dist, l, &place)
        },
    )
}

impl Trainer<FixedArith> {
    /// One epoch as `place`'s stage: returns the epoch's record (the same on every rank).
    pub fn train_epoch_pipelined(
        &mut self,
        data: &Dataset,
        obs: &mut dyn Observer,
        dist: &dyn Collective,
        links: &dyn StageLinks,
        place: &Placement,
    ) -> Result<EpochRecord, TrainError> {
        let t0 = std::time::Instant::now();
        let (shards, micro) = (place.replicas, self.cfg.microbatches.unwrap_or(1));
        let (plan, s) = (&place.plan, place.stage);
        // The neighbours (used only where they exist).
        let prev = place.rank_of(s.saturating_sub(1), place.replica);
        let next = place.rank_of((s + 1).min(plan.stages() - 1), place.replica);
        let order = self.epoch_order(data);
        let n = order.len();
        obs.epoch_start(self.epoch + 1, n.div_ceil(self.cfg.batch));
        let sat0 = crate::saturation_totals(&self.arith);
        let (mut loss_sum, mut correct) = (0i64, 0i64);
        for idx in order.chunks(self.cfg.batch) {
            let mut sums = self.stage_sums(plan, s);
            let mut pending = Vec::new();
            for k in (0..shards).filter(|&k| owns(k, place.replica, shards)) {
                for m in 0..micro {
                    let part = unit_part(idx, shards, k, micro, m);
                    if part.is_empty() {
                        continue;
                    }
                    let u = UnitData {
                        unit: unit(k, m, micro),
                        part,
                        global: idx.len(),
                    };
                    let input = match place.first() {
                        true => None,
                        false => Some(links.recv(prev).map_err(TrainError::Message)?),
                    };
                    let (p, out, (l, c)) = self.stage_forward(plan, s, data, &u, input)?;
                    if let Some(o) = out {
                        links.send(next, &o);
                    }
                    (loss_sum, correct) = (loss_sum + l, correct + c);
                    pending.push(p);
                }
            }
            for p in pending.into_iter().rev() {
                let grad = match place.last() {
                    true => None,
                    false => Some(links.recv(next).map_err(TrainError::Message)?),
                };
                if let Some(o) = self.stage_backward(plan, s, p, grad, &mut sums)? {
                    links.send(prev, &o);
                }
            }
            let mut buf = sums.concat();
            links.replicas_all_reduce(&mut buf);
            let mut at = 0;
            for i in plan.params(s) {
                let len = self.params[i].data.len();
                self.update_from_exact(i, &buf[at..at + len])?;
                at += len;
            }
            self.step += 1;
            obs.batch_done();
        }
        let (loss_sum, correct) = self.gather_state(dist, place, micro, (loss_sum, correct))?;
        self.epoch += 1;
        let (test_loss, test_acc) = self.evaluate(&data.test, data.features())?;
        let sat = crate::saturation_totals(&self.arith);
        let rec = EpochRecord {
            epoch: self.epoch,
            train_loss: (loss_sum as f64 / (1u64 << LOSS_FRAC) as f64 / n as f64) as f32,
            train_acc: 100.0 * correct as f32 / n as f32,
            test_acc,
            test_loss,
            seconds: t0.elapsed().as_secs_f64(),
            retries: sat.0 - sat0.0,
            saturated_words: sat.1 - sat0.1,
        };
        self.history.push(rec.clone());
        obs.epoch_end(&rec);
        Ok(rec)
    }

    /// Gives every rank the whole state in one all-reduce: each parameter and its momentum
    /// from its stage's rank of replica 0, each unit's remembered formats of each stage's
    /// operations from the rank that computed them, and the epoch's loss sum and correct count
    /// (this rank's units) summed over the last stage's ranks.
    fn gather_state(
        &mut self,
        dist: &dyn Collective,
        place: &Placement,
        micro: usize,
        (loss, correct): (i64, i64),
    ) -> Result<(i64, i64), TrainError> {
        let plan = &place.plan;
        let mine_in_replica0 =
            |i: usize| place.replica == 0 && plan.stage_of_param(i) == place.stage;
        let mut buf = Vec::new();
        for i in 0..self.params.len() {
            for t in [&self.params[i], &self.velocity[i]] {
                let own = mine_in_replica0(i);
                buf.push(if own { t.frac as i64 } else { 0 });
                buf.extend(t.data.iter().map(|&w| if own { w as i64 } else { 0 }));
            }
        }
        let ops = offloaded_ops(&self.graph);
        let units = place.replicas * micro;
        let mut fracs = self.arith.state();
        for u in 0..units {
            let owner = owns(u / micro, place.replica, place.replicas);
            for (j, op) in ops.iter().enumerate() {
                let own = owner && plan.stage_of(j / 3) == place.stage;
                let f = fracs.get(&shard_key(u as u32, op)).filter(|_| own);
                buf.push(f.map_or(0, |&f| f as i64 + 1));
            }
        }
        let sums = place.last();
        buf.extend([loss, correct].map(|v| if sums { v } else { 0 }));
        dist.all_reduce_sum_i64(&mut buf);
        let mut at = 0;
        for i in 0..self.params.len() {
            for which in 0..2 {
                let t = if which == 0 {
                    &self.params[i]
                } else {
                    &self.velocity[i]
                };
                let (rows, cols, len) = (t.rows, t.cols, t.data.len());
                let frac = buf[at] as u32;
                let data = buf[at + 1..at + 1 + len]
                    .iter()
                    .map(|&w| w as i16)
                    .collect();
                let q = QMatrix::from_vec(rows, cols, frac, data).map_err(|source| {
                    TrainError::Numeric {
                        op: format!("gathering parameter {}", i + 1),
                        source,
                    }
                })?;
                at += 1 + len;
                if which == 0 {
                    self.params[i] = q;
                } else {
                    self.velocity[i] = q;
                }
            }
        }
        for u in 0..units {
            for op in &ops {
                if buf[at] > 0 {
                    fracs.insert(shard_key(u as u32, op), (buf[at] - 1) as u32);
                }
                at += 1;
            }
        }
        self.arith.set_state(fracs);
        Ok((buf[at], buf[at + 1]))
    }
}
