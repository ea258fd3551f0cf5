//! `-t verbs`: opens the verbs transport of a rank (cargo feature `verbs`) from the
//! `--device`, `--port`, `--gid-index` and `--verbs-op` flags.

use super::transports::TransportOptions;
use crate::cli::GlobalArgs;
use ngauge::launch::World;
use ngauge_transport::Transport;

/// Connects this rank to every other rank over verbs. A machine without a usable
/// device is bad input (exit status 2) with the reason in one line.
#[cfg(feature = "verbs")]
pub fn open(world: &mut World, opts: &TransportOptions) -> anyhow::Result<Box<dyn Transport>> {
    use crate::cli::VerbsOpArg;
    use ngauge_transport::TransportError;
    let verbs = &opts.verbs;
    let opts = ngauge_verbs::VerbsOptions {
        device: verbs.device.clone(),
        port: verbs.port,
        gid_index: verbs.gid_index,
        op: match verbs.verbs_op {
            VerbsOpArg::Send => ngauge_verbs::VerbsOp::Send,
            VerbsOpArg::Write => ngauge_verbs::VerbsOp::Write,
        },
        wait: opts.wait,
        timeout: opts.timeout,
        ..ngauge_verbs::VerbsOptions::default()
    };
    match ngauge_verbs::open(world.control.as_mut(), &opts) {
        Ok(t) => Ok(Box::new(t)),
        Err(e @ TransportError::Unavailable { .. }) => {
            Err(anyhow::Error::new(crate::UsageError(e.to_string())))
        }
        Err(e) => Err(e.into()),
    }
}

/// Without the `verbs` feature: a one-line usage error.
#[cfg(not(feature = "verbs"))]
pub fn open(_world: &mut World, opts: &TransportOptions) -> anyhow::Result<Box<dyn Transport>> {
    let _unused_without_the_feature = &opts.verbs;
    Err(anyhow::Error::new(crate::UsageError(
        "verbs is not compiled in: rebuild with `cargo build --release --features verbs`".into(),
    )))
}

/// `ngauge info`'s verbs line: usable, or why not.
pub fn probe(global: &GlobalArgs) -> Result<String, String> {
    #[cfg(feature = "verbs")]
    {
        ngauge_verbs::probe(global.verbs.device.as_deref(), global.verbs.port)
    }
    #[cfg(not(feature = "verbs"))]
    {
        let _ = global;
        Err("built without the `verbs` feature".into())
    }
}
