//! [`BusDevice`]: the one backend that runs the firmware's drivers over a [`Link`], an
//! [`AcceleratorBus`](systole_core::AcceleratorBus) to an accelerator. The verilator, serial and bridge backends are its
//! instances; each contributes only its bus and how that bus opens.

use super::conv_unit::{self, ConvOperands};
use super::{Device, DeviceError, DeviceStats, DeviceTensor, HostTensors, TensorRoom};
use systole_core::{regmap, ArrayConfig};
use systole_firmware::conv::{conv2d, ConvOp};
use systole_firmware::driver::{self, DriverError, DriverStats, Transposed};
use systole_golden::conv::Conv2dGeom;
use systole_golden::tensor::QMatrix;
use systole_golden::OutputSpec;

mod kept;
mod link;
pub use link::{BoardOps, KeptProduct, KeptStore, Link, Meter, Traffic};

/// A device that runs every product and convolution through the firmware's drivers on `L`.
pub struct BusDevice<L> {
    pub(crate) config: ArrayConfig,
    pub(crate) bus: L,
    /// Where the device is (a port path), if anywhere but this process.
    pub(crate) at: Option<String>,
    pub(crate) stats: DeviceStats,
    /// The board's firmware cycles at the end of the last operation (`firmware_cycles`).
    firmware_mark: Option<u64>,
    /// The operation being run went to the board whole (a board operation).
    on_board: bool,
    /// The kept tensors' table (their words too, when the link keeps none).
    pub(crate) tensors: HostTensors,
}

