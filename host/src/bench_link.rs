//! `systole bench --link`: the same digits-MLP training steps three ways in one run, the
//! parameters checked equal: the whole step on the simulated training SoC image (the state
//! and data uploaded, `RUN_STEPS`, the state read back: `systole_train::board_bench`), the
//! host-driven step on the same image (each product one `MATMUL` request on tensors uploaded
//! once: the board operations) and over `bridge:` on the simulated bridge image (the host
//! drives every bus access). Per step: the link's counts, the firmware's CPU cycles beside the
//! array's, a projected real-board epoch; and the 20-epoch demo with the board step's
//! one-time costs (state and data-set upload, each epoch's state read-back) amortised.

use std::fmt;
use std::time::Duration;
use systole_core::{ArrayConfig, Rounding};
use systole_device::board_sim::SimBoard;
use systole_device::serial::{SerialDevice, DEFAULT_RETRIES};
use systole_device::{Device, DeviceStats};

use systole_train::arith::TensorState;
use systole_train::board_bench::{combine, difference, measure_steps, BoardSteps};
use systole_train::data::{self, Dataset};
use systole_train::model::ModelSpec;
use systole_train::{Precision, TrainConfig, TrainError, Trainer};

/// Latency a projection charges per round trip (a USB serial adapter's typical turnaround).
pub const ROUND_TRIP_SECONDS: f64 = 1e-3;
/// Per-try timeout of the serial link to the simulated SoC (wall time; see [`run`]).
pub const SIMULATION_TIMEOUT: Duration = Duration::from_secs(10);
/// Line rates the projection is made for.
pub const PROJECTED_BAUDS: [u32; 2] = [115_200, 3_000_000];
/// Bits on the line per byte (8N1: a start bit, 8 data bits, a stop bit).
const BITS_PER_BYTE: f64 = 10.0;

/// One path's measured steps: the sum of their counters.
#[derive(Clone, Debug)]
pub struct LinkRun {
    /// The device's name.
    pub device: String,
    /// The steps' counters added up.
    pub total: DeviceStats,
    /// Steps measured.
    pub steps: usize,
}

impl LinkRun {
    /// The mean of a counter over the steps.
    pub fn mean(&self, counter: impl Fn(&DeviceStats) -> u64) -> f64 {
        counter(&self.total) as f64 / self.steps.max(1) as f64
    }

    /// Projected seconds per step at `baud` on a board clocked at `clock_hz` (see [`seconds`]).
    pub fn step_seconds(&self, baud: u32, clock_hz: u32) -> f64 {
        seconds(&self.total, baud, clock_hz) / self.steps.max(1) as f64
    }
}

/// Projected real-board seconds of the traffic and work `s` counts at `baud` on a board
/// clocked at `clock_hz`: `10·bytes/baud + round_trips·1 ms + (array busy + firmware
/// cycles)/clock`.
pub fn seconds(s: &DeviceStats, baud: u32, clock_hz: u32) -> f64 {
    let bytes = (s.bytes_to_device + s.bytes_from_device) as f64;
    let cycles = (s.mac_cycles + s.firmware_cycles) as f64;
    BITS_PER_BYTE * bytes / f64::from(baud)
        + s.round_trips as f64 * ROUND_TRIP_SECONDS
        + cycles / f64::from(clock_hz)
}

/// The measurement: the three paths and what a projection needs.
#[derive(Clone, Debug)]
pub struct LinkBench {
    /// Over `serial:` on the training SoC image, the whole step on the board.
    pub board: BoardSteps,
    /// Over `serial:` on the training SoC image, the step driven by the host (board operations).
    pub soc: LinkRun,
    /// Over `bridge:` on the bridge image.
    pub bridge: LinkRun,
    /// Training steps of one epoch (the test pass is not projected).
    pub steps_per_epoch: usize,
    /// Clock of the board projected for (the Arty A7's logic clock).
    pub clock_hz: u32,
    /// Array size of both images.
    pub size: usize,
    /// Mini-batch size.
    pub batch: usize,
}

/// Epochs of the digits demo (`./x demo`) the projection is made for.
pub const DEMO_EPOCHS: usize = 20;

impl LinkBench {
    /// The board step's per-step counters: its share of the batch uploads and the runs.
    pub fn board_run(&self) -> LinkRun {
        LinkRun {
            device: "board step".into(),
            total: combine(&self.board.batch_uploads, &self.board.runs, |a, b| a + b),
            steps: self.board.steps,
        }
    }

