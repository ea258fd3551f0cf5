//! A LogGP params file (`simulate --params FILE`) must be refused with an error,
//! never a panic, whatever the bytes; an accepted file keeps its invariants, answers
//! for every size, and survives a round trip through its own JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ngauge::model::params::ParamsFile;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(file) = ParamsFile::from_json(text) {
        assert!(file.check().is_ok());
        for size in [0, 1, 4096, u64::MAX] {
            let _ = file.for_size(size);
        }
        let again = ParamsFile::from_json(&file.to_json()).expect("own output parses");
        assert_eq!(again.ranges.len(), file.ranges.len());
    }
});
