//! What each rank publishes through `Control::allgather` to connect: its UCP
//! worker address (`ucp_worker_get_address`), its data path, and on the put path
//! where its landing ring lies (address and packed remote key,
//! `ucp_rkey_pack`) and how it is cut; in client-server mode the address and
//! ports its listeners took, one per higher rank. A rank whose setup failed publishes the
//! reason instead, so that every rank fails naming it rather than waiting for
//! it. The second setup round (every rank connected) reuses the message with
//! no ring. Little endian, and checked on decode like a packet from the network: a
//! peer built from other source, or a damaged control message, gets a one-line
//! error, never a panic.

use crate::UcxOp;

/// First bytes of every setup message.
pub const MAGIC: [u8; 4] = *b"NGUX";
/// Version of the format.
pub const VERSION: u8 = 3;

/// Where a rank's landing ring lies (put path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingAddr {
    /// Its address in the owner's memory.
    pub addr: u64,
    /// The packed remote key.
    pub rkey: Vec<u8>,
    /// Slots per sender.
    pub depth: u32,
    /// Bytes of a slot's payload.
    pub slot_bytes: u32,
}

/// Where a rank listens for its higher peers (client-server mode).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listen {
    /// The address every listener is bound to.
    pub ip: std::net::Ipv4Addr,
    /// The port of the listener for each rank (0 where it does not listen).
    pub ports: Vec<u16>,
}

/// One rank's setup message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setup {
    /// Ready to connect.
    Ready {
        /// The data path.
        op: UcxOp,
        /// The UCP worker address.
        worker: Vec<u8>,
        /// The landing ring (put path only).
        ring: Option<RingAddr>,
        /// Its listeners (client-server mode only).
        listen: Option<Listen>,
    },
    /// Setting up failed: why.
    Failed(String),
}

impl Setup {
    /// The bytes to allgather.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.push(VERSION);
        match self {
            Setup::Failed(reason) => {
                out.push(1);
                out.extend_from_slice(reason.as_bytes());
            }
            Setup::Ready {
                op,
                worker,
                ring,
                listen,
            } => {
                out.push(0);
                out.push(op_code(*op));
                put_bytes(&mut out, worker);
                out.push(u8::from(ring.is_some()));
                if let Some(r) = ring {
                    out.extend_from_slice(&r.addr.to_le_bytes());
                    out.extend_from_slice(&r.depth.to_le_bytes());
                    out.extend_from_slice(&r.slot_bytes.to_le_bytes());
                    put_bytes(&mut out, &r.rkey);
                }
                out.push(u8::from(listen.is_some()));
                if let Some(l) = listen {
                    out.extend_from_slice(&l.ip.octets());
                    let ports: Vec<u8> = l.ports.iter().flat_map(|p| p.to_le_bytes()).collect();
                    put_bytes(&mut out, &ports);
                }
            }
        }
        out
    }

    /// Inverse of [`Setup::encode`], or what is wrong with `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Setup, String> {
        let mut r = Reader(bytes);
        if r.take(4)? != MAGIC {
            return Err("not a ngauge UCX setup message".into());
        }
        let version = r.u8()?;
        if version != VERSION {
            return Err(format!(
                "setup message version {version}, this ngauge speaks {VERSION}"
            ));
        }
        match r.u8()? {
            1 => return Ok(Setup::Failed(String::from_utf8_lossy(r.0).into_owned())),
            0 => {}
            other => return Err(format!("unknown setup status {other}")),
        }
        let op = match r.u8()? {
            1 => UcxOp::Send,
            2 => UcxOp::Put,
            other => return Err(format!("unknown data path {other}")),
        };
        let worker = r.bytes()?.to_vec();
        if worker.is_empty() {
            return Err("empty worker address".into());
        }
        let ring = match r.u8()? {
            0 => None,
            1 => Some(RingAddr {
                addr: u64::from_le_bytes(r.array()?),
                depth: u32::from_le_bytes(r.array()?),
                slot_bytes: u32::from_le_bytes(r.array()?),
                rkey: r.bytes()?.to_vec(),
            }),
            other => return Err(format!("unknown ring flag {other}")),
        };
        let listen = match r.u8()? {
            0 => None,
            1 => {
                let ip = std::net::Ipv4Addr::from(r.array::<4>()?);
                let ports = r.bytes()?;
                if ports.len() % 2 != 0 {
                    return Err("an odd number of port bytes".into());
                }
                let ports = ports
                    .chunks(2)
                    .map(|p| u16::from_le_bytes([p[0], p[1]]))
                    .collect();
                Some(Listen { ip, ports })
            }
            other => return Err(format!("unknown listener flag {other}")),
        };
        if !r.0.is_empty() {
            return Err(format!("{} bytes after the setup message", r.0.len()));
        }
        Ok(Setup::Ready {
            op,
            worker,
            ring,
            listen,
        })
    }
}

fn op_code(op: UcxOp) -> u8 {
    match op {
        UcxOp::Send => 1,
        UcxOp::Put => 2,
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!(
                "setup message ends early ({} bytes left, {n} needed)",
                self.0.len()
            ));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = u32::from_le_bytes(self.array()?) as usize;
        self.take(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready_put() -> Setup {
        Setup::Ready {
            op: UcxOp::Put,
            worker: vec![7; 75],
            ring: Some(RingAddr {
                addr: 0x7f00_1234_5000,
                rkey: vec![1, 2, 3],
                depth: 8,
                slot_bytes: 65536,
            }),
            listen: None,
        }
    }

    #[test]
    fn setup_messages_roundtrip() {
        let send = Setup::Ready {
            op: UcxOp::Send,
            worker: vec![1, 2],
            ring: None,
            listen: None,
        };
        let sockaddr = Setup::Ready {
            op: UcxOp::Send,
            worker: vec![3],
            ring: None,
            listen: Some(Listen {
                ip: std::net::Ipv4Addr::new(10, 77, 0, 1),
                ports: vec![0, 0, 40001, 40002],
            }),
        };
        for s in [
            send,
            sockaddr,
            ready_put(),
            Setup::Failed("no UCX here".into()),
        ] {
            assert_eq!(Setup::decode(&s.encode()), Ok(s));
        }
    }

    #[test]
    fn damaged_messages_are_refused_with_a_reason() {
        let good = ready_put().encode();
        for cut in 0..good.len() {
            assert!(Setup::decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(Setup::decode(&longer).unwrap_err().contains("after"));
        let mut version = good.clone();
        version[4] = 9;
        assert!(Setup::decode(&version).unwrap_err().contains("version 9"));
        let mut op = good;
        op[6] = 5;
        assert!(Setup::decode(&op).unwrap_err().contains("data path 5"));
        assert!(Setup::decode(b"HTTP/1.1").is_err());
    }
}
