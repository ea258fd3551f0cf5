//! Length-prefixed binary frames of the rendezvous and control protocol.
//!
//! Every frame is a 12-byte header followed by a payload:
//!
//! ```text
//! 0      4        6      7          8             12
//! +------+--------+------+----------+-------------+---------------+
//! | NGCF | version| kind | reserved | payload len | payload ...   |
//! +------+--------+------+----------+-------------+---------------+
//!   magic   u16 LE   u8     0          u32 LE
//! ```
//!
//! The decoder follows smoltcp's `new_checked` discipline (`src/wire/mod.rs`): every
//! length is checked before it is used, so [`decode`] and the payload parsers return
//! an error, never panic, on any input (the `frame_decoder` fuzz target in `fuzz/`
//! holds us to that). A frame whose header announces more than the caller's limit is
//! refused from the header alone, before any payload is read.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The four bytes that open every frame.
pub const MAGIC: [u8; 4] = *b"NGCF";
/// Protocol version spoken by this build. A peer with another version is refused.
pub const VERSION: u16 = 1;
/// Header length in bytes.
pub const HEADER_LEN: usize = 12;
/// Largest payload accepted from a peer that has not joined yet (a join is ~100 bytes).
pub const MAX_JOIN_PAYLOAD: usize = 4 * 1024;
/// Largest payload accepted on the control channel (small messages only).
pub const MAX_CONTROL_PAYLOAD: usize = 64 * 1024 * 1024;
/// Longest job token, host name or refusal reason.
pub const MAX_STRING: usize = 1024;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A rank asks to join (payload: [`Join`]).
    Join = 1,
    /// Rank 0 refuses a join (payload: reason, UTF-8).
    Refuse = 2,
    /// Rank 0's answer once every rank has joined (payload: [`encode_table`]; of no
    /// entries at the rendezvous, the job table goes down the control tree).
    Table = 3,
    /// A barrier message (payload: [`Control`] with no data).
    Barrier = 16,
    /// A broadcast message (payload: [`Control`]).
    Broadcast = 17,
    /// A gather message (payload: [`Control`]).
    Gather = 18,
    /// Rank 0 aborts the job because a rank is lost (payload: [`Abort`]).
    Abort = 19,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        use Kind::*;
        [Join, Refuse, Table, Barrier, Broadcast, Gather, Abort]
            .into_iter()
            .find(|k| *k as u8 == b)
    }

    /// Lowercase name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Join => "join",
            Kind::Refuse => "refuse",
            Kind::Table => "table",
            Kind::Barrier => "barrier",
            Kind::Broadcast => "broadcast",
            Kind::Gather => "gather",
            Kind::Abort => "abort",
        }
    }
}

/// Why bytes are not a frame (or not the payload they claim to be).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// More bytes are needed; not an error on a stream that is still open.
    #[error("truncated frame: {have} bytes, need {need}")]
    Truncated {
        /// Bytes available.
        have: usize,
        /// Bytes the frame needs.
        need: usize,
    },
    /// The first four bytes are not `NGCF`.
    #[error("not an ngauge frame (bad magic {0:02x?})")]
    BadMagic([u8; 4]),
    /// The peer speaks another protocol version.
    #[error("protocol version {got}, this build speaks {VERSION}")]
    Version {
        /// The peer's version.
        got: u16,
    },
    /// Unknown frame kind.
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    /// The header announces a payload above the limit.
    #[error("frame of {len_bytes} bytes exceeds the limit of {max_bytes} bytes")]
    Oversized {
        /// Announced payload length.
        len_bytes: usize,
        /// The limit in force.
        max_bytes: usize,
    },
    /// The payload does not parse as the kind says.
    #[error("malformed {kind} payload: {detail}")]
    Malformed {
        /// Frame kind name.
        kind: &'static str,
        /// What is wrong.
        detail: &'static str,
    },
}

/// A checked header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Frame kind.
    pub kind: Kind,
    /// Payload length in bytes.
    pub len: usize,
}