impl<L: Link> BusDevice<L>
where
    L::Error: std::error::Error + Send + Sync + 'static,
{
    /// A device on `link`, a transport to an accelerator, called `at` in messages: checks the
    /// accelerator behind it is a systole array of `config` (its `ID` and `CONFIG` registers).
    /// A new link's constructor ends here (docs/EXTENDING.md, "A new device backend").
    pub fn on_link(config: ArrayConfig, mut link: L, at: &str) -> Result<Self, DeviceError> {
        config.validate()?;
        let transport = |e: L::Error| DeviceError::Transport {
            device: at.to_string(),
            source: Box::new(e),
        };
        check_id(at, link.read_reg(regmap::ID).map_err(transport)?)?;
        let word = link.read_reg(regmap::CONFIG).map_err(transport)?;
        check_config(at, word, &config)?;
        Ok(Self::with_bus(config, link, Some(at.to_string())))
    }

    pub(crate) fn with_bus(config: ArrayConfig, bus: L, at: Option<String>) -> Self {
        BusDevice {
            config,
            bus,
            at,
            stats: DeviceStats::default(),
            firmware_mark: None,
            on_board: false,
            tensors: HostTensors::new(),
        }
    }

    /// What the link has moved so far, when it counts its traffic.
    fn traffic(&mut self) -> Option<Traffic> {
        self.bus.meter().map(|m| m.traffic())
    }

    /// Adds what the link moved since `before` to the stats; `false` when it counts nothing.
    pub(crate) fn count_traffic(&mut self, before: Option<Traffic>) -> bool {
        let (Some(before), Some(now)) = (before, self.traffic()) else {
            return false;
        };
        let moved = now - before;
        self.stats.bytes_to_device += moved.bytes_out;
        self.stats.bytes_from_device += moved.bytes_in;
        self.stats.frames += moved.frames;
        self.stats.round_trips += moved.round_trips;
        self.stats.resends += moved.resends;
        true
    }

    /// The board's firmware cycles so far, when it reports them.
    pub(crate) fn firmware_cycles(&mut self) -> Result<Option<u64>, L::Error> {
        match self.bus.meter() {
            Some(m) => m.firmware_cycles(),
            None => Ok(None),
        }
    }

    /// Adds the board's firmware cycles since the mark (the end of the last operation) to the
    /// stats and moves the mark; nothing without a mark.
    pub(crate) fn count_firmware_cycles(&mut self) -> Result<(), L::Error> {
        if let Some(mark) = self.firmware_mark {
            if let Some(now) = self.firmware_cycles()? {
                self.stats.firmware_cycles += now.wrapping_sub(mark);
                self.firmware_mark = Some(now);
            }
        }
        Ok(())
    }

    /// The board's store, when the board keeps the device's kept tensors (else they live in
    /// host memory, [`HostTensors`]).
    fn kept_store(&mut self) -> Option<KeptStore> {
        self.bus.board().map(|b| b.store())
    }

    /// Runs one driver call of `macs` multiply-accumulates on operands and a result of
    /// `tensor_bytes` and settles the link, counting the bytes it moved (also when it failed: they crossed the link all the same) and, when it
    /// succeeded, the op. A failure keeps the driver's typed error as its source.
    fn run(
        &mut self,
        macs: u64,
        tensor_bytes: u64,
        call: impl FnOnce(&mut L, &ArrayConfig, &mut bool) -> Result<DriverStats, DriverError<L::Error>>,
    ) -> Result<(), DeviceError> {
        let failed = |dev: &Self, e: DriverError<L::Error>| DeviceError::Transport {
            device: dev.name(),
            source: Box::new(e),
        };
        if self.firmware_mark.is_none() {
            self.firmware_mark = self
                .firmware_cycles()
                .map_err(|e| failed(self, DriverError::Bus(e)))?;
        }
        let before = self.traffic();
        self.on_board = false;
        let r = call(&mut self.bus, &self.config, &mut self.on_board)
            .and_then(|st| self.bus.settle().map(|()| st).map_err(DriverError::Bus));
        // A link that counts gives its bytes; else, of a run that succeeded, its port use.
        if !self.count_traffic(before) {
            if let Ok(st) = &r {
                let (to, from) = conv_unit::port_bytes(&self.config, st);
                self.stats.bytes_to_device += to;
                self.stats.bytes_from_device += from;
            }
        }
        if let Ok(st) = &r {
            let (to, from) = conv_unit::port_bytes(&self.config, st);
            self.stats.port_bytes += to + from;
        }
        if r.is_err() {
            // The failed operation's cost must not be taken for the next one's.
            self.firmware_mark = None;
        }
        let st = r.map_err(|e| failed(self, e))?;
        // Asked after the counts above were taken: the question is not part of the operation.
        self.count_firmware_cycles()
            .map_err(|e| failed(self, DriverError::Bus(e)))?;
        self.stats.ops += 1;
        self.stats.board_ops += u64::from(std::mem::take(&mut self.on_board));
        self.stats.macs += macs;
        self.stats.tensor_bytes += tensor_bytes;
        self.stats.cycles += st.cycles;
        self.stats.mac_cycles += st.mac_cycles;
        Ok(())
    }

    /// `C = op(A)·op(B)`, `op` transposing where `tr` says: on the board when the link's board
    /// runs products itself, else by the tile driver over the link.
    fn product(
        &mut self,
        a: &QMatrix,
        b: &QMatrix,
        tr: Transposed,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        // An array of W-bit words takes words and formats of W bits only (its ports would drop
        // the bits above W): refused here, as the golden model at W refuses them.
        systole_golden::check_at(a, b, out, self.config.word_bits)?;
        let job = driver_job(a, b, tr, out)?;
        let (m, n) = (job.m, job.n);
        let mut c = vec![0i16; m * n];
        let words = a.data.len() + b.data.len() + m * n;
        self.run(
            (m * job.k * n) as u64,
            2 * words as u64,
            |bus, cfg, on_board| match bus.board().and_then(|b| b.matmul(&job, tr, &mut c)) {
                Some(r) => {
                    *on_board = true;
                    r.map_err(DriverError::Bus)
                }
                None => driver::matmul_views(bus, cfg, &job, tr, &mut c),
            },
        )?;
        Ok(QMatrix::from_vec(m, n, out.frac, c)?)
    }

    /// One convolution on the conv unit; the result is NCHW for the forward and input-gradient
    /// ops and `out_ch x in_ch·k·k` for the weight gradient.
    fn conv(
        &mut self,
        ops: &ConvOperands<'_>,
        g: &Conv2dGeom,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        // As a product: words and formats of the array's W bits only (its feature-map and row
        // ports would drop the bits above W), refused as the golden model at W refuses them.
        if let [p, q] = [ops.x, ops.dy, ops.w]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()[..]
        {
            systole_golden::check_at(p, q, out, self.config.word_bits)?;
        }
        let job = conv_unit::job(ops, g, out)?;
        let (m, k, n) = job.shape();
        let mut c = vec![0i16; m * n];
        let inputs: usize = [ops.x, ops.dy, ops.w]
            .iter()
            .flatten()
            .map(|t| t.data.len())
            .sum();
        self.run(
            (m * k * n) as u64,
            2 * (inputs + m * n) as u64,
            |bus, cfg, on_board| match bus.board().and_then(|b| b.conv(&job, &mut c)) {
                Some(r) => {
                    *on_board = true;
                    r.map_err(DriverError::Bus)
                }
                None => conv2d(bus, cfg, &job, &mut c),
            },
        )?;
        let lowered = QMatrix::from_vec(m, n, out.frac, c)?;
        Ok(conv_unit::reshape(ops.op, g, lowered))
    }
}

