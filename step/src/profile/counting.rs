//! The counting half of [`super`] (feature `profile`): one table of statics, charged at each
//! section's entry and exit from the clock the firmware gave.

use super::{Section, SectionCycles, ENTRY_BYTES, SECTIONS};
use core::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering::Relaxed};

/// The clock, a `fn() -> u64` as an address (0: none given, nothing is counted).
static CLOCK: AtomicUsize = AtomicUsize::new(0);
static CYCLES: [AtomicU32; SECTIONS] = [const { AtomicU32::new(0) }; SECTIONS];
static ENTRIES: [AtomicU32; SECTIONS] = [const { AtomicU32::new(0) }; SECTIONS];
/// The open section's index.
static CURRENT: AtomicU8 = AtomicU8::new(0);
/// The clock's low 32 bits when the open section's cycles were last charged.
static LAST: AtomicU32 = AtomicU32::new(0);

/// Counts from now on with `now` (the board's cycle counter).
pub fn set_clock(now: fn() -> u64) {
    CLOCK.store(now as usize, Relaxed);
}

fn now() -> Option<u32> {
    let c = CLOCK.load(Relaxed);
    if c == 0 {
        return None;
    }
    // SAFETY: the only non-zero value CLOCK ever holds is a `fn() -> u64` stored by
    // `set_clock`, cast to its address; this casts it back.
    #[allow(unsafe_code)]
    let f = unsafe { core::mem::transmute::<usize, fn() -> u64>(c) };
    Some(f() as u32)
}

/// Charges the cycles since the last charge to section `i`.
fn charge(i: usize, t: u32) {
    let last = LAST.load(Relaxed);
    CYCLES[i].store(
        CYCLES[i].load(Relaxed).wrapping_add(t.wrapping_sub(last)),
        Relaxed,
    );
    LAST.store(t, Relaxed);
}

/// An open section: closed (its cycles charged, the outer one reopened) when dropped.
#[must_use = "a section is counted until this is dropped"]
pub struct Open {
    outer: u8,
}

/// Opens section `s` until the returned guard is dropped.
#[inline]
pub fn section(s: Section) -> Open {
    let outer = CURRENT.load(Relaxed);
    if let Some(t) = now() {
        charge(usize::from(outer), t);
        let e = &ENTRIES[s as usize];
        e.store(e.load(Relaxed).wrapping_add(1), Relaxed);
    }
    CURRENT.store(s as u8, Relaxed);
    Open { outer }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(t) = now() {
            charge(usize::from(CURRENT.load(Relaxed)), t);
        }
        CURRENT.store(self.outer, Relaxed);
    }
}

/// Zeroes the table (the clock stays).
pub fn reset() {
    for (c, e) in CYCLES.iter().zip(&ENTRIES) {
        c.store(0, Relaxed);
        e.store(0, Relaxed);
    }
}

/// The table now.
pub fn totals() -> [SectionCycles; SECTIONS] {
    let mut out = [SectionCycles::default(); SECTIONS];
    for (i, o) in out.iter_mut().enumerate() {
        o.cycles = CYCLES[i].load(Relaxed);
        o.entries = ENTRIES[i].load(Relaxed);
    }
    out
}

/// Writes the table into `out` (at least `SECTIONS · ENTRY_BYTES` bytes: cycles u32, entries
/// u32 per section, little-endian); returns the bytes written, 0 if `out` is too short.
pub fn encode(out: &mut [u8]) -> usize {
    let n = SECTIONS * ENTRY_BYTES;
    if out.len() < n {
        return 0;
    }
    for (e, t) in out.chunks_exact_mut(ENTRY_BYTES).zip(totals()) {
        e[..4].copy_from_slice(&t.cycles.to_le_bytes());
        e[4..].copy_from_slice(&t.entries.to_le_bytes());
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicU64;

    static TICKS: AtomicU64 = AtomicU64::new(0);

    /// A clock that advances 10 cycles a reading.
    fn ticks() -> u64 {
        let t = TICKS.load(Relaxed) + 10;
        TICKS.store(t, Relaxed);
        t
    }

    #[test]
    fn nested_sections_are_charged_exclusively_and_round_trip() {
        set_clock(ticks);
        reset();
        {
            let _step = section(Section::Step);
            let _ = ticks(); // 10 cycles of glue
            {
                let _p = section(Section::Product);
                let _d = section(Section::Drivers);
                let _ = (ticks(), ticks()); // 20 more in the drivers
            }
        }
        let t = totals();
        // Step: from its entry at 10 to Product's at 30, and from Product's exit at 80 to its
        // own at 90; Product: 30..40 and 70..80; Drivers: 40..70.
        assert_eq!((t[1].cycles, t[1].entries), (30, 1));
        assert_eq!((t[6].cycles, t[6].entries), (20, 1));
        assert_eq!((t[7].cycles, t[7].entries), (30, 1));
        let mut bytes = [0u8; SECTIONS * ENTRY_BYTES];
        assert_eq!(encode(&mut bytes), bytes.len());
        assert_eq!(super::super::decode(&bytes), Some(t));
    }
}
