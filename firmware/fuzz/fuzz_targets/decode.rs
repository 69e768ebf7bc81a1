//! Feeds arbitrary bytes, in arbitrary chunk sizes, through the frame decoder and the request
//! parser. Properties: no panic, and the decoder always has room for more input after it has
//! been drained (otherwise a board would stall forever).
#![no_main]

use libfuzzer_sys::fuzz_target;
use systole_firmware::frame::Decoder;
use systole_firmware::protocol::{BatchIter, Request};

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, mut rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk).max(1);
    let mut d = Decoder::new();
    while !rest.is_empty() {
        let take = chunk.min(rest.len());
        let n = d.push(&rest[..take]);
        rest = &rest[n..];
        while let Some(r) = d.next_frame() {
            if let Ok(f) = r {
                if let Ok(Request::Batch(entries)) = Request::parse(f.cmd, f.payload) {
                    BatchIter::new(entries).for_each(drop);
                }
            }
        }
        assert!(!d.spare().is_empty(), "decoder stalled with a full buffer");
    }
});
