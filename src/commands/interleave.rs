//! Several transports in one run (`-t mpi,tcp`): open them all, then measure them
//! interleaved, size by size, alternating transports, so that a drift of the
//! machine (frequency, a neighbour's load) hits all of them alike and side-by-side
//! figures compare like with like (issue 6, "MPI versus raw"). Used by `pingpong`
//! and `loggp`.

use super::transports::{self, TransportOptions};
use crate::cli::{GlobalArgs, TransportName};
use anyhow::Context;
use ngauge::launch::World;
use ngauge::transport::Transport;

/// One connected transport of the run.
pub struct Opened {
    /// Which transport.
    pub name: TransportName,
    /// The connected transport.
    pub transport: Box<dyn Transport>,
    /// Its wait mode (`poll` or `block`), for reports.
    pub wait: &'static str,
}

/// Opens every transport of `-t` in the order given (a collective call on every
/// rank). `adjust` may change the options per transport before it is opened; the
/// `--wait` warning is added to `warnings` once.
pub fn open_all(
    global: &GlobalArgs,
    world: &mut World,
    warnings: &mut Vec<String>,
    mut adjust: impl FnMut(TransportName, &mut TransportOptions),
) -> anyhow::Result<Vec<Opened>> {
    let mut open = Vec::new();
    for &name in &global.transport {
        let mut opts = TransportOptions::new(global, world);
        if let Some(w) = opts.warning(world) {
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
        adjust(name, &mut opts);
        let transport = transports::open(name, world, &opts)
            .with_context(|| format!("opening {}", name.as_str()))?;
        let wait = transport.wait_mode().as_str();
        open.push(Opened {
            name,
            transport,
            wait,
        });
    }
    Ok(open)
}

/// The measuring order: for each size of `sizes` in turn, every transport (index into
/// `per_transport`, in order) whose own size list holds it.
pub fn schedule<T: Copy + PartialEq>(sizes: &[T], per_transport: &[Vec<T>]) -> Vec<(T, usize)> {
    sizes
        .iter()
        .flat_map(|&s| {
            per_transport
                .iter()
                .enumerate()
                .filter(move |(_, these)| these.contains(&s))
                .map(move |(i, _)| (s, i))
        })
        .collect()
}

/// A usage error when a transport is listed twice (its results would be ambiguous).
pub fn check_distinct(transports: &[TransportName]) -> Result<(), crate::UsageError> {
    for (i, t) in transports.iter().enumerate() {
        if transports[..i].contains(t) {
            return Err(crate::UsageError(format!(
                "--transport: {} is listed twice",
                t.as_str()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_alternate_between_transports_and_skip_missing_ones() {
        let sizes = [1u64, 2, 4];
        let order = schedule(&sizes, &[vec![1, 2, 4], vec![1, 4], vec![2]]);
        assert_eq!(order, vec![(1, 0), (1, 1), (2, 0), (2, 2), (4, 0), (4, 1)]);
        assert!(schedule::<u64>(&sizes, &[]).is_empty());
    }

    #[test]
    fn a_transport_listed_twice_is_a_usage_error() {
        use TransportName::{Tcp, Udp};
        assert!(check_distinct(&[Tcp, Udp]).is_ok());
        assert!(check_distinct(&[Tcp, Udp, Tcp])
            .unwrap_err()
            .0
            .contains("tcp is listed twice"));
    }
}
