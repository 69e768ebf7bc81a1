//! Runs a sweep: the independent pieces of work (a synthesis per design, a training run per
//! point and seed, then each point's cycles and report) on `jobs` threads, a point written to
//! `explore.json` / `explore.csv` as soon as it is complete, so an interrupted sweep loses at
//! most the points in flight and a rerun resumes after the written ones.

use super::cycles::{self, CycleTable, SeedRun};
use super::report::{self, PointResult, Settings, SweepFile};
use super::synth::{self, Cached, Resources, Synthesizer};
use super::{DesignPoint, ExploreError};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use systole_boards::Board;
use systole_core::Rounding;
use systole_train::data::Dataset;
use systole_train::model::Params;
use systole_train::TrainConfig;

/// What the sweep tells its caller while it runs (the CLI draws a progress bar).
pub trait Progress: Sync {
    /// The sweep starts: `tasks` pieces of work, `resumed` points read back from the folder.
    fn begin(&self, _tasks: u64, _resumed: usize) {}
    /// One piece of work is done (`what`: `train 8x8 fm0 w16 stochastic seed 2`).
    fn task_done(&self, _what: &str) {}
    /// A point is complete and written.
    fn point_done(&self, _r: &PointResult) {}
}

/// A progress that ignores everything.
pub struct Silent;
impl Progress for Silent {}

/// A whole sweep.
pub struct Sweep<'a> {
    /// The training recipe (model, data set, epochs, rate); precision, rounding, array and
    /// seed are set per run.
    pub base: TrainConfig,
    /// The weights every run starts from (an ONNX file's; `None`: each run's seed).
    pub start: Option<Params>,
    /// The points, in the order they are run and reported.
    pub points: Vec<DesignPoint>,
    /// Run seeds of every point.
    pub seeds: Vec<u64>,
    /// Boards each point is fitted to.
    pub boards: Vec<&'static Board>,
    /// Training steps of each point's cycle check on the Verilated array.
    pub sample_steps: usize,
    /// Worker threads.
    pub jobs: usize,
    /// Where resources come from.
    pub synth: &'a dyn Synthesizer,
    /// The synthesis cache folder.
    pub cache: PathBuf,
    /// The output folder.
    pub out: PathBuf,
    /// Replace an earlier sweep's results with other settings.
    pub overwrite: bool,
}

type TrainKey = (usize, u32, Rounding);
type HwKey = (usize, usize, u32, bool);
/// The cycle tables, one per (array size, feature-map depth).
type Tables = Mutex<HashMap<(usize, usize), Arc<Mutex<CycleTable>>>>;

#[derive(Clone, Copy, Debug)]
enum Task {
    Synth(DesignPoint),
    Train(DesignPoint, u64),
    Point(DesignPoint),
}

#[derive(Default)]
struct State {
    queue: VecDeque<Task>,
    in_flight: usize,
    error: Option<ExploreError>,
    synth: HashMap<HwKey, Option<Resources>>,
    runs: HashMap<(TrainKey, u64), SeedRun>,
    file: Option<SweepFile>,
}

impl State {
    fn ready(&self, t: &Task, seeds: &[u64]) -> bool {
        match t {
            Task::Point(p) => {
                self.synth.contains_key(&p.hardware_key())
                    && seeds
                        .iter()
                        .all(|s| self.runs.contains_key(&(p.training_key(), *s)))
            }
            _ => true,
        }
    }
}