    /// Projected seconds of the digits demo at `baud`, board step: (epoch of steps, per-epoch
    /// evaluation: the board's `EVALUATE` (its answer and cycles), else the parameters back for
    /// the host's, or the whole state on older firmware; one-time: the probe step, the state,
    /// data-set and test-split uploads, the whole state back at the end).
    pub fn board_demo_seconds(&self, baud: u32) -> (f64, f64, f64) {
        let b = &self.board;
        let s = |stats: &DeviceStats| seconds(stats, baud, self.clock_hz);
        let epoch =
            self.steps_per_epoch as f64 * self.board_run().step_seconds(baud, self.clock_hz);
        let (read, end) = match (b.evaluates, b.params_read.round_trips) {
            (true, _) => (s(&b.evaluation), s(&b.state_read)),
            (false, 0) => (s(&b.state_read), 0.0),
            (false, _) => (s(&b.params_read), s(&b.state_read)),
        };
        let once = end + s(&b.probe) + s(&b.state_upload) + s(&b.data_upload) + s(&b.test_upload);
        (epoch, read, once)
    }
}

/// The run both devices train: the digits MLP 64-`hidden`-10, fixed16 stochastic, seed 1.
pub fn digits_config(size: usize, batch: usize, hidden: usize) -> TrainConfig {
    let (lr, lr_decay) = systole_train::data::DatasetSpec::Digits.default_rate();
    TrainConfig {
        model: ModelSpec::Mlp {
            hidden: vec![hidden],
        },
        dataset: systole_train::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
        train_limit: None,
        epochs: 1,
        batch,
        lr,
        lr_decay,
        momentum: 0.9,
        seed: 1,
        precision: Precision::Fixed16,
        rounding: Rounding::Stochastic,
        array: size,
        word_bits: 16,
        master_bits: 16,
        shards: None,
        microbatches: None,
    }
}

/// Trains the first `steps` steps of `cfg` on the device `spec` and returns each step's
/// counters and the parameters reached (so two devices can be shown to have run the same run).
pub fn measure(
    dev: Box<dyn Device>,
    cfg: &TrainConfig,
    data: &Dataset,
    steps: usize,
) -> Result<(LinkRun, Vec<TensorState>), TrainError> {
    let device = dev.name();
    let arith = systole_train::on_device(dev, cfg.rounding, cfg.seed, false);
    let mut t = Trainer::new(cfg.clone(), data, arith)?;
    let before = t.arith.products().device().stats();
    t.train_steps(data, steps, &mut |_| {})?;
    let total = difference(&t.arith.products().device().stats(), &before);
    let params = t.param_states();
    Ok((
        LinkRun {
            device,
            total,
            steps,
        },
        params,
    ))
}

/// Opens a new simulated training SoC image (the training firmware on the Verilated CPU) on
/// a pty over `serial:`.
fn training_soc() -> anyhow::Result<(SimBoard, SerialDevice, usize)> {
    let (board, config) =
        SimBoard::spawn_soc_training_image(systole_core::numeric::WORD_BITS, None)?;
    let mut dev = SerialDevice::open(&board.path().to_string_lossy(), config)?;
    // A full 1 KB batch frame costs the simulated SoC about 230k cycles on its line and in the
    // firmware, a fair part of the default 500 ms at 1-2M simulated cycles a second on a busy
    // machine: a resend there would count a frame that was never lost.
    dev.set_retry_policy(SIMULATION_TIMEOUT, DEFAULT_RETRIES);
    Ok((board, dev, config.size))
}

/// Starts the simulated images on ptys and trains the first `steps` steps of the digits MLP
/// three ways: the whole step on the training SoC image, the host-driven step on a second
/// one (board operations), and the host-driven step over the bridge image; checks all three
/// reached the same parameters.
pub fn run(steps: usize, batch: usize, hidden: usize) -> anyhow::Result<LinkBench> {
    let data = data::digits::load()?;
    let (board_sim, mut board_dev, size) = training_soc()?;
    let cfg = digits_config(size, batch, hidden);
    let board = measure_steps(&mut board_dev, &cfg, &data, steps)?;
    drop(board_dev);
    drop(board_sim);
    let (soc_sim, soc_dev, _) = training_soc()?;
    let (soc, soc_params) = measure(Box::new(soc_dev), &cfg, &data, steps)?;
    drop(soc_sim);
    let bridge_board = SimBoard::spawn_bridge_image()?;
    let bridge_spec = format!("bridge:{}", bridge_board.path().display());
    let bridge_dev = systole_device::open(&bridge_spec, ArrayConfig::square(size))?;
    let (bridge, bridge_params) = measure(bridge_dev, &cfg, &data, steps)?;
    agree(&board.params, &soc_params, &bridge_params, steps)?;
    Ok(LinkBench {
        board,
        soc,
        bridge,
        steps_per_epoch: data.train.len().div_ceil(batch),
        clock_hz: systole_boards::find("arty-a7-35")?.logic_clock_hz(),
        size,
        batch,
    })
}

