//! `systole bench --link`: the same digits-MLP training steps once over `serial:` on the
//! simulated SoC image (the firmware on its CPU runs each product as one `MATMUL` request on
//! tensors uploaded once: the board operations) and once over `bridge:` on the simulated
//! bridge image (the host drives every bus access), with the link's counts per step, their
//! ratio, the firmware's CPU cycles per product beside the array's and a projected real-board
//! time per epoch.

use std::fmt;
use std::time::Duration;
use systole_core::{ArrayConfig, Rounding};
use systole_device::board_sim::SimBoard;
use systole_device::serial::{SerialDevice, DEFAULT_RETRIES};
use systole_device::{Device, DeviceStats};
use systole_train::arith::TensorState;
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

/// One device's measured steps.
#[derive(Clone, Debug)]
pub struct LinkRun {
    /// The device's name.
    pub device: String,
    /// Counters of each training step (the difference of the device's counters around it).
    pub steps: Vec<DeviceStats>,
}

impl LinkRun {
    /// The mean of a counter over the steps.
    pub fn mean(&self, counter: impl Fn(&DeviceStats) -> u64) -> f64 {
        self.steps.iter().map(&counter).sum::<u64>() as f64 / self.steps.len().max(1) as f64
    }

    /// Projected seconds per step at `baud` on a board clocked at `clock_hz`:
    /// `10·bytes/baud + round_trips·1 ms + (array busy + firmware cycles)/clock`.
    pub fn step_seconds(&self, baud: u32, clock_hz: u32) -> f64 {
        let bytes = self.mean(|s| s.bytes_to_device + s.bytes_from_device);
        let cycles = self.mean(|s| s.mac_cycles + s.firmware_cycles);
        BITS_PER_BYTE * bytes / f64::from(baud)
            + self.mean(|s| s.round_trips) * ROUND_TRIP_SECONDS
            + cycles / f64::from(clock_hz)
    }
}

