//! Where the layers go: the cut of a model into stages ([`StagePlan`]), balanced by MACs or
//! given by `--cut`, and where a rank stands in the pipeline ([`Placement`]).

use crate::model::Graph;
use crate::TrainError;

/// The network's *layers* as the pipeline counts them: each node with parameters and the
/// parameter-free nodes after it (a dense layer and its ReLU; a convolution, its ReLU and
/// its pooling), the nodes before the first such node joining the first layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layers {
    /// First node of each layer, then the node count.
    pub node_starts: Vec<usize>,
    /// First parameter of each layer, then the parameter count.
    pub param_starts: Vec<usize>,
    /// Forward MACs of one image through each layer.
    pub macs: Vec<u64>,
}

impl Layers {
    /// The layers of `g`.
    pub fn of(g: &Graph) -> Result<Layers, TrainError> {
        let config = |e: systole_step::GraphError| TrainError::Config(e.to_string());
        let params = g.params().map_err(config)?;
        let macs = g.macs().map_err(config)?;
        let (mut node_starts, mut param_starts) = (Vec::new(), Vec::new());
        for (i, p) in params.iter().enumerate() {
            if i == 0 || p.node != params[i - 1].node {
                node_starts.push(if node_starts.is_empty() { 0 } else { p.node });
                param_starts.push(i);
            }
        }
        if node_starts.is_empty() {
            node_starts.push(0);
            param_starts.push(0);
        }
        let n = node_starts.len();
        node_starts.push(g.nodes.len());
        param_starts.push(params.len());
        let macs = (0..n)
            .map(|l| macs[node_starts[l]..node_starts[l + 1]].iter().sum())
            .collect();
        Ok(Layers {
            node_starts,
            param_starts,
            macs,
        })
    }

    /// Number of layers.
    pub fn len(&self) -> usize {
        self.macs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.macs.is_empty()
    }
}

/// The model's layers cut into stages: stage `s` runs layers `starts[s]..starts[s + 1]`
/// (0-based, the last ending at the model's end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagePlan {
    starts: Vec<usize>,
    layers: Layers,
}

impl StagePlan {
    /// `stages` stages of `graph`'s layers: cut after the layers `cut` names (1-based: `--cut 1`
    /// puts layer 1 on stage 1 and the rest on stage 2), or, without `cut`, the contiguous cut
    /// whose largest stage has the fewest MACs (the first such cut). Any layer boundary may be
    /// cut: every tensor that crosses it (a residual connection's too) is sent.
    pub fn new(graph: &Graph, stages: usize, cut: Option<&[usize]>) -> Result<Self, TrainError> {
        let layers = Layers::of(graph)?;
        let n = layers.len();
        let bad = |m: String| Err(TrainError::Config(m));
        if stages == 0 {
            return bad("--stages must be at least 1".into());
        }
        if stages > n {
            return bad(format!(
                "--stages {stages} is more than the model's {n} layers: each stage needs a layer (use --stages {n} or fewer)"
            ));
        }
        let starts = match cut {
            Some(c) => {
                if c.len() + 1 != stages {
                    return bad(format!(
                        "--cut names {} cut(s), but --stages {stages} needs {} (the layers after which a stage ends)",
                        c.len(),
                        stages - 1
                    ));
                }
                let mut starts = vec![0];
                for &after in c {
                    let last = *starts.last().unwrap_or(&0);
                    if after <= last || after >= n {
                        let s = starts.len();
                        return bad(format!(
                            "--cut {}: a cut after layer {after} leaves stage {} empty (cuts must increase, within 1..{})",
                            c.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
                            if after <= last { s } else { s + 1 },
                            n - 1
                        ));
                    }
                    starts.push(after);
                }
                starts
            }
            None => balanced(&layers.macs, stages),
        };
        Ok(StagePlan { starts, layers })
    }

    /// Number of stages.
    pub fn stages(&self) -> usize {
        self.starts.len()
    }

    /// The layers (0-based) of stage `s`.
    pub fn layers(&self, s: usize) -> std::ops::Range<usize> {
        self.starts[s]..self.starts.get(s + 1).copied().unwrap_or(self.layers.len())
    }

