//! Which rank an error is about: the peer whose link broke (a data-plane error
//! naming its peer, a control-plane loss), the suspect a failing rank hands to
//! [`Control::abort`](ngauge_transport::Control::abort), which confirms it (a peer
//! that failed because of another names that one) before blaming it.

use ngauge_transport::{ControlError, Rank, TransportError};

/// The phrases of [`TransportError`] and [`ControlError`] messages that name the
/// peer at fault, each followed by the rank, for errors that carry such a message
/// as text only (a pattern's error that wraps it transparently, said once).
const NAMING: [(&str, &str); 5] = [
    ("lost rank ", " "),
    ("rank ", " closed the connection"),
    ("rank ", " did not answer"),
    ("with rank ", " failed"),
    ("rank ", " sent "),
];

/// The rank `err` blames (the first one its chain names, outermost first), if any.
pub fn suspect(err: &(dyn std::error::Error + 'static)) -> Option<Rank> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(t) = e.downcast_ref::<TransportError>() {
            return t.peer();
        }
        if let Some(c) = e.downcast_ref::<ControlError>() {
            return match c {
                ControlError::LostRank { rank, .. }
                | ControlError::Timeout { rank, .. }
                | ControlError::Protocol { rank, .. } => Some(*rank),
                ControlError::Invalid(_) => None,
            };
        }
        if let Some(rank) = named_in(&e.to_string()) {
            return Some(rank);
        }
        next = e.source();
    }
    None
}

/// The first rank `text` names in one of the [`NAMING`] phrases.
fn named_in(text: &str) -> Option<Rank> {
    NAMING
        .iter()
        .filter_map(|(before, after)| {
            text.match_indices(before).find_map(|(at, _)| {
                let rest = &text[at + before.len()..];
                let digits = rest.find(|c: char| !c.is_ascii_digit())?;
                let rank = rest[..digits].parse().ok()?;
                rest[digits..].starts_with(after).then_some((at, rank))
            })
        })
        .min()
        .map(|(_, rank)| rank)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_link_names_its_peer_typed_or_as_text() {
        let closed = TransportError::PeerClosed {
            transport: "tcp",
            peer: 2,
            op: "recv",
        };
        assert_eq!(suspect(&closed), Some(2));
        let lost = ControlError::LostRank {
            rank: 3,
            op: "broadcast",
            detail: "connection closed".into(),
        };
        assert_eq!(suspect(&lost), Some(3));
        // Wrapped as text: the first rank named at fault.
        let text = std::io::Error::other("late: tcp: rank 12 closed the connection during recv");
        assert_eq!(suspect(&text), Some(12));
        let text = std::io::Error::other("rank 0: tcp: rank 1 did not answer within 2s");
        assert_eq!(suspect(&text), Some(1));
        assert_eq!(suspect(&std::io::Error::other("rank 0: disk full")), None);
    }
}
