//! Feeds arbitrary bytes to the readers of `--dataset npz:` and `idx:`: as an npz archive, and
//! split into four IDX files (the first three bytes give three files' lengths, the fourth
//! whether all four are gzip-compressed before reading). Properties: no panic, no allocation
//! beyond what the input's length justifies (libFuzzer's -rss_limit_mb catches one), and a set
//! that loads is whole.
#![no_main]

use libfuzzer_sys::fuzz_target;
use systole_train::data::{idx, npz, Dataset, Scaling};

fn whole(d: &Dataset) {
    for s in [&d.train, &d.test] {
        assert_eq!(s.images.len(), s.len() * d.features());
        assert!(s.labels.iter().all(|&l| usize::from(l) < d.classes));
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = npz::parse(data, "f.npz", "f", Scaling::default()) {
        whole(&d);
    }
    let Some((&[a, b, c, gz], rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    // Four files of the rest: the first three of lengths a, b and c (cut short at its end).
    let mut files = Vec::new();
    let mut at = 0;
    for (k, len) in [a, b, c, u8::MAX].into_iter().enumerate() {
        let end = if k == 3 {
            rest.len()
        } else {
            (at + usize::from(len)).min(rest.len())
        };
        let mut bytes = rest[at..end].to_vec();
        if gz & 1 == 1 {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            let _ = e.write_all(&bytes);
            bytes = e.finish().unwrap_or_default();
        }
        files.push((format!("file{k}"), bytes));
        at = end;
    }
    if let Ok(d) = idx::from_files(files, "f", Scaling::default()) {
        whole(&d);
    }
});
