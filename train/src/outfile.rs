//! Writing outputs without losing anything: every file systole writes (`--out` of every command,
//! a run folder's reports and checkpoint) goes through [`write_atomic`], and a training run owns
//! its folder through [`RunLock`].
//!
//! * Only regular files are written. An existing symbolic link, device node, FIFO, socket or
//!   folder at the target is refused with [`OutputError::NotRegular`] (a rename over it would
//!   replace the link or node instead of writing where it points).
//! * A file is written to a temporary name unique to this process and write, flushed, and renamed
//!   over the target, so a reader sees the old file or the new one; a failed write removes its
//!   temporary file and leaves the target as it was.
//! * [`probe_dir`] reserves and removes a file as large as what a run will write, so a read-only
//!   or full folder is found before a long run starts, not after its first epoch.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why an output could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    /// The target exists and is not a regular file.
    #[error("{} is {what}: systole writes regular files only, never through links or into devices, FIFOs or folders; name a new or regular file instead", path.display())]
    NotRegular {
        /// The target.
        path: PathBuf,
        /// What it is, e.g. `a symbolic link`.
        what: &'static str,
    },
    /// A file or folder could not be created, written or renamed.
    #[error("cannot write {}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A run folder that exists and is not a folder.
    #[error("{} is {what}, not a folder: --out names the folder a run writes its files into; name a new or existing folder", path.display())]
    NotFolder {
        /// The path given.
        path: PathBuf,
        /// What it is, e.g. `a device`.
        what: &'static str,
    },
    /// Another process holds the run folder's lock.
    #[error("{} is in use by another systole run ({holder}): wait for it to end or choose another --out", dir.display())]
    Locked {
        /// The run folder.
        dir: PathBuf,
        /// Who holds it, as the holder wrote it: pid, host and command line.
        holder: String,
    },
}

fn io_at(path: &Path) -> impl Fn(io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Refuses a target that exists and is not a regular file (links are not followed).
pub fn check_target(path: &Path) -> Result<(), OutputError> {
    let t = match std::fs::symlink_metadata(path) {
        Ok(m) => m.file_type(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_at(path)(e)),
    };
    if t.is_file() {
        return Ok(());
    }
    Err(OutputError::NotRegular {
        path: path.to_path_buf(),
        what: kind_of(t),
    })
}

/// Refuses a run folder that exists and is not a folder (a link to one is taken as one).
pub fn check_folder(dir: &Path) -> Result<(), OutputError> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(m) => Err(OutputError::NotFolder {
            path: dir.to_path_buf(),
            what: kind_of(m.file_type()),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_at(dir)(e)),
    }
}

/// What a file of type `t` is, in words.
fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        "a regular file"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// A name in `path`'s folder no other process or write uses: `.NAME.PID-N.tmp` (the name kept
/// first so a leftover is easy to attribute; `ext` keeps writers that choose a format by
/// extension working).
fn temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.{}-{n}.tmp{ext}", std::process::id()))
}

/// Removes the temporary files of [`temp_path`]'s pattern that processes other than this one
/// left in `dir` (a run killed mid-write): call it only while holding the folder's
/// [`RunLock`], so no other process is writing there. Returns how many were removed.
pub fn remove_stale_temps(dir: &Path) -> usize {
    let me = format!(".{}-", std::process::id());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if is_temp_name(&name)
            && !name.contains(&me)
            && e.file_type().is_ok_and(|t| t.is_file())
            && std::fs::remove_file(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Whether `name` has [`temp_path`]'s form `.NAME.PID-N.tmp[.EXT]`.
fn is_temp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let Some(at) = rest.find(".tmp") else {
        return false;
    };
    let Some((_, counter)) = rest[..at].rsplit_once('.') else {
        return false;
    };
    let tail = &rest[at + 4..];
    let numbered = counter.split_once('-').is_some_and(|(pid, n)| {
        [pid, n]
            .iter()
            .all(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    });
    numbered && (tail.is_empty() || tail.starts_with('.'))
}

/// Replaces `path` by what `fill` writes to a fresh temporary file beside it (whose path it is
/// given), flushed to disk and renamed over `path`. On any failure the temporary file is removed
/// and `path` is untouched.
pub fn replace_with<E: From<OutputError>>(
    path: &Path,
    fill: impl FnOnce(&Path, &mut File) -> Result<(), E>,
) -> Result<(), E> {
    check_target(path)?;
    let tmp = temp_path(path);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(io_at(path))?;
    let written = fill(&tmp, &mut f).and_then(|()| {
        f.sync_all().map_err(io_at(path))?;
        // Checked again just before the rename: the target may have changed meanwhile.
        check_target(path)?;
        std::fs::rename(&tmp, path).map_err(io_at(path))?;
        Ok(())
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    // Make the rename itself durable.
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically: a reader sees the old file or the new one, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    replace_with(path, |_, f| f.write_all(bytes).map_err(io_at(path)))
}

/// Creates `dir` (and its parents) and proves it takes a write of `bytes`: the blocks are
/// reserved (`posix_fallocate`) and released again, so a read-only folder, or one without room
/// for what a run will write, fails here, with nothing left behind.
pub fn probe_dir(dir: &Path, bytes: u64) -> Result<(), OutputError> {
    use std::os::fd::AsRawFd;
    std::fs::create_dir_all(dir).map_err(io_at(dir))?;
    let probe = dir.join(format!(".systole-probe.{}", std::process::id()));
    let wrote = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|f| {
            let len = libc::off_t::try_from(bytes.max(1)).unwrap_or(libc::off_t::MAX);
            // SAFETY: the descriptor belongs to `f`, which is open for the whole call.
            match unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, len) } {
                0 => f.sync_all(),
                code => Err(io::Error::from_raw_os_error(code)),
            }
        });
    let _ = std::fs::remove_file(&probe);
    wrote.map_err(io_at(dir))
}

/// Exclusive ownership of a run folder for as long as it lives: an `flock` on `DIR/.lock`, which
/// holds the owner's pid, host and command line. The kernel releases it when the process ends,
/// however it ends, so a crashed run never leaves the folder locked.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

/// File name of the lock inside a run folder.
pub const LOCK_NAME: &str = ".lock";

impl RunLock {
    /// Takes the lock of `dir` (created if missing) at once, or fails naming its holder.
    pub fn acquire(dir: &Path) -> Result<RunLock, OutputError> {
        std::fs::create_dir_all(dir).map_err(io_at(dir))?;
        let path = dir.join(LOCK_NAME);
        check_target(&path)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_at(&path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                let holder = holder.trim();
                return Err(OutputError::Locked {
                    dir: dir.to_path_buf(),
                    holder: if holder.is_empty() {
                        "a process that has not written its name yet".into()
                    } else {
                        holder.to_string()
                    },
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_at(&path)(e)),
        }
        let who = format!(
            "pid {} on {}: {}\n",
            std::process::id(),
            host_name(),
            std::env::args().collect::<Vec<_>>().join(" ")
        );
        file.set_len(0)
            .and_then(|()| file.write_all(who.as_bytes()))
            .and_then(|()| file.sync_all())
            .map_err(io_at(&path))?;
        Ok(RunLock { _file: file })
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "this host".into())
}

#[cfg(test)]
#[path = "outfile_tests.rs"]
mod tests;