impl<L: Link> Device for BusDevice<L>
where
    L::Error: std::error::Error + Send + Sync + 'static,
{
    fn name(&self) -> String {
        let n = self.config.size;
        match &self.at {
            Some(at) => format!("{} {n}x{n} at {at}", L::KIND),
            None => format!("{} {n}x{n}", L::KIND),
        }
    }

    fn config(&self) -> &ArrayConfig {
        &self.config
    }

    fn matmul(
        &mut self,
        a: &QMatrix,
        b: &QMatrix,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        self.product(a, b, Transposed::default(), out)
    }

    // The transposed products read the operand through its transpose (the driver's views)
    // instead of copying it: the same tiles and result, and a board that keeps tensors holds
    // one copy for both uses.
    fn matmul_nt(
        &mut self,
        a: &QMatrix,
        b: &QMatrix,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        let tr = Transposed { a: false, b: true };
        self.product(a, b, tr, out)
    }

    fn matmul_tn(
        &mut self,
        a: &QMatrix,
        b: &QMatrix,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        let tr = Transposed { a: true, b: false };
        self.product(a, b, tr, out)
    }

    // Each convolution runs on the conv unit, or, when the array was built without one or the
    // maps do not fit its buffer, as the host-lowered product.
    fn conv2d_forward(
        &mut self,
        x: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        let op = ConvOp::Forward;
        if !conv_unit::runs_on_unit(&self.config, g, op) {
            return super::lowered_forward(self, x, w, g, out);
        }
        let ops = ConvOperands {
            op,
            x: Some(x),
            dy: None,
            w: Some(w),
        };
        self.conv(&ops, g, out)
    }

    fn conv2d_backward_input(
        &mut self,
        dy: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        let op = ConvOp::BackwardInput;
        if !conv_unit::runs_on_unit(&self.config, g, op) {
            return super::lowered_backward_input(self, dy, w, g, out);
        }
        let ops = ConvOperands {
            op,
            x: None,
            dy: Some(dy),
            w: Some(w),
        };
        self.conv(&ops, g, out)
    }

    fn conv2d_backward_weights(
        &mut self,
        x: &QMatrix,
        dy: &QMatrix,
        g: &Conv2dGeom,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        let op = ConvOp::BackwardWeights;
        if !conv_unit::runs_on_unit(&self.config, g, op) {
            return super::lowered_backward_weights(self, x, dy, g, out);
        }
        let ops = ConvOperands {
            op,
            x: Some(x),
            dy: Some(dy),
            w: None,
        };
        self.conv(&ops, g, out)
    }

    fn stats(&self) -> DeviceStats {
        self.stats
    }

    fn reset_stats(&mut self) {
        self.stats = DeviceStats::default();
    }

    fn host_tensors(&mut self) -> Option<&mut HostTensors> {
        Some(&mut self.tensors)
    }

    fn upload(&mut self, t: &QMatrix) -> Result<DeviceTensor, DeviceError> {
        match self.kept_store() {
            Some(store) => self.keep_on_board(store, t),
            None => crate::resident::upload_to_host(self, t),
        }
    }

    fn read_tensor(&mut self, t: &DeviceTensor) -> Result<QMatrix, DeviceError> {
        match self.kept_store() {
            Some(_) => self.read_from_board(t),
            None => crate::resident::read_from_host(self, t),
        }
    }

    fn free_tensor(&mut self, t: &DeviceTensor) -> Result<(), DeviceError> {
        match self.kept_store() {
            Some(_) => self.free_on_board(t),
            None => crate::resident::free_in_host(self, t),
        }
    }

    fn matmul_kept(
        &mut self,
        a: &DeviceTensor,
        b: &DeviceTensor,
        tr: Transposed,
        out: &OutputSpec,
    ) -> Result<DeviceTensor, DeviceError> {
        match self.kept_store() {
            Some(store) => self.matmul_on_board(store, a, b, tr, out),
            None => crate::resident::matmul_in_host(self, a, b, tr, out),
        }
    }

    fn tensor_room(&mut self) -> Option<TensorRoom> {
        Some(match self.kept_store() {
            Some(store) => self.board_room(store),
            None => self.tensors.room(),
        })
    }

    fn board_training(&mut self) -> Option<crate::board_train::BoardTraining<'_>> {
        let name = self.name();
        let link = self.bus.trainer()?;
        Some(crate::board_train::BoardTraining {
            link,
            stats: &mut self.stats,
            name,
            firmware_mark: &mut self.firmware_mark,
        })
    }
}

/// Checks a product's operands against the contract and builds the tile driver's job.
fn driver_job<'a>(
    a: &'a QMatrix,
    b: &'a QMatrix,
    tr: Transposed,
    out: &OutputSpec,
) -> Result<driver::MatmulJob<'a>, DeviceError> {
    let (m, k, n) = crate::resident::product_dims((a.rows, a.cols), (b.rows, b.cols), tr)?;
    Ok(driver::MatmulJob {
        a: &a.data,
        b: &b.data,
        m,
        k,
        n,
        shift: systole_golden::output_shift(a.frac + b.frac, out.frac)?,
        rounding: out.rounding,
        seed: out.seed,
    })
}

/// Checks a board's `ID` register: is it a systole accelerator? `at` names it in messages.
pub(crate) fn check_id(at: &str, id: u32) -> Result<(), DeviceError> {
    if id == systole_core::regmap::ID_VALUE {
        return Ok(());
    }
    Err(DeviceError::NotAccelerator {
        at: at.to_string(),
        id,
    })
}

/// Checks a board's `CONFIG` register against the array asked for.
pub(crate) fn check_config(
    at: &str,
    config_word: u32,
    asked: &ArrayConfig,
) -> Result<(), DeviceError> {
    asked
        .check_config_word(config_word)
        .map_err(|e| DeviceError::WrongArray {
            at: at.to_string(),
            source: Box::new(e),
        })
}
