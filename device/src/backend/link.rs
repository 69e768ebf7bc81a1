//! [`Link`]: the bus a [`BusDevice`](super::BusDevice) runs on, and what it can do besides
//! carrying the bus, each a trait the link hands out when it has it: [`Meter`] (it counts its
//! traffic), [`BoardOps`] (the board runs operations itself, on tensors in its store) and
//! [`TrainLink`] (the board trains itself). A link implements only the ones it has; the
//! device asks for each once per operation.

use crate::board_train::TrainLink;
use systole_core::AcceleratorBus;
use systole_firmware::conv::ConvJob;
use systole_firmware::driver::{DriverStats, MatmulJob, Transposed};

/// An [`AcceleratorBus`] a [`BusDevice`](super::BusDevice) runs on: a simulated array or a
/// link to a board. The verilator link is the bus alone; the bridge counts its traffic; the
/// serial link to a board with firmware has all three parts, as the board announces them.
pub trait Link: AcceleratorBus {
    /// The backend's name in device names and messages (`verilator`, `serial`, `bridge`).
    const KIND: &'static str;

    /// Sends every buffered write and waits until the device has taken it (the driver's last
    /// reads may leave writes in flight on a link; a simulator has none).
    fn settle(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// The link's counters, when it counts its traffic (a simulator does not: a run's bytes
    /// are then its port use: rows, registers, map words).
    fn meter(&mut self) -> Option<&mut dyn Meter<Self::Error>> {
        None
    }

    /// The board's own operations and tensor store, when the board behind the link runs
    /// products and convolutions itself (else the host's tile driver runs them over the bus,
    /// and kept tensors live in host memory).
    fn board(&mut self) -> Option<&mut dyn BoardOps<Self::Error>> {
        None
    }

    /// The board's training requests, when the board behind the link trains itself.
    fn trainer(&mut self) -> Option<&mut dyn TrainLink> {
        None
    }
}

/// What a link has moved so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Bytes sent to the device (resends included).
    pub bytes_out: u64,
    /// Bytes read from the device.
    pub bytes_in: u64,
    /// Frames (or bus transactions) sent, each counted once.
    pub frames: u64,
    /// Times the host waited for an answer.
    pub round_trips: u64,
    /// Frames or transactions sent again.
    pub resends: u64,
}

impl std::ops::Sub for Traffic {
    type Output = Traffic;

    /// What was moved between two readings (`later - earlier`).
    fn sub(self, earlier: Traffic) -> Traffic {
        Traffic {
            bytes_out: self.bytes_out - earlier.bytes_out,
            bytes_in: self.bytes_in - earlier.bytes_in,
            frames: self.frames - earlier.frames,
            round_trips: self.round_trips - earlier.round_trips,
            resends: self.resends - earlier.resends,
        }
    }
}

/// A link that counts its traffic ([`Link::meter`]).
pub trait Meter<E> {
    /// Everything moved so far.
    fn traffic(&self) -> Traffic;

    /// The cycles the board's firmware has spent on requests so far, as it reports them;
    /// `None` where the board reports none (a bridge has no CPU; firmware may lack the
    /// counter). Asking may cross the link; that traffic is left out of [`Self::traffic`],
    /// as it only measures.
    fn firmware_cycles(&mut self) -> Result<Option<u64>, E> {
        Ok(None)
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

/// A product on kept tensors, for [`BoardOps::matmul_kept`].
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

/// A board that runs whole operations on its own drivers, on tensors in its store
/// ([`Link::board`]). The device keeps its kept tensors there too: the room is checked by the
/// device ([`Self::store`]) before anything crosses the link.
pub trait BoardOps<E> {
    /// Runs a whole product on the board; `None` when this one does not fit the board (its
    /// store, its request's fields): the host drives it over the bus instead.
    fn matmul(
        &mut self,
        job: &MatmulJob<'_>,
        tr: Transposed,
        out: &mut [i16],
    ) -> Option<Result<DriverStats, E>>;

    /// Runs a whole convolution op on the board; `None` when this one does not fit it.
    fn conv(&mut self, job: &ConvJob<'_>, out: &mut [i16]) -> Option<Result<DriverStats, E>>;

    /// The store as the kept tensors see it.
    fn store(&self) -> KeptStore;

    /// Whether the board holds kept tensor `key` (it may have lost it: a restart, a failure).
    fn holds(&self, key: u64) -> bool;

    /// Keeps `rows x cols` `words` as tensor `key`.
    fn keep(&mut self, key: u64, rows: usize, cols: usize, words: &[i16]) -> Result<(), E>;

    /// Reads kept tensor `key`'s words into `out`.
    fn read_kept(&mut self, key: u64, out: &mut [i16]) -> Result<(), E>;

    /// Lets kept tensor `key` go.
    fn free_kept(&mut self, key: u64) -> Result<(), E>;

    /// Runs `p` on kept tensors, its result kept as `p.out`.
    fn matmul_kept(&mut self, p: &KeptProduct) -> Result<DriverStats, E>;
}
