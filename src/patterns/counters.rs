//! Transport counters of a measurement (UDP: lost, duplicated and reordered
//! datagrams, retransmissions; see [`ngauge_transport::Counters`]) carried to rank
//! 0 over the control channel and summed over the ranks there. A pattern reads
//! [`Transport::counters`] before and after a measurement, appends the difference
//! ([`ngauge_transport::Counters::since`]) to what it gathers with [`encode`], and
//! rank 0 adds up every rank's with [`decode`] and [`add`].
//!
//! [`Transport::counters`]: ngauge_transport::Transport::counters

use ngauge_transport::Counters;
use std::collections::BTreeMap;

/// Counter name to value, summed over ranks (the form results carry).
pub type CounterMap = BTreeMap<String, u64>;

/// Appends `counters` to `out`: per entry, the name's length (one byte), the
/// name, the value (8 bytes, little-endian). [`decode`] reads them back to the end
/// of the buffer, so they go last.
pub fn encode(counters: &Counters, out: &mut Vec<u8>) {
    for (name, value) in &counters.entries {
        let name = &name.as_bytes()[..name.len().min(u8::MAX as usize)];
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        out.extend_from_slice(&value.to_le_bytes());
    }
}

/// The entries [`encode`] wrote, up to the end of `bytes`; `None` when they do not
/// parse.
pub fn decode(mut bytes: &[u8]) -> Option<Vec<(String, u64)>> {
    let mut out = Vec::new();
    while let Some((&len, rest)) = bytes.split_first() {
        let len = len as usize;
        if rest.len() < len + 8 {
            return None;
        }
        let name = std::str::from_utf8(&rest[..len]).ok()?.to_string();
        let value = u64::from_le_bytes(rest[len..len + 8].try_into().ok()?);
        out.push((name, value));
        bytes = &rest[len + 8..];
    }
    Some(out)
}

/// Adds `entries` (one rank's) to `sum`.
pub fn add(sum: &mut CounterMap, entries: impl IntoIterator<Item = (String, u64)>) {
    for (name, value) in entries {
        let slot = sum.entry(name).or_insert(0);
        *slot = slot.saturating_add(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_round_trip_and_sum_over_ranks() {
        let a = Counters {
            entries: vec![("lost_datagrams", 2), ("retransmissions", 300)],
        };
        let b = Counters {
            entries: vec![("lost_datagrams", 1)],
        };
        let mut sum = CounterMap::new();
        for c in [&a, &b] {
            let mut bytes = vec![9];
            encode(c, &mut bytes);
            add(&mut sum, decode(&bytes[1..]).unwrap());
        }
        assert_eq!(
            sum,
            CounterMap::from([
                ("lost_datagrams".to_string(), 3),
                ("retransmissions".to_string(), 300)
            ])
        );
        let mut bytes = Vec::new();
        encode(&a, &mut bytes);
        assert_eq!(decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(decode(&[]), Some(vec![]));
    }
}
