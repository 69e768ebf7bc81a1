//! Ranks agree on a run before its first step.
//!
//! Ranks started with different options would pass vectors of different lengths to the same
//! all-reduce (memory corruption in MPI), wait in a collective another rank never enters (a
//! hang), or sum gradients of different runs (a wrong result that looks right). So before the
//! first step every rank states its [`Setting`]s — the canonical value of every option that
//! affects the result — and [`agree`] compares them across ranks with the one collective the
//! trait offers (an exact integer sum), in four short rounds of fixed length:
//!
//! 1. the number of settings (and its square: both sums equal `size` times a rank's count only
//!    if every rank has the same count), so the next rounds' lengths agree;
//! 2. rank 0's hash of each setting (the others contribute zeros: a broadcast);
//! 3. a `settings x ranks` matrix of "my setting differs from rank 0's";
//! 4. only on a mismatch, which every rank sees alike: the first differing setting's text on
//!    rank 0 and on the lowest differing rank, so the message can show both.
//!
//! Every rank then returns the same [`Disagreement`], and all end without waiting for another.

use super::Collective;

/// One option as the run uses it: its command-line name and its canonical value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    /// What the user would change, e.g. `--hidden` or `the training data`.
    pub name: String,
    /// The value as text; equal texts mean equal effect on the run.
    pub value: String,
}

impl Setting {
    /// A setting named `name` with value `value`.
    pub fn new(name: &str, value: impl ToString) -> Self {
        Setting {
            name: name.to_string(),
            value: value.to_string(),
        }
    }
}

/// The ranks of a job were started with different settings.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Disagreement {
    /// A setting differs.
    #[error("the MPI ranks disagree on {name}: rank 0 has {first} but rank {rank} has {other} ({differing} of {ranks} ranks differ from rank 0); start every rank with the same options and data")]
    Setting {
        /// The first differing setting (in the order the settings were given).
        name: String,
        /// Rank 0's value.
        first: String,
        /// The lowest rank whose value differs from rank 0's.
        rank: usize,
        /// That rank's value.
        other: String,
        /// How many ranks differ from rank 0 on this setting.
        differing: usize,
        /// Ranks in the job.
        ranks: usize,
    },
    /// The ranks check different numbers of settings: different builds of systole.
    #[error("the MPI ranks run different systole builds (this one checks {count} options, the ranks {mean} on average); start every rank with the same systole binary")]
    Build {
        /// Settings on this rank.
        count: usize,
        /// Mean over the ranks.
        mean: f64,
    },
}

/// Longest value text shown in a [`Disagreement`] (longer ones are cut, marked `...`).
const SHOWN: usize = 120;

/// Checks that every rank of `dist` passed the same `settings`; every rank gets the same answer.
pub fn agree(dist: &dyn Collective, settings: &[Setting]) -> Result<(), Disagreement> {
    let (size, rank) = (dist.size(), dist.rank());
    let count = settings.len() as i64;
    let mut counts = [count, count * count];
    dist.all_reduce_sum_i64(&mut counts);
    let n = size as i64;
    if counts != [n * count, n * count * count] {
        return Err(Disagreement::Build {
            count: settings.len(),
            mean: counts[0] as f64 / n as f64,
        });
    }
    let mine: Vec<i64> = settings.iter().map(|s| hash_setting(s) as i64).collect();
    let mut first = if rank == 0 {
        mine.clone()
    } else {
        vec![0; mine.len()]
    };
    dist.all_reduce_sum_i64(&mut first);
    let mut differs = vec![0i64; settings.len() * size];
    for (i, (a, b)) in mine.iter().zip(&first).enumerate() {
        differs[i * size + rank] = i64::from(a != b);
    }
    dist.all_reduce_sum_i64(&mut differs);
    let Some(field) = (0..settings.len()).find(|&i| differs[i * size..][..size].contains(&1))
    else {
        return Ok(());
    };
    let row = &differs[field * size..][..size];
    let other_rank = row.iter().position(|&d| d == 1).unwrap_or(0);
    // Round 4: rank 0's text in the first slot, the differing rank's in the second.
    let mut texts = vec![0i64; 2 * (SHOWN + 1)];
    let slot = match rank {
        0 => Some(0),
        r if r == other_rank => Some(1),
        _ => None,
    };
    if let Some(s) = slot {
        let v = settings[field].value.as_bytes();
        let cut = &v[..v.len().min(SHOWN + 1)];
        for (t, &b) in texts[s * (SHOWN + 1)..].iter_mut().zip(cut) {
            *t = i64::from(b);
        }
    }
    dist.all_reduce_sum_i64(&mut texts);
    let text = |s: usize| {
        let bytes: Vec<u8> = texts[s * (SHOWN + 1)..][..SHOWN + 1]
            .iter()
            .take_while(|&&b| b != 0)
            .map(|&b| b as u8)
            .collect();
        let mut t = String::from_utf8_lossy(&bytes[..bytes.len().min(SHOWN)]).into_owned();
        if bytes.len() > SHOWN {
            t.push_str("...");
        }
        t
    };
    Err(Disagreement::Setting {
        name: settings[field].name.clone(),
        first: text(0),
        rank: other_rank,
        other: text(1),
        differing: row.iter().sum::<i64>() as usize,
        ranks: size,
    })
}

/// A 64-bit hash of a setting's name and value (FNV-1a: stable across builds and machines,
/// which `std`'s hasher does not promise).
fn hash_setting(s: &Setting) -> u64 {
    let mut h = Fnv::default();
    h.write(s.name.as_bytes());
    h.write(&[0]);
    h.write(s.value.as_bytes());
    h.0
}

/// FNV-1a, 64 bits, for digests that must be equal on every machine.
#[derive(Clone, Copy, Debug)]
pub struct Fnv(pub u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    /// Adds `bytes` to the digest.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests;
