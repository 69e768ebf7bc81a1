//! Data-parallel (sharded) training without MPI: two ranks simulated by threads sharing an
//! in-process all-reduce must end bit for bit where one rank running every shard ends, resume
//! must continue bit for bit whatever the rank count, and sharded training still learns.

use std::sync::{Arc, Barrier, Mutex};
use systole_core::Rounding;
use systole_train::data::{self, Dataset};
use systole_train::dist::{Collective, Single};
use systole_train::model::ModelSpec;
use systole_train::run::{run, run_dist, RunOptions, RunSummary};
use systole_train::{EpochRecord, Precision, Quiet, TrainConfig};

fn digits() -> Dataset {
    data::load("digits").unwrap()
}

fn cfg(shards: usize, epochs: usize) -> TrainConfig {
    TrainConfig {
        model: ModelSpec::Mlp { hidden: vec![16] },
        dataset: systole_train::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
        // 251 images in batches of 32: the last batch (27) splits unevenly.
        train_limit: Some(251),
        epochs,
        batch: 32,
        lr: 0.05,
        lr_decay: 1.0,
        momentum: 0.9,
        seed: 7,
        precision: Precision::Fixed16,
        rounding: Rounding::Stochastic,
        array: 4,
        word_bits: 16,
        master_bits: 16,
        shards: Some(shards),
        microbatches: None,
    }
}

fn opts(out: Option<&std::path::Path>, resume: bool) -> RunOptions {
    RunOptions {
        device: systole_device::DeviceSpec::Golden,
        host_step: false,
        checkpoint_every: 1,
        check: false,
        out: out.map(|p| p.to_path_buf()),
        resume,
        overwrite: false,
        trace: None,
    }
}

/// Ranks as threads: each adds its vector into a shared sum, then all read it back.
struct Group {
    acc: Mutex<Vec<i64>>,
    bar: Barrier,
}

struct ThreadRank {
    rank: usize,
    size: usize,
    g: Arc<Group>,
}

impl Collective for ThreadRank {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn all_reduce_sum_i64(&self, v: &mut [i64]) {
        {
            let mut a = self.g.acc.lock().unwrap();
            if a.is_empty() {
                a.resize(v.len(), 0);
            }
            assert_eq!(
                a.len(),
                v.len(),
                "ranks reduce vectors of different lengths"
            );
            for (x, y) in a.iter_mut().zip(v.iter()) {
                *x += *y;
            }
        }
        self.g.bar.wait();
        v.copy_from_slice(&self.g.acc.lock().unwrap());
        self.g.bar.wait();
        if self.rank == 0 {
            self.g.acc.lock().unwrap().clear();
        }
        self.g.bar.wait();
    }
    fn abort(&self, code: i32) -> ! {
        panic!("rank {} aborted with {code}", self.rank)
    }
}

/// Runs `c` on `size` thread ranks; returns every rank's summary.
fn run_ranks(
    c: &TrainConfig,
    size: usize,
    out: Option<&std::path::Path>,
    resume: bool,
) -> Vec<RunSummary> {
    let g = Arc::new(Group {
        acc: Mutex::new(Vec::new()),
        bar: Barrier::new(size),
    });
    let handles: Vec<_> = (0..size)
        .map(|rank| {
            let (g, c, o) = (g.clone(), c.clone(), opts(out, resume));
            std::thread::spawn(move || {
                let r = ThreadRank { rank, size, g };
                run_dist(&c, &digits(), &o, &mut Quiet, &r).unwrap()
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Histories without the wall-clock seconds.
fn results(h: &[EpochRecord]) -> Vec<(f32, f32, f32, f32)> {
    h.iter()
        .map(|r| (r.train_loss, r.train_acc, r.test_loss, r.test_acc))
        .collect()
}

#[test]
fn two_ranks_match_one_rank_bit_for_bit() {
    let d = digits();
    for shards in [2, 4] {
        let one = run(&cfg(shards, 2), &d, &opts(None, false), &mut Quiet).unwrap();
        let again = run_dist(&cfg(shards, 2), &d, &opts(None, false), &mut Quiet, &Single).unwrap();
        assert_eq!(one.params, again.params, "a sharded run repeats");
        let two = run_ranks(&cfg(shards, 2), 2, None, false);
        for (rank, s) in two.iter().enumerate() {
            assert_eq!(s.params, one.params, "{shards} shards, rank {rank}");
            assert_eq!(results(&s.history), results(&one.history));
        }
    }
    // The shard count is part of the result: 2 and 4 shards differ.
    let a = run(&cfg(2, 1), &d, &opts(None, false), &mut Quiet).unwrap();
    let b = run(&cfg(4, 1), &d, &opts(None, false), &mut Quiet).unwrap();
    assert_ne!(a.params, b.params);
}

#[test]
fn sharded_resume_is_exact_across_rank_counts() {
    let d = digits();
    let straight = run(&cfg(2, 2), &d, &opts(None, false), &mut Quiet).unwrap();
    // First epoch on one rank, second on two thread ranks from its checkpoint, and the
    // other way round.
    let dir = tempfile::tempdir().unwrap();
    run(&cfg(2, 1), &d, &opts(Some(dir.path()), false), &mut Quiet).unwrap();
    let resumed = run_ranks(&cfg(2, 2), 2, Some(dir.path()), true);
    assert_eq!(resumed[0].params, straight.params);
    assert_eq!(resumed[1].params, straight.params);
    let dir = tempfile::tempdir().unwrap();
    run_ranks(&cfg(2, 1), 2, Some(dir.path()), false);
    let resumed = run(&cfg(2, 2), &d, &opts(Some(dir.path()), true), &mut Quiet).unwrap();
    assert_eq!(resumed.params, straight.params);
    assert_eq!(results(&resumed.history), results(&straight.history));
}

#[test]
fn sharded_training_learns() {
    let d = digits();
    let c = TrainConfig {
        train_limit: None,
        model: ModelSpec::Mlp { hidden: vec![32] },
        array: 8,
        ..cfg(4, 3)
    };
    let s = run(&c, &d, &opts(None, false), &mut Quiet).unwrap();
    let h = &s.history;
    assert!(h[2].train_loss < h[0].train_loss, "{h:?}");
    assert!(h[2].test_acc > 85.0, "test accuracy {}", h[2].test_acc);
}

#[test]
fn bad_shard_options_are_clear_errors() {
    let d = digits();
    let o = opts(None, false);
    let e = run(&cfg(0, 1), &d, &o, &mut Quiet).unwrap_err();
    assert!(e.to_string().contains("--shards must be at least 1"), "{e}");
    let f32c = TrainConfig {
        precision: Precision::F32,
        ..cfg(2, 1)
    };
    let e = run(&f32c, &d, &o, &mut Quiet).unwrap_err();
    assert!(e.to_string().contains("only --precision fixed16"), "{e}");
    // 3 shards cannot be spread evenly over 2 ranks; both ranks fail before any collective.
    let g = Arc::new(Group {
        acc: Mutex::new(Vec::new()),
        bar: Barrier::new(1),
    });
    let r = ThreadRank {
        rank: 1,
        size: 2,
        g,
    };
    let e = run_dist(&cfg(3, 1), &d, &o, &mut Quiet, &r).unwrap_err();
    assert!(e.to_string().contains("multiple of the 2 MPI ranks"), "{e}");
    let e = run_dist(
        &TrainConfig {
            shards: None,
            ..cfg(2, 1)
        },
        &d,
        &o,
        &mut Quiet,
        &r,
    )
    .unwrap_err();
    assert!(e.to_string().contains("needs --shards"), "{e}");
}
