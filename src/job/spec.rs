//! [`JobSpec`]: what a job needs besides the launcher: which transports, how they
//! wait, their socket buffers, timeouts, verbs and UCX settings.
//!
//! Field names are snake_case with their unit (`send_buffer_bytes`, `timeout_s`),
//! like the fields of the result documents; values of choice enums are spelled as
//! on the command line (`poll`, `in-turn`, `2rtt`; see [`crate::names`]). Unknown
//! fields are rejected, so a misspelt key in a suite file is an error, not a
//! default.

use super::JobError;
use crate::names::named_enum;
use serde::{Deserialize, Serialize};
use std::time::Duration;

named_enum! {
    /// The transports ngauge knows, whether compiled in or not.
    pub enum TransportName("transport") {
        /// TCP sockets, one connection per pair, TCP_NODELAY.
        Tcp = "tcp",
        /// UDP datagrams with sequence numbers and retransmission.
        Udp = "udp",
        /// InfiniBand/RoCE verbs (cargo feature `verbs`).
        Verbs = "verbs",
        /// MPI point-to-point through a C shim (cargo feature `mpi`).
        Mpi = "mpi",
        /// UCX's UCP tag API or RMA puts (cargo feature `ucx`).
        Ucx = "ucx",
        /// libfabric RDM endpoints (cargo feature `ofi`).
        Ofi = "ofi",
    }
}

named_enum! {
    /// How data transports wait: a [`ngauge_transport::WaitMode`], or `auto` to let
    /// the launcher decide ([`crate::launch::World::default_wait_mode`]).
    pub enum WaitPolicy("wait mode") {
        /// Poll when this host's ranks fit on its cores, block otherwise.
        Auto = "auto",
        /// Spin on nonblocking calls (lowest latency, burns the core).
        Poll = "poll",
        /// Sleep in the kernel.
        Block = "block",
    }
}

named_enum! {
    /// The data path of the verbs transport.
    pub enum VerbsOp("verbs operation") {
        /// Two-sided send/recv into pre-posted receives.
        Send = "send",
        /// One-sided RDMA write with immediate into the region the receiver advertised.
        Write = "write",
        /// One-sided RDMA write into a ring the receiver polls (the last byte of
        /// the slot, as `ib_write_lat`): no completion at the receiver.
        WritePoll = "write-poll",
    }
}

named_enum! {
    /// The data path of the UCX transport.
    pub enum UcxOp("UCX operation") {
        /// Two-sided `ucp_tag_send_nbx` into posted `ucp_tag_recv_nbx`.
        Send = "send",
        /// One-sided `ucp_put_nbx` into a ring the receiver polls.
        Put = "put",
    }
}

named_enum! {
    /// How the UCX transport's endpoints connect.
    pub enum UcxConnect("UCX connection") {
        /// Worker addresses exchanged over the control channel.
        Address = "address",
        /// UCX's client-server mode through a connection manager.
        Sockaddr = "sockaddr",
    }
}

/// Settings of the UCX transport.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct UcxSpec {
    /// UCX's transport list (`posix,self`, `tcp`, `rc`, ...); absent: the
    /// environment's `UCX_TLS`, else UCX's default.
    pub tls: Option<String>,
    /// Data path.
    pub op: UcxOp,
    /// How endpoints connect.
    pub connect: UcxConnect,
    /// The IPv4 address listeners bind with `connect = "sockaddr"`; absent:
    /// the host's first non-loopback one.
    pub listen_ip: Option<std::net::Ipv4Addr>,
}

impl Default for UcxSpec {
    fn default() -> Self {
        UcxSpec {
            tls: None,
            op: UcxOp::Send,
            connect: UcxConnect::Address,
            listen_ip: None,
        }
    }
}

named_enum! {
    /// The data path of the ofi transport.
    pub enum OfiOp("ofi operation") {
        /// Two-sided messages (tagged where the provider offers them).
        Send = "send",
        /// One-sided `fi_writedata` into the region the receiver advertised.
        Write = "write",
    }
}

/// Settings of the ofi (libfabric) transport.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct OfiSpec {
    /// Provider as `fi_info` names it (`shm`, `tcp;ofi_rxm`, `cxi`); the first RDM
    /// provider `fi_getinfo` offers when absent.
    pub provider: Option<String>,
    /// Data path.
    pub op: OfiOp,
}

impl Default for OfiSpec {
    fn default() -> Self {
        OfiSpec {
            provider: None,
            op: OfiOp::Send,
        }
    }
}

/// Largest socket buffer a spec may ask for (1 GiB).
pub const MAX_BUFFER_BYTES: usize = 1 << 30;
/// Longest timeout a spec may give (one day).
pub const MAX_TIMEOUT_S: f64 = 86_400.0;

/// Settings of the verbs transport.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct VerbsSpec {
    /// RDMA device (see `ibv_devices`); the first one when absent.
    pub device: Option<String>,
    /// Port of the device, 1-based.
    pub port: u8,
    /// GID table index for RoCE or routed InfiniBand; absent: no GRH on
    /// InfiniBand, the first IPv4-mapped GID on RoCE.
    pub gid_index: Option<u8>,
    /// Data path.
    pub op: VerbsOp,
}

