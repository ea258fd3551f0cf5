//! A measured LogGP parameter file ([`crate::model::params`], what `ngauge loggp
//! --params-out` writes) as the simulator's [`Network`]: each range's wire latency
//! `L`, never `PRTT(1,0,1)/2` (by eq. (1), `PRTT(1,0,s) = 2 (L + o_s + o_r +
//! (s-1)G)`, that is `L` plus both overheads, which the simulator charges on the
//! CPUs), and its protocol. The first range serves every size below it too (the
//! file's rule), so it starts at 1 byte here.

use crate::sim::net::{LogGp, Network};

pub use crate::model::params::{ParamsError, ParamsWarning};
use crate::model::params::{ParamsFile, Protocol};

/// The network a parameter file describes, and what the reader assumed.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    /// The transport the parameters were measured on (empty if the file says none).
    pub transport: String,
    /// One protocol per range.
    pub network: Network,
    /// Derived or clamped latencies.
    pub warnings: Vec<ParamsWarning>,
    /// The file's ranges as measured, `(from_bytes, to_bytes)` (empty for
    /// parameters given inline, which hold for every size).
    pub ranges_bytes: Vec<(u64, u64)>,
}

impl Loaded {
    /// The reader's warnings and those of simulating `sizes`: below the first
    /// range, above the last ([`crate::model::params::coverage`]).
    pub fn warnings_at(&self, sizes: &[u64]) -> Vec<ParamsWarning> {
        let mut all = self.warnings.clone();
        all.extend(crate::model::params::coverage(&self.ranges_bytes, sizes));
        all
    }
}

/// Reads a parameter file's text as a network.
///
/// # Errors
/// [`ParamsError`] if [`ParamsFile::read`] refuses the text.
pub fn parse(text: &str) -> Result<Loaded, ParamsError> {
    let (file, warnings) = ParamsFile::read(text)?;
    let protocols = file
        .ranges
        .iter()
        .enumerate()
        .map(|(index, r)| {
            let from = if index == 0 { 1 } else { r.from_bytes };
            let rendezvous = r.protocol == Protocol::Rendezvous;
            let (os_us, send_overlap_us) = if rendezvous {
                (r.o_s_us, r.send_overlap_us)
            } else {
                send_ends_with_call(r.o_s_us, r.send_overlap_us, r.send_call_us)
            };
            let p = LogGp::from_us(
                r.wire_latency_us,
                os_us,
                r.o_r_us,
                r.g_us,
                r.big_g_us_per_byte,
                rendezvous,
            )
            .with_cpu_costs(send_overlap_us, r.recv_overlap_us, r.big_o_us_per_byte);
            (from, p)
        })
        .collect();
    let network = Network::new(protocols).map_err(|e| ParamsError::Json(e.to_string()))?;
    Ok(Loaded {
        ranges_bytes: file
            .ranges
            .iter()
            .map(|r| (r.from_bytes, r.to_bytes))
            .collect(),
        transport: file.transport,
        network,
        warnings,
    })
}

