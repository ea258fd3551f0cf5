//! `ngauge selftest ...` (hidden): launcher self-tests for the integration tests.

use crate::cli::{GlobalArgs, SelftestCommand};

pub fn run(global: &GlobalArgs, cmd: &SelftestCommand) -> anyhow::Result<()> {
    match *cmd {
        SelftestCommand::BarrierLoop {
            count,
            die_rank,
            fail_rank,
            hang_rank,
            stop_rank,
            pause_rank,
            pause_s,
            die_after,
        } => super::common::with_world(global, |world| {
            if world.rank == 0 {
                let pids: Vec<u32> = world.peers.iter().map(|p| p.pid).collect();
                eprintln!(
                    "ngauge: selftest: {} ranks joined, pids {pids:?}",
                    world.size
                );
            }
            let mut done = 0u64;
            while count == 0 || done < count {
                if die_rank == Some(world.rank) && done == die_after {
                    let _ = rustix::process::kill_process(
                        rustix::process::getpid(),
                        rustix::process::Signal::KILL,
                    );
                }
                if hang_rank == Some(world.rank) && done == die_after {
                    loop {
                        std::thread::sleep(std::time::Duration::from_secs(3600));
                    }
                }
                if stop_rank == Some(world.rank) && done == die_after {
                    let _ = rustix::process::kill_process(
                        rustix::process::getpid(),
                        rustix::process::Signal::STOP,
                    );
                }
                if pause_rank == Some(world.rank) && done == die_after {
                    std::thread::sleep(std::time::Duration::try_from_secs_f64(pause_s)?);
                }
                if fail_rank == Some(world.rank) && done == die_after {
                    anyhow::bail!("selftest failure requested after {done} barriers");
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