impl Default for VerbsSpec {
    fn default() -> Self {
        VerbsSpec {
            device: None,
            port: 1,
            gid_index: None,
            op: VerbsOp::Send,
        }
    }
}

/// Everything needed to open a job's data transports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct JobSpec {
    /// Transports to open, in order; several are measured interleaved.
    pub transports: Vec<TransportName>,
    /// How data transports wait.
    pub wait: WaitPolicy,
    /// `SO_SNDBUF` of TCP/UDP sockets; the kernel default when absent.
    pub send_buffer_bytes: Option<usize>,
    /// `SO_RCVBUF` of TCP/UDP sockets; the kernel default when absent.
    pub recv_buffer_bytes: Option<usize>,
    /// How long a data operation may make no progress before its peer is declared
    /// lost, in seconds.
    pub timeout_s: f64,
    /// Settings of the verbs transport.
    pub verbs: VerbsSpec,
    /// Settings of the UCX transport.
    pub ucx: UcxSpec,
    /// Settings of the ofi transport.
    pub ofi: OfiSpec,
}

impl Default for JobSpec {
    fn default() -> Self {
        JobSpec {
            transports: vec![TransportName::Tcp],
            wait: WaitPolicy::Auto,
            send_buffer_bytes: None,
            recv_buffer_bytes: None,
            timeout_s: 30.0,
            verbs: VerbsSpec::default(),
            ucx: UcxSpec::default(),
            ofi: OfiSpec::default(),
        }
    }
}

impl JobSpec {
    /// Rejects a spec no job can run: no transport or one listed twice, a timeout
    /// outside `(0, 1 day]`, a buffer outside `1..=1 GiB`, port 0. Every error is
    /// the user's input ([`JobError::is_input`]).
    pub fn validate(&self) -> Result<(), JobError> {
        if self.transports.is_empty() {
            return Err(JobError::NoTransport);
        }
        for (i, t) in self.transports.iter().enumerate() {
            if self.transports[..i].contains(t) {
                return Err(JobError::DuplicateTransport(*t));
            }
        }
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0 && self.timeout_s <= MAX_TIMEOUT_S)
        {
            return Err(JobError::BadTimeout(self.timeout_s));
        }
        for (what, bytes) in [
            ("send", self.send_buffer_bytes),
            ("receive", self.recv_buffer_bytes),
        ] {
            if let Some(b) = bytes.filter(|b| !(1..=MAX_BUFFER_BYTES).contains(b)) {
                return Err(JobError::BadBuffer { what, bytes: b });
            }
        }
        if self.verbs.port == 0 {
            return Err(JobError::BadVerbsPort);
        }
        Ok(())
    }

    /// The timeout as a duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_s)
    }

    /// Whether `name` is among the transports.
    pub fn uses(&self, name: TransportName) -> bool {
        self.transports.contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_reads_from_json_with_defaults_and_rejects_unknown_fields() {
        let spec: JobSpec =
            serde_json::from_str(r#"{"transports": ["mpi", "tcp"], "wait": "block"}"#).unwrap();
        assert_eq!(spec.transports, [TransportName::Mpi, TransportName::Tcp]);
        assert_eq!(spec.wait, WaitPolicy::Block);
        assert_eq!(spec.timeout_s, 30.0);
        assert_eq!(spec.verbs, VerbsSpec::default());
        let spec: JobSpec = serde_json::from_str(r#"{"verbs": {"op": "write"}}"#).unwrap();
        assert_eq!(spec.verbs.op, VerbsOp::Write);
        assert_eq!(spec.transports, [TransportName::Tcp]);
        for bad in [
            r#"{"transport": ["tcp"]}"#,
            r#"{"transports": ["carrier-pigeon"]}"#,
            r#"{"wait": "spin"}"#,
            r#"{"verbs": {"gid": 3}}"#,
        ] {
            assert!(serde_json::from_str::<JobSpec>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn validation_names_what_is_wrong() {
        let ok = JobSpec::default();
        assert!(ok.validate().is_ok());
        let check = |spec: JobSpec, expected: &str| {
            let e = spec.validate().unwrap_err();
            assert!(e.is_input(), "{e}");
            assert!(e.to_string().contains(expected), "{e}");
        };
        use TransportName::{Tcp, Udp};
        check(
            JobSpec {
                transports: vec![Tcp, Udp, Tcp],
                ..ok.clone()
            },
            "tcp is listed twice",
        );
        check(
            JobSpec {
                transports: vec![],
                ..ok.clone()
            },
            "no transport",
        );
        for t in [0.0, -1.0, f64::NAN, 1e6] {
            check(
                JobSpec {
                    timeout_s: t,
                    ..ok.clone()
                },
                "timeout",
            );
        }
        check(
            JobSpec {
                recv_buffer_bytes: Some(0),
                ..ok.clone()
            },
            "receive buffer",
        );
        check(
            JobSpec {
                send_buffer_bytes: Some(MAX_BUFFER_BYTES + 1),
                ..ok.clone()
            },
            "send buffer",
        );
    }
}