impl Sweep<'_> {
    /// The settings written into `explore.json`.
    pub fn settings(&self, data: &Dataset) -> Settings {
        let b = &self.base;
        Settings {
            model: b
                .model
                .describe(data.channels, data.height, data.width, data.classes)
                + if self.start.is_some() {
                    ", from its weights"
                } else {
                    ""
                },
            dataset: data.name.clone(),
            input_scale: b.input_scale,
            input_offset: b.input_offset,
            limit: b.train_limit,
            epochs: b.epochs,
            batch: b.batch,
            lr: b.lr,
            lr_decay: b.lr_decay,
            momentum: b.momentum,
            seeds: self.seeds.clone(),
            sample_steps: self.sample_steps,
            resources: self.synth.source(),
        }
    }

    /// Runs the sweep (holding `out`'s lock: take it with
    /// `systole_train::run::claim_out_dir` first) and returns every point in the folder.
    pub fn run(&self, data: &Dataset, progress: &dyn Progress) -> Result<SweepFile, ExploreError> {
        if self.seeds.is_empty() {
            return Err(ExploreError::Zero { flag: "--seeds" });
        }
        let settings = self.settings(data);
        let json = self.out.join(report::JSON);
        let mut file = match report::read(&json) {
            Ok(Some(old)) if !self.overwrite => {
                if let Some((option, was, now)) = report::differing(&old.settings, &settings) {
                    return Err(ExploreError::OtherSweep {
                        path: json,
                        option,
                        was,
                        now,
                    });
                }
                old
            }
            Err(e) if !self.overwrite => return Err(e),
            _ => SweepFile {
                settings: settings.clone(),
                cycle_method: report::CYCLE_METHOD.into(),
                points: Vec::new(),
            },
        };
        file.settings = settings;
        let resumed = file.points.len();
        let todo: Vec<DesignPoint> = self
            .points
            .iter()
            .filter(|p| !file.points.iter().any(|r| r.point == **p))
            .copied()
            .collect();
        let state = Mutex::new(State {
            queue: self.tasks(&todo),
            file: Some(file),
            ..State::default()
        });
        let tasks = state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .queue
            .len();
        progress.begin(tasks as u64, resumed);
        let wake = Condvar::new();
        let tables: Tables = Mutex::default();
        let cached = Cached {
            inner: self.synth,
            dir: self.cache.clone(),
        };
        let ctx = Ctx {
            sweep: self,
            data,
            state: &state,
            wake: &wake,
            tables: &tables,
            cached: &cached,
            progress,
        };
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..self.jobs.max(1))
                .map(|_| s.spawn(|| ctx.work()))
                .collect();
            for w in workers {
                if let Err(p) = w.join() {
                    let why = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    let mut st = state.lock().unwrap_or_else(PoisonError::into_inner);
                    st.error.get_or_insert(ExploreError::Worker(why));
                }
            }
        });
        let mut st = state.into_inner().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = st.error.take() {
            return Err(e);
        }
        st.file
            .take()
            .ok_or_else(|| ExploreError::Worker("the results were lost".into()))
    }

    /// The work for `todo`, each point's pieces before the next point's, so points finish
    /// (and are written) in order while both cores stay busy.
    fn tasks(&self, todo: &[DesignPoint]) -> VecDeque<Task> {
        let mut q = VecDeque::new();
        let mut hw: Vec<HwKey> = Vec::new();
        let mut tk: Vec<TrainKey> = Vec::new();
        for p in todo {
            if !hw.contains(&p.hardware_key()) {
                hw.push(p.hardware_key());
                q.push_back(Task::Synth(*p));
            }
            if !tk.contains(&p.training_key()) {
                tk.push(p.training_key());
                q.extend(self.seeds.iter().map(|&s| Task::Train(*p, s)));
            }
            q.push_back(Task::Point(*p));
        }
        q
    }
}

struct Ctx<'a> {
    sweep: &'a Sweep<'a>,
    data: &'a Dataset,
    state: &'a Mutex<State>,
    wake: &'a Condvar,
    tables: &'a Tables,
    cached: &'a Cached<'a>,
    progress: &'a dyn Progress,
}

