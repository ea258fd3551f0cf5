//! The ofi (libfabric) transport in a job: [`OfiSpec`] to the crate's options,
//! and the facts of the endpoint this process opened last, which every result's
//! `meta` records ([`opened_facts`]): provider, fabric, domain, libfabric's
//! version, `inject_size`, `max_msg_size`, `mr_mode` and the `FI_*` environment.

#[cfg(feature = "ofi")]
use super::OfiOp;
use super::OfiSpec;
use serde::Serialize;
use std::sync::Mutex;

/// What an opened ofi endpoint runs on (see `ngauge_ofi::Facts`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct OfiFacts {
    /// Provider (`tcp;ofi_rxm`, `shm`).
    pub provider: String,
    /// Fabric name.
    pub fabric: String,
    /// Domain name.
    pub domain: String,
    /// Version of the libfabric library loaded.
    pub libfabric_version: String,
    /// Largest message sent with `fi_inject`.
    pub inject_size_bytes: usize,
    /// Largest message the endpoint takes.
    pub max_msg_size_bytes: u64,
    /// The provider's memory-registration requirements.
    pub mr_mode: Vec<String>,
    /// `tagged` or `msg`.
    pub messages: String,
    /// The data path (`send`, `write`).
    pub op: String,
    /// How `--wait block` waits (`fi_cq_sread`, `yield`), or `none (polled)`.
    pub wait_object: String,
    /// Every `FI_*` variable of the environment, `NAME=value`.
    pub env: Vec<String>,
}

static OPENED: Mutex<Option<OfiFacts>> = Mutex::new(None);

/// The facts of the ofi endpoint this process opened last, if any.
pub fn opened_facts() -> Option<OfiFacts> {
    OPENED.lock().map_or(None, |f| f.clone())
}

/// The crate's data path for `op`.
#[cfg(feature = "ofi")]
fn op(op: OfiOp) -> ngauge_ofi::OfiOp {
    match op {
        OfiOp::Send => ngauge_ofi::OfiOp::Send,
        OfiOp::Write => ngauge_ofi::OfiOp::Write,
    }
}

/// Opens the endpoint (a collective call) and keeps its facts for `meta`.
#[cfg(feature = "ofi")]
pub fn open(
    control: &mut dyn ngauge_transport::Control,
    spec: &OfiSpec,
    wait: ngauge_transport::WaitMode,
    timeout: std::time::Duration,
) -> Result<Box<dyn ngauge_transport::Transport>, ngauge_transport::TransportError> {
    let o = ngauge_ofi::OfiOptions {
        provider: spec.provider.clone(),
        op: op(spec.op),
        wait,
        timeout,
        plain_messages: false,
    };
    let t = ngauge_ofi::open(control, &o)?;
    record(t.facts());
    Ok(Box::new(t))
}

/// Opens the endpoint with a one-sided window of `bytes` for `rma` (a collective
/// call; `wait` paces its progress thread) and keeps its facts for `meta`.
#[cfg(feature = "ofi")]
pub fn open_window(
    control: &mut dyn ngauge_transport::Control,
    spec: &OfiSpec,
    wait: ngauge_transport::WaitMode,
    timeout: std::time::Duration,
    bytes: usize,
) -> Result<ngauge_ofi::OfiWindow, ngauge_transport::TransportError> {
    let o = ngauge_ofi::OfiOptions {
        provider: spec.provider.clone(),
        wait,
        timeout,
        ..ngauge_ofi::OfiOptions::default()
    };
    let w = ngauge_ofi::open_window(control, &o, bytes)?;
    record(w.facts());
    Ok(w)
}

/// Keeps the facts of an endpoint this process opened for `meta`.
#[cfg(feature = "ofi")]
fn record(f: &ngauge_ofi::Facts) {
    let facts = OfiFacts {
        provider: f.provider.clone(),
        fabric: f.fabric.clone(),
        domain: f.domain.clone(),
        libfabric_version: f.libfabric_version.clone(),
        inject_size_bytes: f.inject_size_bytes,
        max_msg_size_bytes: f.max_msg_size_bytes,
        mr_mode: f.mr_mode.clone(),
        messages: f.messages.into(),
        op: f.op.into(),
        wait_object: f.wait_object.into(),
        env: f.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
    };
    if let Ok(mut slot) = OPENED.lock() {
        *slot = Some(facts);
    }
}

/// `ngauge info`: what a run with `spec` would use and what `fi_getinfo` offers,
/// one line each; `Err` with the reason it cannot run.
pub fn probe(spec: &OfiSpec) -> Result<String, String> {
    #[cfg(feature = "ofi")]
    {
        let p = ngauge_ofi::probe(spec.provider.as_deref(), op(spec.op))?;
        let mut out = format!("libfabric {}; a run uses {}", p.libfabric_version, p.uses);
        for o in &p.offers {
            out += &format!("\n  offers {o}");
        }
        Ok(out)
    }
    #[cfg(not(feature = "ofi"))]
    {
        let _ = spec;
        Err("built without the `ofi` feature".into())
    }
}
