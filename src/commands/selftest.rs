//! `ngauge selftest ...` (hidden): launcher self-tests for the integration tests.

use crate::cli::{GlobalArgs, SelftestCommand};

pub fn run(global: &GlobalArgs, cmd: &SelftestCommand) -> anyhow::Result<()> {
    match *cmd {
        SelftestCommand::BarrierLoop {
            count,
            die_rank,
            die_after,
        } => super::with_world(global, |world| {
            if world.rank == 0 {
                eprintln!("ngauge: selftest: {} ranks joined", world.size);
            }
            let mut done = 0u64;
            while count == 0 || done < count {
                if die_rank == Some(world.rank) && done == die_after {
                    let _ = rustix::process::kill_process(
                        rustix::process::getpid(),
                        rustix::process::Signal::KILL,
                    );
                }
                world.control.barrier()?;
                done += 1;
            }
            if world.rank == 0 {
                println!("barriers: {done}");
            }
            Ok(())
        }),
    }
}