    /// The graph's nodes of stage `s`.
    pub fn nodes(&self, s: usize) -> std::ops::Range<usize> {
        let l = self.layers(s);
        self.layers.node_starts[l.start]..self.layers.node_starts[l.end]
    }

    /// The parameters (in model order) of stage `s`.
    pub fn params(&self, s: usize) -> std::ops::Range<usize> {
        let l = self.layers(s);
        self.layers.param_starts[l.start]..self.layers.param_starts[l.end]
    }

    /// The stage that runs layer `l` (0-based).
    pub fn stage_of(&self, l: usize) -> usize {
        self.starts.iter().rposition(|&s| s <= l).unwrap_or(0)
    }

    /// The stage that holds parameter `i`.
    pub fn stage_of_param(&self, i: usize) -> usize {
        let l = self
            .layers
            .param_starts
            .iter()
            .rposition(|&p| p <= i)
            .unwrap_or(0);
        self.stage_of(l.min(self.layers.len().saturating_sub(1)))
    }

    /// The cut as `--cut` takes it, e.g. `1,2` (empty for one stage).
    pub fn cut_text(&self) -> String {
        let c: Vec<String> = self.starts[1..].iter().map(usize::to_string).collect();
        c.join(",")
    }
}

/// Stage starts of the contiguous cut of `costs` into `stages` parts whose largest part is
/// smallest (dynamic programming; models have a handful of layers).
fn balanced(costs: &[u64], stages: usize) -> Vec<usize> {
    let n = costs.len();
    let sum = |a: usize, b: usize| costs[a..b].iter().sum::<u64>();
    // best[s][i]: the smallest largest part of layers 0..i in s parts; from[s][i] its last start.
    let mut best = vec![vec![u64::MAX; n + 1]; stages + 1];
    let mut from = vec![vec![0usize; n + 1]; stages + 1];
    best[0][0] = 0;
    for s in 1..=stages {
        for i in s..=n {
            for j in (s - 1)..i {
                if best[s - 1][j] == u64::MAX {
                    continue;
                }
                let c = best[s - 1][j].max(sum(j, i));
                if c < best[s][i] {
                    (best[s][i], from[s][i]) = (c, j);
                }
            }
        }
    }
    let mut starts = vec![0; stages];
    let mut i = n;
    for s in (1..=stages).rev() {
        starts[s - 1] = from[s][i];
        i = from[s][i];
    }
    starts
}

/// Where one rank stands: its stage in `plan` and its replica of `replicas`.
#[derive(Clone, Debug)]
pub struct Placement {
    /// The cut.
    pub plan: StagePlan,
    /// This rank's stage.
    pub stage: usize,
    /// This rank's replica of the pipeline.
    pub replica: usize,
    /// Number of replicas (`--shards`).
    pub replicas: usize,
}

impl Placement {
    /// Rank `rank` of `ranks` for `plan` with `shards` replicas: rank `r` is stage `r % S` of
    /// replica `r / S`; `ranks` must be `S · shards`.
    pub fn of_rank(
        plan: StagePlan,
        shards: usize,
        rank: usize,
        ranks: usize,
    ) -> Result<Self, TrainError> {
        let s = plan.stages();
        if s.checked_mul(shards) != Some(ranks) {
            return Err(TrainError::Config(format!(
                "--stages {s} x --shards {shards} needs {} MPI ranks, but this job has {ranks}: start it with mpirun -np {}",
                s.saturating_mul(shards),
                s.saturating_mul(shards)
            )));
        }
        Ok(Placement {
            stage: rank % s,
            replica: rank / s,
            replicas: shards,
            plan,
        })
    }

    /// The world rank of `stage` of replica `replica`.
    pub fn rank_of(&self, stage: usize, replica: usize) -> usize {
        replica * self.plan.stages() + stage
    }

    /// Whether this is the first stage (it reads the images).
    pub fn first(&self) -> bool {
        self.stage == 0
    }

    /// Whether this is the last stage (it computes the loss).
    pub fn last(&self) -> bool {
        self.stage + 1 == self.plan.stages()
    }
}
