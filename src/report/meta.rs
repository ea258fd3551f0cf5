//! `meta`: the factors a reader needs to reproduce a result (Hunold & Carpen-Amarie,
//! sec. 2: compiler, library, launcher, pinning, timer, frequency, sync method, date).

use crate::build_facts::BuildFacts;
use crate::clock::{FrequencyControl, TimerSource};
use crate::job::TransportName;
use crate::launch::World;
use crate::sync::Algorithm;
use crate::time_format::rfc3339_utc;
use ngauge_transport::WaitMode;
use serde::Serialize;

/// Metadata attached to every JSON result as `meta`; built with [`Meta::builder`].
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Meta {
    /// ngauge version.
    pub version: &'static str,
    /// Build facts.
    pub build: BuildFacts,
    /// Host name.
    pub host: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Transport(s) measured.
    pub transport: Vec<TransportName>,
    /// Wait mode (`poll` or `block`), per transport when several
    /// (`mpi=poll,tcp=block`), when one was used.
    pub wait: Option<String>,
    /// `pingpong`: the loop that timed the round trips, per transport
    /// (`mpi=native,tcp=generic`; see `patterns::pingpong`). Absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing_loop: Option<String>,
    /// Launcher that started the ranks (`local`, `mpirun (Open MPI)`, `srun`, ...).
    pub launcher: String,
    /// Number of ranks.
    pub np: usize,
    /// Core each rank was pinned to (`null` where unpinned), indexed by rank.
    pub pinning: Vec<Option<usize>>,
    /// Timer source.
    pub timer: TimerSource,
    /// Calibrated timer frequency in Hz.
    pub timer_hz: f64,
    /// Frequency control (`not controllable (no cpufreq on this machine)`, governor).
    pub frequency_control: String,
    /// Clock synchronization algorithm used, if any.
    pub sync: Option<Algorithm>,
    /// UTC date and time of the run, RFC 3339.
    pub date: String,
    /// The command line (or suite invocation) as given by the front end, the
    /// program (`argv[0]`) first.
    pub command_line: Vec<String>,
    /// The command line of the launcher that started the job (`mpirun ...`,
    /// `srun ...`), when it runs on the writing rank's host. Absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launcher_command: Option<Vec<String>>,
    /// The writing rank's variables that tune the MPI library, its runtime and
    /// the fabrics (`OMPI_MCA_*`, which holds what `mpirun --mca` set, `PRTE_MCA_*`,
    /// `PMIX_MCA_*`, `UCX_*`, `FI_*`, `I_MPI_*`, `MPICH_*`, `MPIR_CVAR_*`).
    pub tuning_env: std::collections::BTreeMap<String, String>,
    /// The MPI library, when MPI ran in this process. Absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mpi: Option<MpiMeta>,
    /// What UCX used, when `ucx` was measured. Absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ucx: Option<UcxMeta>,
    /// The ofi endpoint's provider, fabric, domain, libfabric version, sizes,
    /// `mr_mode` and `FI_*` environment, when ofi was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ofi: Option<crate::job::ofi::OfiFacts>,
    /// The PMIx server the ranks bootstrapped through, under the `pmix`
    /// launcher. Absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pmix: Option<PmixMeta>,
}

/// The MPI library the process ran with and the shim built against it.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct MpiMeta {
    /// `MPI_Get_library_version`, first line (`Open MPI v4.1.6, ...`).
    pub library: String,
    /// The family of the shim loaded (`openmpi`, `mpich`): the build carries one
    /// per MPI installed, and the launcher or `NGAUGE_MPI` chose this one.
    pub shim_flavor: &'static str,
    /// The compiler wrapper the shim loaded was compiled with.
    pub shim_mpicc: &'static str,
}

impl MpiMeta {
    /// The facts of the MPI library this process initialized, if it is live.
    #[cfg(feature = "mpi")]
    fn recorded() -> Option<MpiMeta> {
        ngauge_mpi::Mpi::live().map(|mpi| MpiMeta {
            library: mpi.library_version().into(),
            shim_flavor: ngauge_mpi::shim().flavor,
            shim_mpicc: ngauge_mpi::shim().mpicc,
        })
    }

    #[cfg(not(feature = "mpi"))]
    fn recorded() -> Option<MpiMeta> {
        None
    }
}

/// The PMIx server of a job launched through PMIx (`launch::pmix`).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PmixMeta {
    /// The server: the resource manager's name when it offers one, else the
    /// launcher its environment shows (`srun (Slurm)`, `mpirun (Open MPI)`).
    pub server: String,
    /// The resource manager's version when offered, else the server's PMIx version.
    pub server_version: Option<String>,
    /// The PMIx client library ngauge ran with (`PMIx_Get_version`).
    pub library_version: String,
    /// The job's PMIx namespace.
    pub namespace: String,
}