/// The measurement: the SoC run, the bridge run and what a projection needs.
#[derive(Clone, Debug)]
pub struct LinkBench {
    /// Over `serial:` on the SoC image.
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

/// The run both devices train: the digits MLP 64-`hidden`-10, fixed16 stochastic, seed 1.
pub fn digits_config(size: usize, batch: usize, hidden: usize) -> TrainConfig {
    let (lr, lr_decay) = data::default_rate("digits");
    TrainConfig {
        model: ModelSpec::Mlp {
            hidden: vec![hidden],
        },
        dataset: "digits".into(),
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
    let mut last = t.arith.products().device().stats();
    let mut per_step = Vec::with_capacity(steps);
    t.train_steps(data, steps, &mut |a| {
        let now = a.products().device().stats();
        per_step.push(difference(&now, &last));
        last = now;
    })?;
    let params = t.param_states();
    Ok((
        LinkRun {
            device,
            steps: per_step,
        },
        params,
    ))
}

/// `now - before`, counter by counter.
fn difference(now: &DeviceStats, before: &DeviceStats) -> DeviceStats {
    DeviceStats {
        ops: now.ops - before.ops,
        macs: now.macs - before.macs,
        cycles: now.cycles - before.cycles,
        mac_cycles: now.mac_cycles - before.mac_cycles,
        bytes_to_device: now.bytes_to_device - before.bytes_to_device,
        bytes_from_device: now.bytes_from_device - before.bytes_from_device,
        frames: now.frames - before.frames,
        round_trips: now.round_trips - before.round_trips,
        resends: now.resends - before.resends,
        port_bytes: now.port_bytes - before.port_bytes,
        tensor_bytes: now.tensor_bytes - before.tensor_bytes,
        firmware_cycles: now.firmware_cycles - before.firmware_cycles,
        board_ops: now.board_ops - before.board_ops,
        board_steps: now.board_steps - before.board_steps,
    }
}

/// Starts both simulated images on ptys, trains `steps` steps of the digits MLP on each and
/// checks both reached the same parameters.
pub fn run(steps: usize, batch: usize, hidden: usize) -> anyhow::Result<LinkBench> {
    let data = data::digits::load()?;
    let (soc_board, soc_config) = SimBoard::spawn_soc_image()?;
    let cfg = digits_config(soc_config.size, batch, hidden);
    let mut soc_dev = SerialDevice::open(&soc_board.path().to_string_lossy(), soc_config)?;
    // A full 1 KB batch frame costs the simulated SoC about 230k cycles on its line and in the
    // firmware, a fair part of the default 500 ms at 1-2M simulated cycles a second on a busy
    // machine: a resend there would count a frame that was never lost.
    soc_dev.set_retry_policy(SIMULATION_TIMEOUT, DEFAULT_RETRIES);
    let (soc, soc_params) = measure(Box::new(soc_dev), &cfg, &data, steps)?;
    drop(soc_board);
    let bridge_board = SimBoard::spawn_bridge_image()?;
    let bridge_spec = format!("bridge:{}", bridge_board.path().display());
    let bridge_dev = systole_device::open(&bridge_spec, ArrayConfig::square(soc_config.size))?;
    let (bridge, bridge_params) = measure(bridge_dev, &cfg, &data, steps)?;
    anyhow::ensure!(
        soc_params == bridge_params,
        "the SoC and the bridge reached different parameters after {steps} steps: the devices disagree"
    );
    Ok(LinkBench {
        soc,
        bridge,
        steps_per_epoch: data.train.len().div_ceil(batch),
        clock_hz: systole_boards::find("arty-a7-35")?.logic_clock_hz(),
        size: soc_config.size,
        batch,
    })
}

impl fmt::Display for LinkBench {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.size;
        writeln!(
            f,
            "digits MLP, batch {}, {n}x{n} array, {} steps; per step (mean):",
            self.batch,
            self.soc.steps.len()
        )?;
        writeln!(
            f,
            "{:<24} {:>9} {:>9} {:>7} {:>7} {:>7} {:>8} {:>10} {:>9}",
            "link",
            "bytes",
            "port B",
            "frames",
            "trips",
            "resends",
            "array cy",
            "fw cycles",
            "fw/array"
        )?;
        let links = [
            ("serial: SoC board ops", &self.soc),
            ("bridge: host-driven", &self.bridge),
        ];
        for (label, r) in links {
            let fw = r.mean(|s| s.firmware_cycles);
            let array = r.mean(|s| s.mac_cycles);
            let overhead = if fw > 0.0 {
                format!("{:.0}%", 100.0 * fw / array.max(1.0))
            } else {
                "-".into()
            };
            writeln!(
                f,
                "{label:<24} {:>9.0} {:>9.0} {:>7.0} {:>7.0} {:>7.0} {:>8.0} {fw:>10.0} {overhead:>9}",
                r.mean(|s| s.bytes_to_device + s.bytes_from_device),
                r.mean(|s| s.port_bytes),
                r.mean(|s| s.frames),
                r.mean(|s| s.round_trips),
                r.mean(|s| s.resends),
                array,
            )?;
        }
        let ratio = |c: fn(&DeviceStats) -> u64| self.soc.mean(c) / self.bridge.mean(c).max(1e-9);
        let bytes = ratio(|s| s.bytes_to_device + s.bytes_from_device);
        let trips = ratio(|s| s.round_trips);
        writeln!(
            f,
            "SoC/bridge: bytes {bytes:.3} ({:.2}x fewer; goal 10x), frames {:.3}, round trips {trips:.3} ({:.2}x fewer; goal 50x)",
            1.0 / bytes,
            ratio(|s| s.frames),
            1.0 / trips
        )?;
        let ops = self.soc.mean(|s| s.ops).max(1.0);
        writeln!(
            f,
            "per product on the SoC: firmware {:.0} CPU cycles (upload, driver, answer), the array's driver run {:.0} cycles of which {:.0} MAC cycles",
            self.soc.mean(|s| s.firmware_cycles) / ops,
            self.soc.mean(|s| s.cycles) / ops,
            self.soc.mean(|s| s.mac_cycles) / ops
        )?;
        let tensors = self.soc.mean(|s| s.tensor_bytes);
        let ops = self.soc.mean(|s| s.ops);
        let bridge_bytes = self
            .bridge
            .mean(|s| s.bytes_to_device + s.bytes_from_device);
        writeln!(
            f,
            "the tensors of a step, operation by operation (operands and result): {tensors:.0} bytes in {ops:.0} operations ({:.1}x fewer than the bridge); the SoC sends an operand already on the board (X, H1, dZ2, W2 are used twice) once; 10x fewer bytes than the bridge needs the weights kept and updated on the board (issue 17)",
            bridge_bytes / tensors.max(1.0),
        )?;
        writeln!(
            f,
            "projected epoch ({} steps, test pass not included) on a {} MHz board: 10*bytes/baud + round trips*1 ms + (array + firmware cycles)/clock",
            self.steps_per_epoch,
            self.clock_hz / 1_000_000
        )?;
        for baud in PROJECTED_BAUDS {
            let epoch =
                |r: &LinkRun| self.steps_per_epoch as f64 * r.step_seconds(baud, self.clock_hz);
            writeln!(
                f,
                "  at {baud} baud: SoC {:.1} s, bridge {:.1} s",
                epoch(&self.soc),
                epoch(&self.bridge)
            )?;
        }
        Ok(())
    }
}
