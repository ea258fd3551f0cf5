//! A suite file (`ngauge run FILE.toml`) must be refused with one error naming
//! file, position and key, never a panic, whatever the bytes; an accepted suite
//! has experiments, each surviving the JSON round trip `ngauge run` makes through
//! `runs/EXP/experiment.json`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ngauge::suite::file::{parse, Experiment};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse("fuzz.toml", text) {
        Ok(suite) => {
            assert!(!suite.experiments.is_empty());
            for e in &suite.experiments {
                let json = serde_json::to_string(e).expect("an experiment serializes");
                let back: Experiment = serde_json::from_str(&json).expect("its JSON parses");
                assert_eq!(&back, e);
            }
        }
        Err(e) => {
            let line = e.to_string();
            assert!(line.starts_with("fuzz.toml"), "{line}");
            assert!(!line.contains('\n'), "one line: {line}");
            if let Some((l, c)) = e.position {
                assert!(l >= 1 && c >= 1);
            }
        }
    }
});
