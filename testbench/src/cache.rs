//! The model cache's own parts: a stable hash for its keys, one lock per key within this
//! process, and the clean-up of builds that other processes abandoned.

use std::path::Path;

/// FNV-1a, 64 bits: a stable hash (the cache must mean the same across Rust versions).
pub(crate) fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The lock of one cache entry in this process: threads asking for the same model (tests)
/// then build it once, the later ones finding it in the cache, and never share a build
/// folder (those are named by process and key). Other processes build beside this one.
pub(crate) fn key_lock(key: u64) -> std::sync::Arc<std::sync::Mutex<()>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, PoisonError};
    static LOCKS: Mutex<Option<HashMap<u64, Arc<Mutex<()>>>>> = Mutex::new(None);
    let mut locks = LOCKS.lock().unwrap_or_else(PoisonError::into_inner);
    locks
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_default()
        .clone()
}

/// Removes the build folders (`*.tmp-PID`) of processes that no longer run: builds that failed
/// (kept for their log) or were killed. A running process's folder is left alone.
pub(crate) fn remove_abandoned_builds(cache: &Path) {
    for e in std::fs::read_dir(cache).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.rsplit_once(".tmp-").map(|(_, pid)| pid.to_string());
        if let Some(pid) = pid.filter(|p| p.parse::<u32>().is_ok()) {
            if !Path::new("/proc").join(&pid).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}