/// The three paths ran the same run: their parameters are equal, else which differ.
pub fn agree(
    board: &[TensorState],
    soc: &[TensorState],
    bridge: &[TensorState],
    steps: usize,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        soc == bridge,
        "the SoC (host step) and the bridge reached different parameters after {steps} steps: the devices disagree"
    );
    anyhow::ensure!(
        board == soc,
        "the step on the board and the host-driven step reached different parameters after {steps} steps: the board's step disagrees"
    );
    Ok(())
}

impl fmt::Display for LinkBench {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let board = self.board_run();
        self.write_table(f, &board)?;
        self.write_board_step(f, &board)?;
        self.write_demo(f, &board)
    }
}

impl LinkBench {
    /// The three paths' counters per step and their projected epochs, one row each.
    fn write_table(&self, f: &mut fmt::Formatter<'_>, board: &LinkRun) -> fmt::Result {
        let (n, b) = (self.size, &self.board);
        let runs = [board, &self.soc, &self.bridge];
        writeln!(
            f,
            "digits MLP, batch {}, {n}x{n} array, {} steps, one run; per step (mean):",
            self.batch, b.steps
        )?;
        writeln!(
            f,
            "| per step | board step (training SoC) | host step (training SoC, board operations) | bridge |"
        )?;
        writeln!(f, "|---|--:|--:|--:|")?;
        let row = |f: &mut fmt::Formatter<'_>, name: &str, cell: &dyn Fn(&LinkRun) -> String| {
            let c: Vec<String> = runs.iter().map(|r| cell(r)).collect();
            writeln!(f, "| {name} | {} |", c.join(" | "))
        };
        let counter = |c: fn(&DeviceStats) -> u64| move |r: &LinkRun| format!("{:.0}", r.mean(c));
        row(
            f,
            "link bytes",
            &counter(|s| s.bytes_to_device + s.bytes_from_device),
        )?;
        row(
            f,
            "frames (bridge: bus transactions)",
            &counter(|s| s.frames),
        )?;
        row(f, "round trips", &counter(|s| s.round_trips))?;
        row(f, "resends", &counter(|s| s.resends))?;
        row(
            f,
            "firmware CPU cycles",
            &|r| match r.total.firmware_cycles {
                0 => "-".into(),
                _ => format!("{:.0}", r.mean(|s| s.firmware_cycles)),
            },
        )?;
        row(f, "of them outside the array's MAC cycles", &|r| {
            let fw = r.mean(|s| s.firmware_cycles);
            match r.total.firmware_cycles {
                0 => "-".into(),
                _ => format!(
                    "{:.1}%",
                    100.0 * (fw - r.mean(|s| s.mac_cycles)).max(0.0) / fw
                ),
            }
        })?;
        row(
            f,
            "array cycles the drivers' runs span",
            &counter(|s| s.cycles),
        )?;
        row(f, "array MAC cycles", &counter(|s| s.mac_cycles))?;
        for baud in PROJECTED_BAUDS {
            let name = format!(
                "projected epoch at {baud} baud ({} steps)",
                self.steps_per_epoch
            );
            row(f, &name, &|r| {
                let epoch = self.steps_per_epoch as f64 * r.step_seconds(baud, self.clock_hz);
                format!("{epoch:.1} s")
            })?;
        }
        writeln!(
            f,
            "(projection: 10*bytes/baud + round trips*1 ms + (array MAC + firmware cycles)/{} MHz; no test pass)",
            self.clock_hz / 1_000_000
        )?;
        Ok(())
    }

    /// The board step against the bridge: bytes and round trips, the data's traffic, the fit
    /// and the one-time costs.
    fn write_board_step(&self, f: &mut fmt::Formatter<'_>, board: &LinkRun) -> fmt::Result {
        let b = &self.board;
        let bytes = |r: &LinkRun| r.mean(|s| s.bytes_to_device + s.bytes_from_device);
        let trips = |r: &LinkRun| r.mean(|s| s.round_trips);
        for (label, r) in [("board step", board), ("host step", &self.soc)] {
            let xb = bytes(&self.bridge) / bytes(r).max(1e-9);
            let xt = trips(&self.bridge) / trips(r).max(1e-9);
            writeln!(
                f,
                "{label} vs bridge: {xb:.1}x fewer bytes (goal 10x: {}), {xt:.1}x fewer round trips (goal 50x: {})",
                met(xb >= 10.0),
                met(xt >= 50.0)
            )?;
        }
        let own = (self.batch * b.image_bytes) as f64;
        if b.resident {
            writeln!(
                f,
                "board step: data set resident ({} images at {} bits a pixel, {} B records uploaded once); data bytes per step 0, the rest is RUN_STEPS and its answer",
                b.images,
                b.bits,
                b.images * b.image_bytes
            )?;
        } else {
            let up = (b.batch_uploads.bytes_to_device + b.batch_uploads.bytes_from_device) as f64
                / b.steps as f64;
            writeln!(
                f,
                "board step: data set batch by batch (it does not fit the heap beside the step; {} batches a request): {up:.0} bytes of uploads a step + {:.0} of RUN_STEPS = {:.2}x the batch's own {own:.0} bytes (goal 1.25x: {})",
                b.per_request,
                bytes(board) - up,
                bytes(board) / own,
                met(bytes(board) <= 1.25 * own)
            )?;
        }
        writeln!(f, "board step, the fit: {}", b.fit)?;
        let total = |s: &DeviceStats| s.bytes_to_device + s.bytes_from_device;
        writeln!(
            f,
            "board step, one-time: the probe step measuring the step's heap {} bytes, {} round trips; state up {} bytes, {} round trips; data set up {} bytes, {} round trips; test split up {} bytes, {} round trips; whole state back {} bytes, {} round trips (each epoch on older firmware); per epoch: the board's evaluation {} bytes, {} round trips, {} CPU cycles; or the parameters back for the host's {} bytes, {} round trips",
            total(&b.probe),
            b.probe.round_trips,
            total(&b.state_upload),
            b.state_upload.round_trips,
            total(&b.data_upload),
            b.data_upload.round_trips,
            total(&b.test_upload),
            b.test_upload.round_trips,
            total(&b.state_read),
            b.state_read.round_trips,
            total(&b.evaluation),
            b.evaluation.round_trips,
            b.evaluation.firmware_cycles,
            total(&b.params_read),
            b.params_read.round_trips
        )?;
        Ok(())
    }

    /// The demo's projected time at each baud rate.
    fn write_demo(&self, f: &mut fmt::Formatter<'_>, board: &LinkRun) -> fmt::Result {
        let b = &self.board;
        let e = DEMO_EPOCHS as f64;
        let steps = self.steps_per_epoch as f64;
        for baud in PROJECTED_BAUDS {
            let (epoch, read, once) = self.board_demo_seconds(baud);
            let cpu =
                steps * board.mean(|s| s.firmware_cycles + s.mac_cycles) / f64::from(self.clock_hz);
            let demo = e * (epoch + read) + once;
            let goal = if baud == PROJECTED_BAUDS[0] {
                format!(" (goal under 60 s: {})", met(demo < 60.0))
            } else {
                String::new()
            };
            writeln!(
                f,
                "{DEMO_EPOCHS}-epoch demo at {baud} baud, board step: {demo:.0} s = {DEMO_EPOCHS} x ({epoch:.1} s of steps, of them {cpu:.1} s the board's cycles, + {read:.2} s {}) + {once:.2} s uploads{goal}; host step {:.0} s, bridge {:.0} s",
                match b.evaluates {
                    true => "the board's evaluation",
                    false => "parameters back for the host's evaluation",
                },
                e * steps * self.soc.step_seconds(baud, self.clock_hz),
                e * steps * self.bridge.step_seconds(baud, self.clock_hz),
            )?;
        }
        if !b.resident {
            let (upload, epoch) = self.resident_estimate(PROJECTED_BAUDS[0]);
            writeln!(
                f,
                "board step with the data set resident (a board with more RAM; estimated from the batch uploads' bytes and frames per image): {DEMO_EPOCHS}-epoch demo at {} baud {:.0} s = {DEMO_EPOCHS} x {epoch:.1} s + {upload:.1} s uploads",
                PROJECTED_BAUDS[0],
                e * epoch + upload
            )?;
        }
        Ok(())
    }
}