/// Checks a header (the first [`HEADER_LEN`] bytes of `bytes`) against `max_payload`.
pub fn decode_header(bytes: &[u8], max_payload: usize) -> Result<Header, FrameError> {
    let Some(head) = bytes.get(..HEADER_LEN) else {
        // Judge what we have so far: a wrong magic is refused without waiting.
        let n = bytes.len().min(4);
        if bytes[..n] != MAGIC[..n] {
            let mut got = [0u8; 4];
            got[..n].copy_from_slice(&bytes[..n]);
            return Err(FrameError::BadMagic(got));
        }
        return Err(FrameError::Truncated {
            have: bytes.len(),
            need: HEADER_LEN,
        });
    };
    let magic = [head[0], head[1], head[2], head[3]];
    if magic != MAGIC {
        return Err(FrameError::BadMagic(magic));
    }
    let version = u16::from_le_bytes([head[4], head[5]]);
    if version != VERSION {
        return Err(FrameError::Version { got: version });
    }
    let kind = Kind::from_u8(head[6]).ok_or(FrameError::UnknownKind(head[6]))?;
    let len = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize;
    if len > max_payload {
        return Err(FrameError::Oversized {
            len_bytes: len,
            max_bytes: max_payload,
        });
    }
    Ok(Header { kind, len })
}

/// Decodes one frame from the front of `bytes`: its kind, payload and total length.
pub fn decode(bytes: &[u8], max_payload: usize) -> Result<(Kind, &[u8], usize), FrameError> {
    let header = decode_header(bytes, max_payload)?;
    let total = HEADER_LEN + header.len;
    match bytes.get(HEADER_LEN..total) {
        Some(payload) => Ok((header.kind, payload, total)),
        None => Err(FrameError::Truncated {
            have: bytes.len(),
            need: total,
        }),
    }
}

/// Encodes a frame with the current [`VERSION`].
pub fn encode(kind: Kind, payload: &[u8]) -> Vec<u8> {
    encode_with_version(kind, VERSION, payload)
}

/// Encodes a frame with any version (tests send wrong versions with it).
pub fn encode_with_version(kind: Kind, version: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.push(kind as u8);
    out.push(0);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// A cursor over a payload whose every read is checked.
struct Reader<'a> {
    rest: &'a [u8],
    kind: &'static str,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], kind: Kind) -> Self {
        Reader {
            rest: bytes,
            kind: kind.name(),
        }
    }
    fn bad(&self, detail: &'static str) -> FrameError {
        FrameError::Malformed {
            kind: self.kind,
            detail,
        }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        if self.rest.len() < n {
            return Err(self.bad("truncated"));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, FrameError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, FrameError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn string(&mut self) -> Result<String, FrameError> {
        let len = self.u16()? as usize;
        if len > MAX_STRING {
            return Err(self.bad("string too long"));
        }
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.bad("string is not UTF-8"))
    }
    fn ip(&mut self) -> Result<IpAddr, FrameError> {
        match self.u8()? {
            4 => {
                let b = self.take(4)?;
                Ok(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])))
            }
            6 => {
                let b = self.take(16)?;
                let mut octets = [0u8; 16];
                octets.copy_from_slice(b);
                Ok(IpAddr::V6(Ipv6Addr::from(octets)))
            }
            _ => Err(self.bad("unknown address family")),
        }
    }
    fn finish(self) -> Result<(), FrameError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(self.bad("trailing bytes"))
        }
    }
}

/// Writes `s` with a length prefix, cut to at most [`MAX_STRING`] bytes at a char
/// boundary (so the reader's UTF-8 check still passes).
fn put_string(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(MAX_STRING);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let bytes = &s.as_bytes()[..end];
    out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn put_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(a) => {
            out.push(4);
            out.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            out.push(6);
            out.extend_from_slice(&a.octets());
        }
    }
}

/// What a rank says when it joins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Join {
    /// The per-job token that proves the rank belongs to this job.
    pub token: String,
    /// The joining rank.
    pub rank: u32,
    /// The job size the rank believes in.
    pub size: u32,
    /// Where the rank's data transports listen.
    pub data_addr: IpAddr,
    /// The rank's host name (to count ranks per host).
    pub host: String,
    /// The rank's process id (for messages).
    pub pid: u32,
}