impl Ctx<'_> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One worker: takes the first piece of work whose inputs are done until none is left
    /// (or another worker failed).
    fn work(&self) {
        loop {
            let task = {
                let mut st = self.lock();
                loop {
                    if st.error.is_some() {
                        return;
                    }
                    let seeds = &self.sweep.seeds;
                    let next = st.queue.iter().position(|t| st.ready(t, seeds));
                    if let Some(t) = next.and_then(|i| st.queue.remove(i)) {
                        st.in_flight += 1;
                        break t;
                    }
                    if st.queue.is_empty() && st.in_flight == 0 {
                        return;
                    }
                    st = self.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
                }
            };
            let result = self.run(task);
            let mut st = self.lock();
            st.in_flight -= 1;
            if let Err(e) = result {
                st.error.get_or_insert(e);
            }
            self.wake.notify_all();
        }
    }

    fn run(&self, task: Task) -> Result<(), ExploreError> {
        match task {
            Task::Synth(p) => {
                // A design the synthesiser has no figures for has no resources: never those
                // of another design.
                let (r, how) = if self.no_resources(&p).is_none() {
                    let (r, was_cached) = self.cached.get(&p)?;
                    (Some(r), if was_cached { " (cached)" } else { "" })
                } else {
                    (None, " (n/a)")
                };
                self.lock().synth.insert(p.hardware_key(), r);
                self.progress.task_done(&format!(
                    "synthesis {0}x{0} fm{1} w{2}{3}{how}",
                    p.array,
                    p.fm_depth,
                    p.word_bits,
                    if p.dsp_pack { " pack" } else { "" }
                ));
            }
            Task::Train(p, seed) => {
                let r = cycles::train_point(
                    (&self.sweep.base, self.sweep.start.as_ref()),
                    self.data,
                    &p,
                    seed,
                )?;
                self.lock().runs.insert((p.training_key(), seed), r);
                self.progress
                    .task_done(&format!("train {} seed {seed}", p.label()));
            }
            Task::Point(p) => {
                let r = self.point(&p)?;
                let mut st = self.lock();
                let file = st
                    .file
                    .as_mut()
                    .ok_or(ExploreError::Worker("no file".into()))?;
                file.points.retain(|x| x.point != p);
                file.points.push(r.clone());
                file.points.sort_by_key(|x| x.point.order());
                let json = serde_json::to_string_pretty(&*file).unwrap_or_default();
                let out = &self.sweep.out;
                systole_train::write_atomic(&out.join(report::JSON), json.as_bytes())?;
                systole_train::write_atomic(&out.join(report::CSV), report::csv(file).as_bytes())?;
                drop(st);
                self.progress.point_done(&r);
                self.progress.task_done(&format!("point {}", p.label()));
            }
        }
        Ok(())
    }

    /// Why `p` has no resources: the synthesiser has no figures for it; `None` when it is
    /// synthesised.
    fn no_resources(&self, p: &DesignPoint) -> Option<String> {
        self.cached.inner.cannot(p)
    }

    /// Cycles (with the check on the Verilated array), accuracy and fits of a point whose
    /// synthesis and training runs are done.
    fn point(&self, p: &DesignPoint) -> Result<PointResult, ExploreError> {
        let sw = self.sweep;
        let (resources, runs) = {
            let st = self.lock();
            let runs: Vec<SeedRun> = sw
                .seeds
                .iter()
                .filter_map(|s| st.runs.get(&(p.training_key(), *s)).cloned())
                .collect();
            (st.synth.get(&p.hardware_key()).copied(), runs)
        };
        let resources = resources.ok_or(ExploreError::Worker("synthesis missing".into()))?;
        let no_hardware = Resources::default();
        let table = {
            let mut t = self.tables.lock().unwrap_or_else(PoisonError::into_inner);
            match t.get(&(p.array, p.fm_depth)) {
                Some(x) => x.clone(),
                None => {
                    let x = Arc::new(Mutex::new(CycleTable::new(p)?));
                    t.insert((p.array, p.fm_depth), x.clone());
                    x
                }
            }
        };
        let mut table = table.lock().unwrap_or_else(PoisonError::into_inner);
        let sample = cycles::sample_check(
            (&sw.base, sw.start.as_ref()),
            self.data,
            p,
            sw.seeds[0],
            sw.sample_steps,
            &mut table,
        )?;
        let mut total = 0u64;
        for r in &runs {
            total = total.saturating_add(table.total(&r.ops)?);
        }
        drop(table);
        let epochs = (sw.base.epochs as u64)
            .saturating_mul(runs.len() as u64)
            .max(1);
        let cycles_per_epoch = total / epochs;
        let accs: Vec<f32> = runs.iter().map(|r| r.test_acc).collect();
        let (acc_mean, acc_std) = report::mean_std(&accs);
        let boards = sw
            .boards
            .iter()
            .map(|b| match &resources {
                Some(r) => synth::fit(b, p, r, cycles_per_epoch),
                None => synth::BoardFit {
                    note: format!(
                        "not available: {}",
                        self.no_resources(p).unwrap_or_default()
                    ),
                    fits: false,
                    ..synth::fit(b, p, &no_hardware, cycles_per_epoch)
                },
            })
            .collect();
        Ok(PointResult {
            point: *p,
            acc_per_seed: accs,
            acc_mean,
            acc_std,
            cycles_per_epoch,
            sample,
            resources,
            boards,
        })
    }
}
