//! The collective a data-parallel run needs: an exact integer all-reduce across ranks.
//!
//! [`Single`] is the one-process case (the sum of one contribution is itself); with the cargo
//! feature `mpi`, [`init`] joins the MPI job the process was started in (`mpirun -np K`).
//! Only `i64` sums are offered on purpose: integer addition is exact and order-independent,
//! so every rank holds the very same result whatever the reduction tree, which is what makes a
//! K-rank run match a 1-rank run bit for bit.

mod agree;

use crate::pipeline::StageLinks;

pub use agree::{agree, Disagreement, Fnv, Setting};

/// Why the collective cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DistError {
    /// Started under `mpirun` with several ranks but compiled without the `mpi` feature.
    #[error("started as one of {0} MPI processes, but systole was built without MPI: rebuild with --features mpi")]
    NoMpi(usize),
    /// MPI could not be initialised.
    #[error("MPI initialisation failed (was MPI already initialised?)")]
    Init,
}

/// A group of ranks that can sum integer vectors.
pub trait Collective {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Replaces `v` on every rank by the element-wise sum of all ranks' `v` (all ranks must
    /// pass the same length).
    fn all_reduce_sum_i64(&self, v: &mut [i64]);
    /// Ends the whole job (all ranks) with `code`: a failing rank must not leave the others
    /// waiting in a collective forever.
    fn abort(&self, code: i32) -> !;
    /// The links of a pipeline of `stages` stages over these ranks (rank `r` is stage
    /// `r % stages`; a collective call: every rank makes it), or `None` where there are none
    /// (one process).
    fn stage_links(&self, _stages: usize) -> Option<Box<dyn StageLinks + '_>> {
        None
    }
}

/// The single-process collective.
#[derive(Clone, Copy, Debug, Default)]
pub struct Single;

impl Collective for Single {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn all_reduce_sum_i64(&self, _v: &mut [i64]) {}
    fn abort(&self, code: i32) -> ! {
        std::process::exit(code)
    }
}

/// Number of processes of the MPI job this process was launched in (1 outside `mpirun`),
/// from the launcher's environment (Open MPI, or PMI-based launchers).
pub fn launcher_size() -> usize {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.trim().parse().ok())
        .unwrap_or(1)
}

/// The collective for this process: [`Single`] outside a multi-process launch, otherwise MPI
/// (feature `mpi`; without it a multi-process launch is an error instead of K independent runs).
pub fn init() -> Result<Box<dyn Collective>, DistError> {
    let n = launcher_size();
    if n <= 1 {
        return Ok(Box::new(Single));
    }
    #[cfg(feature = "mpi")]
    {
        Ok(Box::new(mpi_impl::Mpi::new()?))
    }
    #[cfg(not(feature = "mpi"))]
    {
        Err(DistError::NoMpi(n))
    }
}

#[cfg(feature = "mpi")]
mod mpi_impl {
    use super::{Collective, DistError, StageLinks};
    use crate::pipeline::{Message, MessageError};
    use mpi::collective::SystemOperation;
    use mpi::point_to_point::{Destination, Source};
    use mpi::topology::{Color, Communicator, SimpleCommunicator};
    use mpi::traits::CommunicatorCollectives;

    /// `MPI_COMM_WORLD`; finalises MPI when dropped.
    pub struct Mpi {
        world: SimpleCommunicator,
        // Dropped last: MPI_Finalize.
        _universe: mpi::environment::Universe,
    }

    impl Mpi {
        /// Initialises MPI and installs a panic hook that aborts the whole job after the
        /// usual panic message, so a crashed rank never hangs the others.
        pub fn new() -> Result<Self, DistError> {
            let universe = mpi::initialize().ok_or(DistError::Init)?;
            let prev = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                prev(info);
                // SAFETY: MPI is initialised (the hook is installed after initialize) and
                // MPI_Abort may be called from any thread at any time.
                unsafe {
                    mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, 101);
                }
            }));
            Ok(Mpi {
                world: universe.world(),
                _universe: universe,
            })
        }
    }

    impl Collective for Mpi {
        fn rank(&self) -> usize {
            self.world.rank() as usize
        }
        fn size(&self) -> usize {
            self.world.size() as usize
        }
        fn all_reduce_sum_i64(&self, v: &mut [i64]) {
            let send = v.to_vec();
            self.world
                .all_reduce_into(&send[..], v, SystemOperation::sum());
        }
        fn abort(&self, code: i32) -> ! {
            self.world.abort(code)
        }
        fn stage_links(&self, stages: usize) -> Option<Box<dyn StageLinks + '_>> {
            let color = Color::with_value((self.rank() % stages.max(1)) as i32);
            let replicas = self.world.split_by_color(color)?;
            Some(Box::new(MpiStages {
                world: &self.world,
                replicas,
            }))
        }
    }

    /// Point-to-point messages on `MPI_COMM_WORLD` (a header of `i64` words, then the
    /// tensors' 16-bit words; MPI keeps messages between two ranks in order) and the
    /// communicator of this rank's stage.
    struct MpiStages<'a> {
        world: &'a SimpleCommunicator,
        replicas: SimpleCommunicator,
    }

    impl StageLinks for MpiStages<'_> {
        fn send(&self, to: usize, msg: &Message) {
            let p = self.world.process_at_rank(to as i32);
            p.send(&msg.header()[..]);
            p.send(&msg.words()[..]);
        }
        fn recv(&self, from: usize) -> Result<Message, MessageError> {
            let p = self.world.process_at_rank(from as i32);
            let (header, _) = p.receive_vec::<i64>();
            let (data, _) = p.receive_vec::<i16>();
            Message::from_parts(&header, data)
        }
        fn replicas_all_reduce(&self, v: &mut [i64]) {
            let send = v.to_vec();
            self.replicas
                .all_reduce_into(&send[..], v, SystemOperation::sum());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_rank_reduce_is_identity() {
        let s = Single;
        let mut v = vec![3, -7, i64::MAX];
        s.all_reduce_sum_i64(&mut v);
        assert_eq!(v, vec![3, -7, i64::MAX]);
        assert_eq!((s.rank(), s.size()), (0, 1));
    }
}
