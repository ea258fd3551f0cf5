//! The rendezvous/control frame decoder must return an error, never panic, on any
//! bytes a hostile client can send, and what it accepts must re-encode identically.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ngauge::launch::frame::{self, Join, Kind, MAX_CONTROL_PAYLOAD, MAX_JOIN_PAYLOAD};

fuzz_target!(|data: &[u8]| {
    for max in [0, 16, MAX_JOIN_PAYLOAD, MAX_CONTROL_PAYLOAD] {
        if let Ok(total) = frame::decode_any(data, max) {
            assert!(total <= data.len());
        }
        if let Ok((kind, payload, total)) = frame::decode(data, max) {
            assert!(payload.len() <= max && total == frame::HEADER_LEN + payload.len());
            if kind == Kind::Join {
                if let Ok(join) = Join::decode(payload) {
                    assert_eq!(join.encode(), payload);
                }
            }
        }
    }
    // Payload parsers on raw bytes, whatever the header says.
    let _ = Join::decode(data);
    let _ = frame::Abort::decode(data);
    let _ = frame::Control::decode(data, Kind::Gather);
    let _ = frame::decode_table(data, data.len() % 64);
});