impl Join {
    /// The payload bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_string(&mut out, &self.token);
        out.extend_from_slice(&self.rank.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        put_ip(&mut out, self.data_addr);
        put_string(&mut out, &self.host);
        out.extend_from_slice(&self.pid.to_le_bytes());
        out
    }
    /// Parses a join payload.
    pub fn decode(payload: &[u8]) -> Result<Join, FrameError> {
        let mut r = Reader::new(payload, Kind::Join);
        let join = Join {
            token: r.string()?,
            rank: r.u32()?,
            size: r.u32()?,
            data_addr: r.ip()?,
            host: r.string()?,
            pid: r.u32()?,
        };
        r.finish()?;
        Ok(join)
    }
}

/// One rank's entry in the table rank 0 sends once all have joined.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Peer {
    /// The rank.
    pub rank: usize,
    /// Where its data transports listen.
    pub data_addr: IpAddr,
    /// Its host name.
    pub host: String,
    /// Its process id.
    pub pid: u32,
}

/// The full table of the job.
pub fn encode_table(peers: &[Peer]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(peers.len() as u32).to_le_bytes());
    for p in peers {
        put_ip(&mut out, p.data_addr);
        put_string(&mut out, &p.host);
        out.extend_from_slice(&p.pid.to_le_bytes());
    }
    out
}

/// Parses a table; `expected` is the job size the reader believes in.
pub fn decode_table(payload: &[u8], expected: usize) -> Result<Vec<Peer>, FrameError> {
    let mut r = Reader::new(payload, Kind::Table);
    let n = r.u32()? as usize;
    if n != expected {
        return Err(r.bad("table size differs from the job size"));
    }
    let mut peers = Vec::with_capacity(n.min(4096));
    for rank in 0..n {
        peers.push(Peer {
            rank,
            data_addr: r.ip()?,
            host: r.string()?,
            pid: r.u32()?,
        });
    }
    r.finish()?;
    Ok(peers)
}

/// A control message: the collective's sequence number and its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Control<'a> {
    /// Sequence number of the collective call (all ranks count alike).
    pub seq: u32,
    /// The rank the data belongs to (gather) or the root (broadcast).
    pub rank: u32,
    /// The data.
    pub data: &'a [u8],
}

impl<'a> Control<'a> {
    /// The payload bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.data.len());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.rank.to_le_bytes());
        out.extend_from_slice(self.data);
        out
    }
    /// Parses a control payload of frame kind `kind`.
    pub fn decode(payload: &'a [u8], kind: Kind) -> Result<Control<'a>, FrameError> {
        let mut r = Reader::new(payload, kind);
        let seq = r.u32()?;
        let rank = r.u32()?;
        Ok(Control {
            seq,
            rank,
            data: r.rest,
        })
    }
}

/// Rank 0's verdict that the job is over because a rank is lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Abort {
    /// The lost rank.
    pub rank: u32,
    /// What rank 0 observed.
    pub detail: String,
}

impl Abort {
    /// The payload bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.rank.to_le_bytes().to_vec();
        put_string(&mut out, &self.detail);
        out
    }
    /// Parses an abort payload.
    pub fn decode(payload: &[u8]) -> Result<Abort, FrameError> {
        let mut r = Reader::new(payload, Kind::Abort);
        let abort = Abort {
            rank: r.u32()?,
            detail: r.string()?,
        };
        r.finish()?;
        Ok(abort)
    }
}

/// Parses a refusal payload (a reason, UTF-8, lossy).
pub fn decode_refusal(payload: &[u8]) -> String {
    String::from_utf8_lossy(&payload[..payload.len().min(MAX_STRING)]).into_owned()
}

