//! [`BusDevice`]: the one backend that runs the firmware's drivers over a [`Link`], an
//! [`AcceleratorBus`] to an accelerator. The verilator, serial and bridge backends are its
//! instances; each contributes only its bus and how that bus opens.

use super::conv_unit::{self, ConvOperands};
use super::{Device, DeviceError, DeviceStats, DeviceTensor, HostTensors, TensorRoom};
use systole_core::{AcceleratorBus, ArrayConfig};
use systole_firmware::conv::{conv2d, ConvJob, ConvOp};
use systole_firmware::driver::{self, DriverError, DriverStats, MatmulJob, Transposed};
use systole_golden::conv::Conv2dGeom;
use systole_golden::tensor::QMatrix;
use systole_golden::OutputSpec;

mod kept;

/// An [`AcceleratorBus`] a [`BusDevice`] runs on: a simulated array or a link to a board.
pub trait Link: AcceleratorBus {
    /// The backend's name in device names and messages (`verilator`, `serial`, `bridge`).
    const KIND: &'static str;

    /// Sends every buffered write and waits until the device has taken it (the driver's last
    /// reads may leave writes in flight on a link; a simulator has none).
    fn settle(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Bytes moved to and from the device so far as the link counts them; `None` where no
    /// link counts them (then a run's bytes are its port use: rows, registers, map words).
    fn link_bytes(&self) -> Option<(u64, u64)> {
        None
    }

    /// Frames (or bus transactions) sent, round trips waited for and resends so far; `None`
    /// where there is no link.
    fn link_exchanges(&self) -> Option<(u64, u64, u64)> {
        None
    }

    /// The cycles the board's firmware has spent on requests so far, as it reports them
    /// (`None`: the board reports none). Asking may cross the link; that traffic is left out
    /// of the counters above, as it only measures.
    fn firmware_cycles(&mut self) -> Result<Option<u64>, Self::Error> {
        Ok(None)
    }

    /// Runs a whole product on the device's own drivers (a board that runs operations
    /// itself); `None`: the host drives it over this bus.
    fn board_matmul(
        &mut self,
        _job: &MatmulJob<'_>,
        _tr: Transposed,
        _out: &mut [i16],
    ) -> Option<Result<DriverStats, Self::Error>> {
        None
    }

    /// The board's training requests, when the device behind this link trains itself.
    fn train_link(&mut self) -> Option<&mut dyn crate::board_train::TrainLink> {
        None
    }

    /// Runs a whole convolution op on the device's own drivers; `None`: the host drives it.
    fn board_conv(
        &mut self,
        _job: &ConvJob<'_>,
        _out: &mut [i16],
    ) -> Option<Result<DriverStats, Self::Error>> {
        None
    }

    /// The board's store, when the tensors kept on this device live in the board's RAM
    /// (`None`: in host memory, [`HostTensors`]). The methods below are its operations; on a
    /// link without a store they return `None`.
    fn kept_store(&self) -> Option<KeptStore> {
        None
    }

    /// Whether the board holds kept tensor `key` (it may have lost it: a restart, a failure).
    fn holds_kept(&self, _key: u64) -> bool {
        false
    }

    /// Keeps `rows x cols` `words` as tensor `key` (room checked by the caller).
    fn keep(
        &mut self,
        _key: u64,
        _rows: usize,
        _cols: usize,
        _words: &[i16],
    ) -> Option<Result<(), Self::Error>> {
        None
    }

    /// Reads kept tensor `key`'s words into `out`.
    fn read_kept(&mut self, _key: u64, _out: &mut [i16]) -> Option<Result<(), Self::Error>> {
        None
    }

    /// Lets kept tensor `key` go.
    fn free_kept(&mut self, _key: u64) -> Option<Result<(), Self::Error>> {
        None
    }

    /// Runs `p` on kept tensors, its result kept as `p.out` (room checked by the caller).
    fn matmul_kept(&mut self, _p: &KeptProduct) -> Option<Result<DriverStats, Self::Error>> {
        None
    }
}

/// A board's tensor store as the kept tensors see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeptStore {
    /// Words of the store.
    pub capacity: usize,
    /// Words the kept tensors hold (the link's cache of operands has the rest, and gives it up).
    pub kept_words: usize,
    /// Kept tensors.
    pub kept: usize,
    /// Tensors the store holds at most.
    pub most: usize,
}

/// A product on kept tensors, for [`Link::matmul_kept`].
#[derive(Clone, Copy, Debug)]
pub struct KeptProduct {
    /// Key of A.
    pub a: u64,
    /// Key of B.
    pub b: u64,
    /// Key the result is kept as.
    pub out: u64,
    /// Which operands are read through their transposes.
    pub tr: Transposed,
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// Output right shift.
    pub shift: u32,
    /// Rounding of the output conversion.
    pub rounding: systole_core::Rounding,
    /// Operation seed.
    pub seed: u32,
}

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
                .bus
                .firmware_cycles()
                .map_err(|e| failed(self, DriverError::Bus(e)))?;
        }
        let before = self.bus.link_bytes();
        let exchanges = self.bus.link_exchanges();
        self.on_board = false;
        let r = call(&mut self.bus, &self.config, &mut self.on_board)
            .and_then(|st| self.bus.settle().map(|()| st).map_err(DriverError::Bus));
        let (to, from) = match (before, self.bus.link_bytes(), &r) {
            (Some((out0, in0)), Some((out1, in1)), _) => (out1 - out0, in1 - in0),
            (_, _, Ok(st)) => conv_unit::port_bytes(&self.config, st),
            _ => (0, 0),
        };
        self.stats.bytes_to_device += to;
        self.stats.bytes_from_device += from;
        if let (Some((f0, r0, s0)), Some((f1, r1, s1))) = (exchanges, self.bus.link_exchanges()) {
            self.stats.frames += f1 - f0;
            self.stats.round_trips += r1 - r0;
            self.stats.resends += s1 - s0;
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
        if let Some(mark) = self.firmware_mark {
            let now = self
                .bus
                .firmware_cycles()
                .map_err(|e| failed(self, DriverError::Bus(e)))?;
            if let Some(now) = now {
                self.stats.firmware_cycles += now.wrapping_sub(mark);
                self.firmware_mark = Some(now);
            }
        }
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
            |bus, cfg, on_board| match bus.board_matmul(&job, tr, &mut c) {
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
            |bus, cfg, on_board| match bus.board_conv(&job, &mut c) {
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
        match self.bus.kept_store() {
            Some(store) => self.keep_on_board(store, t),
            None => crate::resident::upload_to_host(self, t),
        }
    }

    fn read_tensor(&mut self, t: &DeviceTensor) -> Result<QMatrix, DeviceError> {
        match self.bus.kept_store() {
            Some(_) => self.read_from_board(t),
            None => crate::resident::read_from_host(self, t),
        }
    }

    fn free_tensor(&mut self, t: &DeviceTensor) -> Result<(), DeviceError> {
        match self.bus.kept_store() {
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
        match self.bus.kept_store() {
            Some(store) => self.matmul_on_board(store, a, b, tr, out),
            None => crate::resident::matmul_in_host(self, a, b, tr, out),
        }
    }

    fn tensor_room(&mut self) -> Option<TensorRoom> {
        Some(match self.bus.kept_store() {
            Some(store) => self.board_room(store),
            None => self.tensors.room(),
        })
    }

    fn board_training(&mut self) -> Option<crate::board_train::BoardTraining<'_>> {
        let name = self.name();
        let link = self.bus.train_link()?;
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