/// `(o_s, send_overlap)`, us, of an eager send whose call ends `send_call` after
/// it began (the file's lone send call, where it has one): the message leaves
/// when it did, `o_s - send_overlap` after the start, and the call ends at
/// `send_call`, no sooner than that and no later than `o_s` (eq. (4)'s CPU cost
/// of a send in a train, which over loopback reads above the call).
fn send_ends_with_call(os_us: f64, send_overlap_us: f64, send_call_us: Option<f64>) -> (f64, f64) {
    let Some(call) = send_call_us else {
        return (os_us, send_overlap_us);
    };
    let before = (os_us - send_overlap_us).max(0.0);
    let ends = call.max(before).min(os_us.max(before));
    (ends, ends - before)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1(extra: &str) -> String {
        format!(
            r#"{{"schema": "ngauge-loggp-params/1", "transport": "tcp", "ranges": [
            {{"from_bytes": 8, "to_bytes": 1024, "L_us": 10, "o_s_us": 2, "o_r_us": 3,
             "g_us": 4, "G_us_per_byte": 0.0003}},
            {{"from_bytes": 2048, "to_bytes": 65536, "L_us": 10, "o_s_us": 2, "o_r_us": 3,
             "g_us": 4, "G_us_per_byte": 0.0003{extra}}}]}}"#
        )
    }

    #[test]
    fn schema_1_derives_the_wire_latency_and_says_so() {
        let loaded = parse(&v1(r#", "protocol": "rendezvous""#)).unwrap();
        assert_eq!(loaded.transport, "tcp");
        let small = loaded.network.at(1);
        assert_eq!(small.l_ps, 5_000_000, "10 - 2 - 3 us");
        assert_eq!(
            (small.os_ps, small.or_ps, small.g_ps),
            (2_000_000, 3_000_000, 4_000_000)
        );
        assert_eq!(small.big_g_fs, 300_000, "0.0003 us/B = 300 ps/B");
        assert!(!small.rendezvous);
        assert!(loaded.network.at(4096).rendezvous);
        assert_eq!(loaded.warnings.len(), 2);
        assert_eq!(
            loaded.warnings[0].to_string(),
            "range from 8 B has no wire_latency_us: using L = L_us - o_s - o_r = 5.000 us (L_us 10.000 us is PRTT(1,0,1)/2, which includes both overheads)"
        );
    }

    #[test]
    fn schema_2_takes_the_wire_latency_as_written() {
        let text = r#"{"schema": "ngauge-loggp-params/2", "transport": "tcp", "ranges": [
            {"from_bytes": 1, "to_bytes": 64, "half_rtt_1b_us": 9.5, "wire_latency_us": 4.25,
             "o_s_us": 1, "o_r_us": 1, "g_us": 2, "G_us_per_byte": 0.001, "meta": {}}]}"#;
        let loaded = parse(text).unwrap();
        assert_eq!(loaded.network.at(1).l_ps, 4_250_000);
        assert!(loaded.warnings.is_empty());
    }

    #[test]
    fn a_negative_derived_latency_is_clamped_and_said() {
        let text = v1("").replacen("\"L_us\": 10", "\"L_us\": 4", 1);
        let loaded = parse(&text).unwrap();
        assert_eq!(loaded.network.at(1).l_ps, 0);
        assert!(matches!(
            loaded.warnings[1],
            ParamsWarning::NegativeLatency { derived_us, .. } if derived_us == -1.0
        ));
    }

    #[test]
    fn an_eager_send_call_ends_between_its_message_leaving_and_o_s() {
        // o_s 3 us of which the last 1.5 come after the message left.
        assert_eq!(send_ends_with_call(3.0, 1.5, None), (3.0, 1.5));
        assert_eq!(send_ends_with_call(3.0, 1.5, Some(2.0)), (2.0, 0.5));
        assert_eq!(send_ends_with_call(3.0, 1.5, Some(1.0)), (1.5, 0.0));
        assert_eq!(send_ends_with_call(3.0, 1.5, Some(4.0)), (3.0, 1.5));
        let text = |protocol: &str| {
            format!(
                r#"{{"schema": "ngauge-loggp-params/2", "ranges": [
                {{"from_bytes": 1, "to_bytes": 64, "half_rtt_1b_us": 2.5, "wire_latency_us": 0,
                 "o_s_us": 3, "send_call_us": 2, "o_r_us": 1, "send_overlap_us": 1.5,
                 "g_us": 4, "G_us_per_byte": 0.001{protocol}}}]}}"#
            )
        };
        let eager = parse(&text("")).unwrap().network.at(1);
        assert_eq!(eager.send_cpu_ps(1), (1_500_000, 500_000));
        let rendezvous = parse(&text(r#", "protocol": "rendezvous""#)).unwrap();
        assert_eq!(rendezvous.network.at(1).send_cpu_ps(1), (3_000_000, 0));
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let err = |t: &str| parse(t).unwrap_err().to_string();
        assert!(err(&v1(r#", "protocol": "magic""#)).contains("unknown variant `magic`"));
        assert!(err(&v1("").replace("/1", "/9")).contains("schema \"ngauge-loggp-params/9\""));
        assert_eq!(
            err(&v1("").replace("\"from_bytes\": 2048", "\"from_bytes\": 512")),
            "params file range 2 (512-65536 B): starts at or before the end of the previous range"
        );
        assert_eq!(
            err(&v1("").replace("\"g_us\": 4,", "\"g_us\": -4,")),
            "params file range 1 (8-1024 B): g_us = -4 is not a finite non-negative number"
        );
        assert_eq!(
            err(r#"{"schema": "ngauge-loggp-params/2", "ranges": []}"#),
            "params file has no ranges"
        );
        assert!(err("{").starts_with("params file is not valid"));
    }
}
