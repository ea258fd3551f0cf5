//! `--sizes SPEC` must be refused with an error, never a panic, whatever the text;
//! what it accepts is sorted, distinct, within the limits, and every single size it
//! accepts parses back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ngauge::sizes::{parse_size, parse_sizes, MAX_POINTS, MAX_SIZE_BYTES};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(sizes) = parse_sizes(text) {
        assert!(!sizes.is_empty());
        assert!(sizes.len() <= MAX_POINTS);
        assert!(sizes.windows(2).all(|w| w[0] < w[1]), "{text:?}: {sizes:?}");
        assert!(sizes.iter().all(|&s| s <= MAX_SIZE_BYTES));
        for &s in sizes.iter().take(8) {
            assert_eq!(parse_sizes(&s.to_string()), Ok(vec![s]));
        }
    }
    if let Ok(size) = parse_size(text) {
        assert!(size <= MAX_SIZE_BYTES);
    }
});
