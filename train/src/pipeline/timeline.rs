//! The GPipe schedule's timeline from measured work: when each stage runs each unit, how long
//! the step takes and how much of it the stages sit idle (the pipeline bubble).

/// A step's timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// Cycles from the first stage's first forward pass to its last backward pass.
    pub makespan: u64,
    /// Cycles each stage computes.
    pub busy: Vec<u64>,
}

impl Timeline {
    /// Idle share of the stages' time: `1 - sum(busy) / (S · makespan)`.
    pub fn bubble(&self) -> f64 {
        let s = self.busy.len() as f64;
        if self.makespan == 0 {
            return 0.0;
        }
        1.0 - self.busy.iter().sum::<u64>() as f64 / (s * self.makespan as f64)
    }

    /// The step's cycles with the work spread evenly and no bubble: `sum(busy) / S`.
    pub fn ideal(&self) -> u64 {
        self.busy.iter().sum::<u64>() / self.busy.len().max(1) as u64
    }
}

/// The GPipe timeline of forward cycles `f[s][j]` and backward cycles `b[s][j]` (stage `s`,
/// unit `j`): a stage runs its units' forward passes in order, each once the previous stage
/// has sent it, then their backward passes in reverse order, each once the next stage has
/// sent its gradient (transfers take no cycles here).
pub fn gpipe(f: &[Vec<u64>], b: &[Vec<u64>]) -> Timeline {
    let stages = f.len();
    let units = f.first().map_or(0, Vec::len);
    let mut fend = vec![vec![0u64; units]; stages];
    for s in 0..stages {
        for j in 0..units {
            let ready = if s > 0 { fend[s - 1][j] } else { 0 };
            let free = if j > 0 { fend[s][j - 1] } else { 0 };
            fend[s][j] = ready.max(free) + f[s][j];
        }
    }
    let mut bend = vec![vec![0u64; units]; stages];
    for s in (0..stages).rev() {
        let mut free = fend[s].last().copied().unwrap_or(0);
        for j in (0..units).rev() {
            let ready = if s + 1 < stages { bend[s + 1][j] } else { 0 };
            bend[s][j] = ready.max(free) + b[s][j];
            free = bend[s][j];
        }
    }
    let makespan = bend.first().and_then(|r| r.first().copied()).unwrap_or(0);
    let busy = (0..stages)
        .map(|s| f[s].iter().sum::<u64>() + b[s].iter().sum::<u64>())
        .collect();
    Timeline { makespan, busy }
}
