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
        SelftestCommand::Pingpong { max, iters } => {
            super::with_world(global, |world| pingpong(global, world, max, iters))
        }
    }
}

/// Ranks 0 and 1 ping-pong every power-of-two size up to `max` with a data check;
/// the other ranks only connect.
fn pingpong(
    global: &GlobalArgs,
    world: &mut ngauge::launch::World,
    max: usize,
    iters: usize,
) -> anyhow::Result<()> {
    let opts = super::transports::TransportOptions::new(global, world);
    let name = *global.transport.first().expect("clap gives a default");
    let mut t = super::transports::open(name, world, &opts)?;
    let me = world.rank;
    if me > 1 {
        world.control.barrier()?;
        return Ok(());
    }
    let peer = 1 - me;
    let fill = |size: usize, round: usize, from: usize| -> Vec<u8> {
        (0..size)
            .map(|i| (i.wrapping_mul(31) ^ round.wrapping_mul(7) ^ (from * 101)) as u8)
            .collect()
    };
    let sbuf = t.alloc_buffer(max)?;
    let rbuf = t.alloc_buffer(max)?;
    let mut size = 1;
    while size <= max {
        let mut half_rtt_us = Vec::with_capacity(iters);
        for round in 0..iters {
            t.buffer_mut(sbuf)?[..size].copy_from_slice(&fill(size, round, me));
            let start = std::time::Instant::now();
            if me == 0 {
                t.send(peer, sbuf.prefix(size))?;
                t.recv(peer, rbuf.prefix(size))?;
            } else {
                t.recv(peer, rbuf.prefix(size))?;
                t.send(peer, sbuf.prefix(size))?;
            }
            half_rtt_us.push(start.elapsed().as_secs_f64() * 1e6 / 2.0);
            if t.buffer(rbuf)?[..size] != fill(size, round, peer)[..] {
                anyhow::bail!("data check failed: size {size} round {round}");
            }
        }
        half_rtt_us.sort_by(f64::total_cmp);
        if me == 0 {
            println!(
                "{} ({}) size {size} median half round trip {:.2} us min {:.2} us (data checked)",
                t.name(),
                t.wait_mode().as_str(),
                half_rtt_us[half_rtt_us.len() / 2],
                half_rtt_us[0]
            );
        }
        size *= 2;
    }
    world.control.barrier()?;
    Ok(())
}