impl PmixMeta {
    /// The facts of the PMIx server this process bootstrapped through, if any.
    #[cfg(feature = "pmix")]
    fn recorded() -> Option<PmixMeta> {
        crate::launch::pmix::recorded().map(|f| PmixMeta {
            server: f.server.clone(),
            server_version: f.server_version.clone(),
            library_version: f.library_version.clone(),
            namespace: f.namespace.clone(),
        })
    }

    #[cfg(not(feature = "pmix"))]
    fn recorded() -> Option<PmixMeta> {
        None
    }
}

/// What the UCX transport of the writing rank used: what UCX says it selected.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct UcxMeta {
    /// UCX's version at run time.
    pub version: String,
    /// The data path (`send` or `put`).
    pub op: String,
    /// How the endpoints connected (`address` or `sockaddr`, `--ucx-connect`).
    pub connect: String,
    /// The transport list the context was given (`--ucx-tls`, else `UCX_TLS`);
    /// absent: UCX's default.
    pub tls: Option<String>,
    /// The `UCX_*` variables of the environment.
    pub env: std::collections::BTreeMap<String, String>,
    /// Each endpoint of the writing rank, as `ucp_ep_print_info` shows it.
    pub endpoints: Vec<UcxEndpoint>,
}

/// One UCX endpoint: its lanes and where its tag send switches protocol.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct UcxEndpoint {
    /// The peer rank.
    pub peer: usize,
    /// `transport/device` of each lane, with what UCP uses it for
    /// (`posix/memory am am_bw`).
    pub lanes: Vec<String>,
    /// `ucp_tag_send_nbx`'s protocols, each with the first message size in
    /// bytes it takes (`egr/short` from 0, `rndv` from 8256, ...).
    pub tag_send: Vec<UcxSwitch>,
}

/// A protocol of UCX's tag send and the smallest message it carries.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct UcxSwitch {
    /// The protocol (`egr/short`, `egr/bcopy`, `egr/zcopy`, `rndv`).
    pub protocol: String,
    /// Smallest message, in bytes, it carries.
    pub first_bytes: u64,
}

impl UcxMeta {
    /// The facts of the UCX transport this process opened last, if any.
    #[cfg(feature = "ucx")]
    fn recorded() -> Option<UcxMeta> {
        let f = ngauge_ucx::facts::recorded()?;
        Some(UcxMeta {
            version: f.version,
            op: f.op.into(),
            connect: f.connect.into(),
            tls: f.tls,
            env: f.env.into_iter().collect(),
            endpoints: f
                .endpoints
                .into_iter()
                .map(|e| UcxEndpoint {
                    peer: e.peer,
                    lanes: e
                        .lanes
                        .into_iter()
                        .map(|l| {
                            let mut words = vec![format!("{}/{}", l.transport, l.device)];
                            words.extend(l.roles);
                            words.join(" ")
                        })
                        .collect(),
                    tag_send: e
                        .tag_send
                        .into_iter()
                        .map(|s| UcxSwitch {
                            protocol: s.protocol,
                            first_bytes: s.first_bytes,
                        })
                        .collect(),
                })
                .collect(),
        })
    }

    #[cfg(not(feature = "ucx"))]
    fn recorded() -> Option<UcxMeta> {
        None
    }
}

impl Meta {
    /// Starts the metadata of a result timed with `timer` at `timer_hz`; the front
    /// end gives its `command_line` (the library does not read the process's
    /// arguments). Host facts (name, kernel, frequency control, date) are read here.
    pub fn builder(
        command_line: impl IntoIterator<Item = String>,
        timer: TimerSource,
        timer_hz: f64,
    ) -> MetaBuilder {
        let uname = rustix::system::uname();
        MetaBuilder(Meta {
            version: env!("CARGO_PKG_VERSION"),
            build: BuildFacts::current(),
            host: uname.nodename().to_string_lossy().into_owned(),
            kernel: uname.release().to_string_lossy().into_owned(),
            transport: Vec::new(),
            wait: None,
            timing_loop: None,
            launcher: "none".into(),
            np: 1,
            pinning: Vec::new(),
            timer,
            timer_hz,
            frequency_control: String::new(),
            sync: None,
            date: rfc3339_utc(std::time::SystemTime::now()),
            command_line: command_line.into_iter().collect(),
            launcher_command: super::provenance::launcher_command(),
            tuning_env: super::provenance::tuning_env(std::env::vars_os().map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })),
            mpi: MpiMeta::recorded(),
            ucx: None,
            ofi: None,
            pmix: None,
        })
    }
}

