//! Fault injection on a serial link, for tests: [`FaultProxy`] is a pty between the host and a
//! board's pty that forwards bytes both ways and, when told, flips bits in either direction or
//! stalls (stops reading and writing, as a board whose process was stopped). The host opens
//! [`FaultProxy::path`] as it would the board's own.

use super::open_pty;
use crate::DeviceError;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use systole_firmware::frame::{Decoder, SYNC};

/// A direction on the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Host to board.
    ToBoard,
    /// Board to host.
    ToHost,
}

/// One armed fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// XORs `mask` into the next `times` frame starts (the first sync byte) going `dir` whose
    /// frame carries command `cmd` (any when `None`): the frame is lost, its bytes garbage.
    FlipSync {
        /// Which way.
        dir: Direction,
        /// The frame's command byte, if only those.
        cmd: Option<u8>,
        /// Frames to hit.
        times: usize,
    },
    /// XORs one bit into the byte `offset` bytes into each of the next `times` frames going
    /// `dir` (counted from its first sync byte; 6 is the first payload byte): the frame fails
    /// its CRC.
    FlipByte {
        /// Which way.
        dir: Direction,
        /// Byte of the frame.
        offset: usize,
        /// Frames to hit.
        times: usize,
    },
    /// Stops forwarding in both directions once the next frame of command `cmd` went to the
    /// board (a board that stops while it works on that request), until
    /// [`FaultProxy::resume`].
    StallWhenSent {
        /// The request's command byte.
        cmd: u8,
    },
    /// Stops forwarding in both directions after `count` frames of command `cmd` went to the
    /// host (0: at once), until [`FaultProxy::resume`].
    StallAfter {
        /// The command byte counted.
        cmd: u8,
        /// How many pass first.
        count: usize,
    },
}

/// What the proxy did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyCounts {
    /// Bytes forwarded to the board.
    pub to_board: u64,
    /// Bytes forwarded to the host.
    pub to_host: u64,
    /// Bytes the proxy changed.
    pub flipped: u64,
    /// When the link stalled, if it did.
    pub stalled: bool,
}

#[derive(Default)]
struct State {
    faults: Vec<Fault>,
    /// A [`Fault::StallWhenSent`] frame is on its way: stall once it went out.
    stall_pending: bool,
    counts: ProxyCounts,
    stalled_at: Option<std::time::Instant>,
}

/// A pty that forwards to a board's pty with faults put in the way (see the module's docs).
/// Dropping it stops the proxy.
pub struct FaultProxy {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
    thread: Option<JoinHandle<()>>,
    _slave: OwnedFd,
}

/// One direction's frame tracking: where the current frame started and its header.
#[derive(Default)]
struct Track {
    /// Bytes of the current frame seen so far (`None`: between frames).
    at: Option<usize>,
    header: Vec<u8>,
}

