//! From the star the rendezvous leaves to the binomial control tree
//! ([`ngauge_transport::tree`]) and its liveness links ([`super::liveness`]).
//!
//! Collective, over the star: every rank with children listens on two ephemeral
//! ports of its data address (control, liveness) and gathers them at rank 0, which
//! hands each rank its parent's table entry and ports and one fresh key for the
//! whole tree (so no rank needs the job table to link itself). Each
//! rank then connects to its parent twice and proves with that key that it is the
//! rank it claims ([`ngauge_transport::auth`], the same handshake as the data
//! plane), and accepts its own children on both ports. A rank whose parent is rank 0
//! keeps its rendezvous connection as its control link. Connecting goes up before
//! accepting goes down, so the setup cannot deadlock: rank 0 only accepts. A
//! barrier over the new tree then confirms every link before the star's other
//! connections close. Rank 0 handles O(p) small frames once here; every collective
//! after it, O(log p).

use super::control::{Links, TcpControl};
use super::error::LaunchError;
use super::frame::{self, Peer};
use super::liveness::{self, Liveness};
use ngauge_transport::auth::{self, AcceptLimits, AuthKey, RefusalLog};
use ngauge_transport::tree::Shape;
use ngauge_transport::{Control, Rank};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// The two listeners of a rank with children.
struct Listeners {
    control: TcpListener,
    liveness: TcpListener,
}

/// A failure to link the control connections or their liveness links.
pub(super) fn fail(what: &str, e: &dyn std::fmt::Display) -> LaunchError {
    LaunchError::Rendezvous(format!("control links: {what}: {e}"))
}

/// Turns this rank's star `control` into its place in the binomial tree, with
/// liveness links to its neighbours served on `cores`. `ip` is where this rank
/// listens: its data address, where rank 0 tells its children to connect.
/// `peers` is the job table at rank 0 (the other ranks pass what they have).
pub fn grow(
    mut star: TcpControl,
    ip: IpAddr,
    peers: &[Peer],
    timeout: Duration,
    cores: Vec<usize>,
) -> Result<TcpControl, LaunchError> {
    let (rank, size) = (star.rank(), star.size());
    let shape = Shape::Binomial;
    let children = shape.children(rank, size);
    let listeners = if children.is_empty() {
        None
    } else {
        let bind = || TcpListener::bind(SocketAddr::new(ip, 0)).map_err(|e| fail("listen", &e));
        Some(Listeners {
            control: bind()?,
            liveness: bind()?,
        })
    };
    let mut ports = Vec::new();
    if let Some(l) = &listeners {
        for listener in [&l.control, &l.liveness] {
            let port = listener
                .local_addr()
                .map_err(|e| fail("listen", &e))?
                .port();
            ports.extend_from_slice(&port.to_le_bytes());
        }
    }
    let gathered = star.gather(0, &ports)?;
    let offers = if rank == 0 {
        let key = AuthKey::random().map_err(|e| fail("key", &e))?;
        (0..size)
            .map(|r| {
                let mut offer = key.as_bytes().to_vec();
                if let Some(p) = shape.parent(r) {
                    offer.extend_from_slice(&gathered[p]);
                    offer.extend_from_slice(&frame::encode_table(&peers[p..=p]));
                }
                offer
            })
            .collect()
    } else {
        Vec::new()
    };
    let offer = star.scatter(&offers)?;
    let malformed = || fail("rank 0's offer", &"malformed");
    let (key, parent) = offer.split_at(offer.len().min(auth::KEY_LEN));
    let key = AuthKey::from_bytes(key).ok_or_else(malformed)?;
    let (parent_ports, parent_entry) = parent.split_at(parent.len().min(4));
    let mut star_links = star.into_links();
    let mut live: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();

    // Up: to the parent (on the rendezvous connection when it is rank 0).
    let mut parent_link = None;
    if let Some(parent) = shape.parent(rank) {
        let port = |i: usize| {
            (parent_ports.get(2 * i..2 * i + 2))
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
                .ok_or_else(malformed)
        };
        let entry = frame::decode_table(parent_entry, 1).map_err(|_| malformed())?;
        let ip = entry[0].data_addr;
        let connect =
            |port: u16| connect_proven(SocketAddr::new(ip, port), &key, rank, parent, timeout);
        parent_link = Some((
            parent,
            match star_links.parent.take() {
                Some((0, s)) if parent == 0 => s,
                _ => connect(port(0)?)?,
            },
        ));
        live[parent] = Some(connect(port(1)?)?);
    }
    // Down: the children.
    let mut child_links: Vec<(Rank, TcpStream)> = Vec::new();
    if let Some(l) = &listeners {
        let kept: Vec<(Rank, TcpStream)> = if rank == 0 {
            std::mem::take(&mut star_links.children)
                .into_iter()
                .filter(|(r, _)| children.contains(r))
                .collect()
        } else {
            Vec::new()
        };
        let to_accept: Vec<Rank> = (children.iter().copied())
            .filter(|c| kept.iter().all(|(k, _)| k != c))
            .collect();
        child_links = kept;
        for (c, s) in to_accept
            .iter()
            .zip(accept_proven(&l.control, &key, rank, &to_accept, timeout)?)
        {
            child_links.push((*c, s));
        }
        child_links.sort_by_key(|(r, _)| *r);
        for (c, s) in
            children
                .iter()
                .zip(accept_proven(&l.liveness, &key, rank, &children, timeout)?)
        {
            live[*c] = Some(s);
        }
    }
    let links = Links {
        shape,
        parent: parent_link,
        children: child_links,
    };
    let mut control = TcpControl::new(rank, size, links, timeout);
    let liveness = Liveness::start(live, liveness::probe_interval(timeout), cores)
        .map_err(|e| fail("thread", &e))?;
    control.set_liveness(liveness);
    control.barrier()?;
    // Only now the star's remaining connections close: every link is confirmed.
    drop(star_links);
    Ok(control)
}