impl LinkBench {
    /// Batch by batch measured, the board step as if the data set were resident: the
    /// steps' runs alone (each epoch's state back included), the state and the whole set
    /// uploaded once at the batch uploads' cost per image. Seconds (upload, epoch) at `baud`.
    pub fn resident_estimate(&self, baud: u32) -> (f64, f64) {
        let b = &self.board;
        let shown = (b.steps * self.batch).min(b.images).max(1) as u64;
        let images = b.images as u64;
        let set = combine(&b.batch_uploads, &b.batch_uploads, |a, _| {
            a * images / shown
        });
        let upload =
            seconds(&b.state_upload, baud, self.clock_hz) + seconds(&set, baud, self.clock_hz);
        let per_step = seconds(&b.runs, baud, self.clock_hz) / b.steps.max(1) as f64;
        let epoch =
            self.steps_per_epoch as f64 * per_step + seconds(&b.state_read, baud, self.clock_hz);
        (upload, epoch)
    }
}

fn met(yes: bool) -> &'static str {
    if yes {
        "met"
    } else {
        "NOT met"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(last: i16) -> Vec<TensorState> {
        vec![TensorState::Fixed {
            rows: 1,
            cols: 2,
            frac: 14,
            data: vec![3, last],
        }]
    }

    /// The bench reports nothing unless the three paths ran the same run.
    #[test]
    fn the_three_paths_must_reach_the_same_parameters() {
        let (same, other) = (params(1), params(2));
        assert!(agree(&same, &same, &same, 3).is_ok());
        let e = agree(&other, &same, &same, 3).unwrap_err().to_string();
        assert!(e.contains("the board's step disagrees"), "{e}");
        let e = agree(&same, &same, &other, 3).unwrap_err().to_string();
        assert!(e.contains("the bridge"), "{e}");
    }

    /// The demo's projection: the steps per epoch, the state back each epoch, the uploads once.
    #[test]
    fn the_demo_amortises_the_one_time_costs() {
        let stats = |bytes: u64, trips: u64, cycles: u64| DeviceStats {
            bytes_to_device: bytes,
            round_trips: trips,
            firmware_cycles: cycles,
            ..DeviceStats::default()
        };
        let bench = LinkBench {
            board: BoardSteps {
                steps: 2,
                resident: false,
                per_request: 2,
                images: 64,
                image_bytes: 65,
                bits: 8,
                fit: String::new(),
                probe: stats(0, 0, 0),
                state_upload: stats(11_520, 10, 0),
                data_upload: stats(0, 0, 0),
                batch_uploads: stats(2 * 2_304, 4, 0),
                runs: stats(0, 2, 200_000_000),
                state_read: stats(1_152, 1, 0),
                params_read: DeviceStats::default(),
                evaluates: false,
                test_upload: DeviceStats::default(),
                evaluation: DeviceStats::default(),
                eval: None,
                params: Vec::new(),
                fracs: Default::default(),
            },
            soc: LinkRun {
                device: "soc".into(),
                total: DeviceStats::default(),
                steps: 2,
            },
            bridge: LinkRun {
                device: "bridge".into(),
                total: DeviceStats::default(),
                steps: 2,
            },
            steps_per_epoch: 10,
            clock_hz: 100_000_000,
            size: 4,
            batch: 32,
        };
        // A step: 2,304 bytes at 115200 baud (0.2 s), 3 round trips (3 ms), 1 s of cycles.
        let (epoch, read, once) = bench.board_demo_seconds(115_200);
        assert!((epoch - 10.0 * 1.203).abs() < 1e-9, "{epoch}");
        assert!((read - (0.1 + 0.001)).abs() < 1e-9, "{read}");
        assert!((once - (1.0 + 0.01)).abs() < 1e-9, "{once}");
        // Firmware that reads the parameters alone: they come back each epoch, the whole
        // state once at the end, and the probe step is paid once.
        let mut parts = bench.clone();
        parts.board.params_read = stats(576, 1, 0);
        parts.board.probe = stats(1_152, 2, 100_000_000);
        let (_, read, once) = parts.board_demo_seconds(115_200);
        assert!((read - (0.05 + 0.001)).abs() < 1e-9, "{read}");
        assert!(
            (once - (1.0 + 0.01 + 0.101 + 0.102 + 1.0)).abs() < 1e-9,
            "{once}"
        );
        // Firmware that evaluates: its answer and cycles each epoch, the test split up once.
        let mut evaluates = parts.clone();
        evaluates.board.evaluates = true;
        evaluates.board.evaluation = stats(0, 1, 50_000_000);
        evaluates.board.test_upload = stats(1_152, 2, 0);
        let (_, read, once2) = evaluates.board_demo_seconds(115_200);
        assert!((read - (0.5 + 0.001)).abs() < 1e-9, "{read}");
        assert!((once2 - (once + 0.102)).abs() < 1e-9, "{once2}");
    }
}