/// Builds a [`Meta`]: one place that knows how each fact is recorded.
#[derive(Clone, Debug)]
#[must_use]
pub struct MetaBuilder(Meta);

impl MetaBuilder {
    /// The job: its launcher and size, and every rank's pinned core (indexed by
    /// rank, from [`World::gather_pinning`] or the ranks' own reports).
    pub fn job(mut self, world: &World, pinning: Vec<Option<usize>>) -> Self {
        self.0.launcher = world.env.kind.describe().into();
        self.0.pmix = PmixMeta::recorded();
        self.0.np = world.size;
        self.0.pinning = pinning;
        self
    }

    /// A single process (no job): its own pinned core.
    pub fn process(mut self, pinned_core: Option<usize>) -> Self {
        self.0.pinning = vec![pinned_core];
        self
    }

    /// The transports measured and how each waited; one transport's wait mode is
    /// written alone (`poll`), several as `name=mode` pairs.
    pub fn transports(mut self, waits: &[(TransportName, WaitMode)]) -> Self {
        self.0.transport = waits.iter().map(|(t, _)| *t).collect();
        self.0.ucx = self.ucx_facts();
        self.0.ofi = self.ofi_facts();
        self.0.wait = match waits {
            [] => None,
            [(_, w)] => Some(w.to_string()),
            _ => Some(pairs(waits)),
        };
        self
    }

    /// The transports measured and how each waited, always as `name=mode` pairs
    /// (`pingpong`, which has always written them so).
    pub fn transports_named(mut self, waits: &[(TransportName, WaitMode)]) -> Self {
        self.0.transport = waits.iter().map(|(t, _)| *t).collect();
        self.0.ucx = self.ucx_facts();
        self.0.ofi = self.ofi_facts();
        self.0.wait = (!waits.is_empty()).then(|| pairs(waits));
        self
    }

    /// UCX's facts when `ucx` is among the transports.
    fn ucx_facts(&self) -> Option<UcxMeta> {
        self.0
            .transport
            .contains(&TransportName::Ucx)
            .then(UcxMeta::recorded)
            .flatten()
    }

    /// The ofi endpoint's facts when `ofi` is among the transports.
    fn ofi_facts(&self) -> Option<crate::job::ofi::OfiFacts> {
        self.0
            .transport
            .contains(&TransportName::Ofi)
            .then(crate::job::ofi::opened_facts)
            .flatten()
    }

    /// `pingpong`'s timing loops, per transport.
    pub fn timing_loop(mut self, loops: String) -> Self {
        self.0.timing_loop = Some(loops);
        self
    }

    /// A simulation of `np` ranks in this one process (`launcher` says so; no
    /// rank is pinned, no timer calibrated).
    pub fn simulated(mut self, np: usize) -> Self {
        self.0.launcher = "none (simulation)".into();
        self.0.np = np;
        self
    }

    /// The clock synchronization used.
    pub fn sync(mut self, algorithm: Algorithm) -> Self {
        self.0.sync = Some(algorithm);
        self
    }

    /// The frequency control as already read (else [`MetaBuilder::build`] reads it).
    pub fn frequency_control(mut self, description: &str) -> Self {
        self.0.frequency_control = description.into();
        self
    }

    /// The metadata.
    pub fn build(mut self) -> Meta {
        if self.0.frequency_control.is_empty() {
            self.0.frequency_control = FrequencyControl::read().description;
        }
        self.0
    }
}

fn pairs(waits: &[(TransportName, WaitMode)]) -> String {
    waits
        .iter()
        .map(|(t, w)| format!("{t}={w}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_modes_are_written_alone_or_as_pairs() {
        use TransportName::{Mpi, Tcp};
        use WaitMode::{Block, Poll};
        let meta = |waits: &[(TransportName, WaitMode)], named: bool| {
            let b = Meta::builder(["ngauge".to_string()], TimerSource::Rdtscp, 1e9)
                .frequency_control("fixed");
            let b = if named {
                b.transports_named(waits)
            } else {
                b.transports(waits)
            };
            b.build()
        };
        assert_eq!(meta(&[(Tcp, Poll)], false).wait.as_deref(), Some("poll"));
        assert_eq!(meta(&[(Tcp, Poll)], true).wait.as_deref(), Some("tcp=poll"));
        let two = meta(&[(Mpi, Poll), (Tcp, Block)], false);
        assert_eq!(two.wait.as_deref(), Some("mpi=poll,tcp=block"));
        assert_eq!(two.transport, [Mpi, Tcp]);
        assert_eq!(meta(&[], false).wait, None);
        assert_eq!(two.frequency_control, "fixed");
        assert_eq!(two.command_line, ["ngauge"]);
    }
}