/// Connects to `server`'s listener at `to` and proves to be rank `me`.
pub(super) fn connect_proven(
    to: SocketAddr,
    key: &AuthKey,
    me: Rank,
    server: Rank,
    timeout: Duration,
) -> Result<TcpStream, LaunchError> {
    let failed = |e: &dyn std::fmt::Display| {
        fail(
            &format!("the connection with rank {server} failed ({to})"),
            e,
        )
    };
    let mut s = TcpStream::connect_timeout(&to, timeout).map_err(|e| failed(&e))?;
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .map_err(|e| failed(&e))?;
    auth::prove(&mut s, key, me as u32, server as u32).map_err(|e| failed(&e))?;
    s.set_read_timeout(None)
        .and_then(|()| s.set_write_timeout(None))
        .and_then(|()| s.set_nodelay(true))
        .map_err(|e| failed(&e))?;
    Ok(s)
}

/// Accepts the `children` on `listener`, each proven with `key`.
pub(super) fn accept_proven(
    listener: &TcpListener,
    key: &AuthKey,
    me: Rank,
    children: &[Rank],
    timeout: Duration,
) -> Result<Vec<TcpStream>, LaunchError> {
    let expected: Vec<u32> = children.iter().map(|&c| c as u32).collect();
    let limits = AcceptLimits {
        handshake: timeout.min(Duration::from_secs(5)),
        total: timeout,
    };
    let mut log = RefusalLog::new(format!("ngauge: control tree listener of rank {me}"));
    let streams =
        auth::accept_authenticated(listener, key, me as u32, &expected, &limits, &mut log)
            .map_err(|e| fail("accept", &e))?;
    for s in &streams {
        s.set_write_timeout(None)
            .and_then(|()| s.set_nodelay(true))
            .map_err(|e| fail("socket", &e))?;
    }
    Ok(streams)
}
