//! A command's standard output: its main output, or (training) its progress only.

use std::sync::atomic::{AtomicBool, Ordering};

/// Writes a command's main output to standard output. A reader that stops early (`| head`)
/// ends the command quietly, as it would end `cat`; any other failure (a full disk behind `>`)
/// is an error naming standard output, never a panic.
pub(crate) fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write to standard output")),
    }
}

/// Set by a command whose standard output only reports progress (training): its job is the
/// files it writes, so a reader that goes away does not end it.
static PROGRESS_ONLY: AtomicBool = AtomicBool::new(false);
/// Standard output's reader went away during a [`PROGRESS_ONLY`] command: nothing more is
/// printed.
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);

/// Declares the running command's standard output progress only (see [`write_line`]).
pub(crate) fn progress_only() {
    PROGRESS_ONLY.store(true, Ordering::Relaxed);
}

/// Writes one line of a command's output. When standard output fails: if the reader went away
/// (`| head`), a command whose output is its job ends quietly with status 0 (the reader chose to
/// stop reading, and every file already written is complete), and a training command carries
/// on to the end of its job without printing (progress is not the job); any other failure (a
/// full disk) ends the process with an error and status 1.
pub(crate) fn write_line(line: &str) {
    use std::io::Write;
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{line}").and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e)
            if e.kind() == std::io::ErrorKind::BrokenPipe
                && PROGRESS_ONLY.load(Ordering::Relaxed) =>
        {
            STDOUT_GONE.store(true, Ordering::Relaxed);
        }
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("error: cannot write to standard output: {e}");
            std::process::exit(1)
        }
    }
}