impl FaultProxy {
    /// A proxy in front of the board at `board` (a pty path).
    pub fn spawn(board: &Path) -> Result<FaultProxy, DeviceError> {
        let board = File::options()
            .read(true)
            .write(true)
            .open(board)
            .map_err(|source| DeviceError::Transport {
                device: format!("the fault proxy's board {}", board.display()),
                source: Box::new(source),
            })?;
        let (master, slave, path) = open_pty()?;
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(State::default()));
        let (stopped, shared) = (stop.clone(), state.clone());
        let thread = std::thread::Builder::new()
            .name("systole-fault-proxy".into())
            .spawn(move || forward(master, board, &stopped, &shared))
            .map_err(|e| DeviceError::Transport {
                device: "the fault proxy's thread".into(),
                source: Box::new(e),
            })?;
        Ok(FaultProxy {
            path,
            stop,
            state,
            thread: Some(thread),
            _slave: slave,
        })
    }

    /// The pty path the host opens.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Arms a fault.
    pub fn arm(&self, fault: Fault) {
        self.lock().faults.push(fault);
    }

    /// Forwards again after a stall.
    pub fn resume(&self) {
        let mut s = self.lock();
        s.counts.stalled = false;
        s.stalled_at = None;
    }

    /// Counts so far.
    pub fn counts(&self) -> ProxyCounts {
        self.lock().counts
    }

    /// When the link stalled, if it is stalled.
    pub fn stalled_at(&self) -> Option<std::time::Instant> {
        self.lock().stalled_at
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The proxy's loop: forwards each direction with the armed faults until stopped.
fn forward(mut host: File, mut board: File, stop: &AtomicBool, state: &Mutex<State>) {
    let mut buf = [0u8; 512];
    let (mut up, mut down) = (Track::default(), Track::default());
    let mut answers = Decoder::new();
    while !stop.load(Ordering::Relaxed) {
        if state.lock().is_ok_and(|s| s.counts.stalled) {
            std::thread::sleep(std::time::Duration::from_millis(5));
            continue;
        }
        let mut fds = [
            PollFd::new(host.as_fd(), PollFlags::POLLIN),
            PollFd::new(board.as_fd(), PollFlags::POLLIN),
        ];
        if nix::poll::poll(&mut fds, PollTimeout::from(10u8)).unwrap_or(0) == 0 {
            continue;
        }
        let ready = |f: &PollFd<'_>| f.revents().is_some_and(|r| r.contains(PollFlags::POLLIN));
        let (from_host, from_board) = (ready(&fds[0]), ready(&fds[1]));
        if from_host {
            let Ok(n) = host.read(&mut buf) else { return };
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            apply(&mut s, Direction::ToBoard, &mut up, &mut buf[..n]);
            s.counts.to_board += n as u64;
            drop(s);
            if n == 0 || board.write_all(&buf[..n]).is_err() {
                return;
            }
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            if std::mem::take(&mut s.stall_pending) {
                s.counts.stalled = true;
                s.stalled_at = Some(std::time::Instant::now());
                continue;
            }
        }
        if from_board {
            let Ok(n) = board.read(&mut buf) else { return };
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            apply(&mut s, Direction::ToHost, &mut down, &mut buf[..n]);
            s.counts.to_host += n as u64;
            // Counted as the host will see them (after the faults).
            answers.push(&buf[..n]);
            while let Some(f) = answers.next_frame() {
                let Ok(f) = f else { continue };
                for fault in &mut s.faults {
                    if let Fault::StallAfter { cmd, count } = fault {
                        if *cmd == f.cmd && *count > 0 {
                            *count -= 1;
                        }
                    }
                }
            }
            let stall = s
                .faults
                .iter()
                .position(|f| matches!(f, Fault::StallAfter { count: 0, .. }));
            if let Some(i) = stall {
                s.faults.remove(i);
                s.counts.stalled = true;
                s.stalled_at = Some(std::time::Instant::now());
            }
            drop(s);
            if n == 0 || host.write_all(&buf[..n]).is_err() {
                return;
            }
        }
    }
}

/// Applies the armed faults of direction `dir` to `bytes`, tracking frames in `t`. A frame's
/// command is looked up ahead in `bytes` (a frame's header arrives in one piece on a pty); a
/// [`Fault::FlipSync`] for a command whose header is split across reads is not applied.
fn apply(s: &mut State, dir: Direction, t: &mut Track, bytes: &mut [u8]) {
    for i in 0..bytes.len() {
        // A frame starts at a sync byte seen between frames and ends after its header's length
        // (a damaged length ends it early or late: the tracking only has to be right on a
        // clean line).
        let pos = match t.at {
            None if bytes[i] == SYNC[0] => 0,
            None => continue,
            Some(p) => p,
        };
        if pos < 6 {
            t.header.push(bytes[i]);
        }
        let ahead = bytes.get(i + 5).copied();
        let sent = |f: &Fault| matches!(f, Fault::StallWhenSent { cmd } if Some(*cmd) == ahead);
        if dir == Direction::ToBoard && pos == 0 {
            if let Some(k) = s.faults.iter().position(sent) {
                s.faults.remove(k);
                s.stall_pending = true;
            }
        }
        let mut flip = 0u8;
        for f in &mut s.faults {
            match f {
                Fault::FlipSync {
                    dir: d,
                    cmd: c,
                    times,
                } if *d == dir && *times > 0 && pos == 0 && (c.is_none() || *c == ahead) => {
                    flip |= 0x01;
                    *times -= 1;
                }
                Fault::FlipByte {
                    dir: d,
                    offset,
                    times,
                } if *d == dir && *times > 0 && *offset == pos => {
                    flip |= 0x10;
                    *times -= 1;
                }
                _ => {}
            }
        }
        if flip != 0 {
            bytes[i] ^= flip;
            s.counts.flipped += 1;
        }
        let len = (t.header.len() >= 4)
            .then(|| usize::from(t.header[2]) | (usize::from(t.header[3]) << 8));
        t.at = match len {
            Some(len) if pos + 1 >= 6 + len + 2 => None,
            _ if pos == 1 && t.header[1] != SYNC[1] => None,
            _ => Some(pos + 1),
        };
        if t.at.is_none() {
            t.header.clear();
        }
    }
}
