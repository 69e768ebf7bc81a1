//! [`agree`] across threads that stand in for MPI ranks.

use super::*;
use std::sync::{Arc, Barrier, Mutex};

/// Ranks as threads: an all-reduce adds every rank's vector into a shared one.
struct Threads {
    rank: usize,
    size: usize,
    sum: Arc<Mutex<Vec<i64>>>,
    barrier: Arc<Barrier>,
}

impl Collective for Threads {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn all_reduce_sum_i64(&self, v: &mut [i64]) {
        {
            let mut s = self.sum.lock().unwrap();
            if s.is_empty() {
                s.resize(v.len(), 0);
            }
            assert_eq!(s.len(), v.len(), "ranks passed different lengths");
            for (a, b) in s.iter_mut().zip(v.iter()) {
                *a += b;
            }
        }
        self.barrier.wait();
        v.copy_from_slice(&self.sum.lock().unwrap());
        if self.barrier.wait().is_leader() {
            self.sum.lock().unwrap().clear();
        }
        self.barrier.wait();
    }
    fn abort(&self, code: i32) -> ! {
        panic!("abort({code})")
    }
}

/// Runs [`agree`] on one thread per entry of `per_rank`; the results in rank order.
fn run(per_rank: Vec<Vec<Setting>>) -> Vec<Result<(), Disagreement>> {
    let size = per_rank.len();
    let sum = Arc::new(Mutex::new(Vec::new()));
    let barrier = Arc::new(Barrier::new(size));
    let handles: Vec<_> = per_rank
        .into_iter()
        .enumerate()
        .map(|(rank, settings)| {
            let t = Threads {
                rank,
                size,
                sum: sum.clone(),
                barrier: barrier.clone(),
            };
            std::thread::spawn(move || agree(&t, &settings))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn options(hidden: &str, seed: &str) -> Vec<Setting> {
    vec![
        Setting::new("--model", "mlp"),
        Setting::new("--hidden", hidden),
        Setting::new("--seed", seed),
    ]
}

#[test]
fn equal_settings_agree_on_every_rank() {
    let r = run(vec![options("32", "1"); 3]);
    assert_eq!(r, vec![Ok(()); 3]);
}

#[test]
fn every_rank_names_the_first_differing_option_and_both_values() {
    let r = run(vec![
        options("32", "1"),
        options("32", "1"),
        options("16", "2"),
        options("16", "1"),
    ]);
    let want = Disagreement::Setting {
        name: "--hidden".into(),
        first: "32".into(),
        rank: 2,
        other: "16".into(),
        differing: 2,
        ranks: 4,
    };
    assert_eq!(r, vec![Err(want); 4]);
    let msg = r[0].clone().unwrap_err().to_string();
    assert!(
        msg.contains("--hidden: rank 0 has 32 but rank 2 has 16"),
        "{msg}"
    );
}

#[test]
fn long_values_are_cut_for_the_message() {
    let long = "9,".repeat(200);
    let r = run(vec![options("32", "1"), options(&long, "1")]);
    let Err(Disagreement::Setting { other, .. }) = &r[1] else {
        panic!("{r:?}")
    };
    assert_eq!(other.len(), SHOWN + 3);
    assert!(other.ends_with("...") && other.starts_with("9,9,"));
}

#[test]
fn different_option_lists_are_a_build_mismatch_not_a_crash() {
    let mut short = options("32", "1");
    short.pop();
    let r = run(vec![options("32", "1"), short]);
    assert!(
        r.iter()
            .all(|x| matches!(x, Err(Disagreement::Build { .. }))),
        "{r:?}"
    );
}
