//! The plain `rdtsc` reading (`--timer rdtsc`) in the integration tests.

use crate::support::{skip, Lack};

/// Whether the host cannot read the counter with a plain `rdtsc`; if so, `test`
/// is skipped visibly ([`skip`], a lack of the host's, not of what CI installs).
pub fn lacking(test: &str) -> bool {
    match ngauge::clock::TimerSource::Rdtsc.usable() {
        Ok(_) => false,
        Err(why) => {
            skip(test, Lack::Host, why);
            true
        }
    }
}
