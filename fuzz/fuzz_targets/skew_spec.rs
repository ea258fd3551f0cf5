//! The injected clock skew (`NGAUGE_TEST_CLOCK_SKEW`) must be refused with an error,
//! never a panic, whatever the text; an accepted spec has finite values and names
//! each rank it mentions, and the epoch parser never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ngauge::clock::Ticks;
use ngauge::sync::skew::{epoch, SkewSpec};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(spec) = text.parse::<SkewSpec>() {
        for e in &spec.entries {
            assert!(e.offset.0.is_finite() && e.drift_ppm.is_finite(), "{text:?}");
            assert!(spec.entry(e.rank).is_some());
        }
        let _ = spec.check_size(data.len() % 8);
    }
    let _ = epoch(Some(text), Ticks(data.len() as u64));
});