/// Decodes a frame and, by its kind, its payload; the whole decoder surface for the
/// fuzz target. Returns the number of bytes consumed.
pub fn decode_any(bytes: &[u8], max_payload: usize) -> Result<usize, FrameError> {
    let (kind, payload, total) = decode(bytes, max_payload)?;
    match kind {
        Kind::Join => Join::decode(payload).map(drop)?,
        Kind::Refuse => drop(decode_refusal(payload)),
        Kind::Table => {
            // Any size the table claims: the parser must cope.
            let claimed = payload
                .get(..4)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
            decode_table(payload, claimed).map(drop)?
        }
        Kind::Barrier | Kind::Broadcast | Kind::Gather => {
            Control::decode(payload, kind).map(drop)?
        }
        Kind::Abort => Abort::decode(payload).map(drop)?,
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join() -> Join {
        Join {
            token: "abc123".into(),
            rank: 3,
            size: 4,
            data_addr: "10.1.2.3".parse().unwrap(),
            host: "node01".into(),
            pid: 4242,
        }
    }

    #[test]
    fn join_roundtrips_through_a_frame() {
        let bytes = encode(Kind::Join, &join().encode());
        assert_eq!(&bytes[..4], b"NGCF");
        let (kind, payload, total) = decode(&bytes, MAX_JOIN_PAYLOAD).unwrap();
        assert_eq!((kind, total), (Kind::Join, bytes.len()));
        assert_eq!(Join::decode(payload).unwrap(), join());
    }

    #[test]
    fn long_multibyte_strings_are_cut_at_a_char_boundary() {
        // 'é' is 2 bytes, '€' 3: MAX_STRING falls inside a character either way.
        for text in [
            "x".to_string() + &"é".repeat(MAX_STRING),
            "€".repeat(MAX_STRING),
        ] {
            let mut j = join();
            j.host = text.clone();
            let back = Join::decode(&j.encode()).unwrap();
            assert!(back.host.len() <= MAX_STRING && back.host.len() > MAX_STRING - 4);
            assert!(text.starts_with(&back.host));
        }
    }

    #[test]
    fn fixed_header_bytes() {
        let bytes = encode(Kind::Barrier, &[9, 8]);
        assert_eq!(
            bytes,
            [b'N', b'G', b'C', b'F', 1, 0, 16, 0, 2, 0, 0, 0, 9, 8]
        );
    }

    #[test]
    fn table_roundtrips_with_v6() {
        let peers = vec![
            Peer {
                rank: 0,
                data_addr: "::1".parse().unwrap(),
                host: "a".into(),
                pid: 1,
            },
            Peer {
                rank: 1,
                data_addr: "127.0.0.1".parse().unwrap(),
                host: String::new(),
                pid: 2,
            },
        ];
        assert_eq!(decode_table(&encode_table(&peers), 2).unwrap(), peers);
        assert!(decode_table(&encode_table(&peers), 3).is_err());
    }

    #[test]
    fn hostile_headers_are_refused() {
        assert!(matches!(
            decode(b"GET / HTTP/1.1\r\n", MAX_JOIN_PAYLOAD),
            Err(FrameError::BadMagic(_))
        ));
        assert!(matches!(
            decode(b"GE", MAX_JOIN_PAYLOAD),
            Err(FrameError::BadMagic(_))
        ));
        assert!(matches!(
            decode(b"NG", MAX_JOIN_PAYLOAD),
            Err(FrameError::Truncated { have: 2, need: 12 })
        ));
        let wrong_version = encode_with_version(Kind::Join, 99, &join().encode());
        assert_eq!(
            decode(&wrong_version, MAX_JOIN_PAYLOAD),
            Err(FrameError::Version { got: 99 })
        );
        let mut huge = encode(Kind::Join, &[]);
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode(&huge, MAX_JOIN_PAYLOAD),
            Err(FrameError::Oversized { .. })
        ));
        let mut unknown = encode(Kind::Join, &[]);
        unknown[6] = 200;
        assert_eq!(
            decode(&unknown, MAX_JOIN_PAYLOAD),
            Err(FrameError::UnknownKind(200))
        );
    }

    #[test]
    fn every_truncation_of_a_join_is_an_error_not_a_panic() {
        let payload = join().encode();
        for n in 0..payload.len() {
            assert!(Join::decode(&payload[..n]).is_err(), "prefix {n}");
        }
        let mut long = payload.clone();
        long.push(0);
        assert!(Join::decode(&long).is_err());
        let frame = encode(Kind::Join, &payload);
        for n in 0..frame.len() {
            assert!(decode_any(&frame[..n], MAX_JOIN_PAYLOAD).is_err());
        }
        assert_eq!(decode_any(&frame, MAX_JOIN_PAYLOAD), Ok(frame.len()));
    }

    #[test]
    fn table_claiming_a_huge_count_fails_cleanly() {
        let mut payload = u32::MAX.to_le_bytes().to_vec();
        payload.extend_from_slice(&[4, 1, 2, 3, 4]);
        assert!(decode_table(&payload, u32::MAX as usize).is_err());
    }
}
