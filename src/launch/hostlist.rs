//! Slurm host lists: `node[01-03,7],gpu-a[1-2]` → `node01 node02 node03 node7 gpu-a1
//! gpu-a2`.
//!
//! The syntax of `SLURM_JOB_NODELIST` (Slurm's `hostlist.c`): comma-separated items;
//! each item may hold bracketed groups of comma-separated numbers and ranges `a-b`; a
//! range keeps the zero padding of its lower bound (`01-03` → `01 02 03`); several
//! groups in one item expand as a cartesian product (`r[1-2]n[1-2]`).
//!
//! Also the address a host's name resolves to, for launchers that name hosts but
//! not addresses ([`resolve_non_loopback`]).

/// Why a host list does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    /// A `[` without its `]`, or the reverse.
    #[error("unbalanced brackets in host list {0:?}")]
    Unbalanced(String),
    /// A range or number inside brackets that is not one.
    #[error("bad range {range:?} in host list {list:?}")]
    BadRange {
        /// The offending range.
        range: String,
        /// The whole list.
        list: String,
    },
    /// The expansion would be absurdly large.
    #[error("host list {0:?} expands to more than 100000 hosts")]
    TooLarge(String),
}

const MAX_HOSTS: usize = 100_000;

/// Expands a Slurm host list into host names, in order.
pub fn expand(list: &str) -> Result<Vec<String>, HostlistError> {
    let mut hosts = Vec::new();
    for item in split_top_level(list).map_err(|()| HostlistError::Unbalanced(list.into()))? {
        if item.is_empty() {
            continue;
        }
        expand_item(item, list, &mut hosts)?;
    }
    Ok(hosts)
}

/// The first host of a list (the default rendezvous host under Slurm).
pub fn first(list: &str) -> Result<Option<String>, HostlistError> {
    Ok(expand(list)?.into_iter().next())
}

/// The first non-loopback address `host` resolves to.
pub fn resolve_non_loopback(host: &str) -> Option<std::net::IpAddr> {
    use std::net::ToSocketAddrs;
    (host, 0)
        .to_socket_addrs()
        .ok()?
        .map(|a| a.ip())
        .find(|ip| !ip.is_loopback() && !ip.is_unspecified())
}

/// Splits at commas that are not inside brackets.
fn split_top_level(list: &str) -> Result<Vec<&str>, ()> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.checked_sub(1).ok_or(())?,
            ',' if depth == 0 => {
                items.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(());
    }
    items.push(list[start..].trim());
    Ok(items)
}

fn expand_item(item: &str, list: &str, out: &mut Vec<String>) -> Result<(), HostlistError> {
    let Some(open) = item.find('[') else {
        if item.contains(']') {
            return Err(HostlistError::Unbalanced(list.into()));
        }
        out.push(item.to_string());
        return Ok(());
    };
    let close = item[open..]
        .find(']')
        .map(|c| open + c)
        .ok_or_else(|| HostlistError::Unbalanced(list.into()))?;
    let (prefix, group, suffix) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    for number in expand_group(group, list)? {
        if out.len() >= MAX_HOSTS {
            return Err(HostlistError::TooLarge(list.into()));
        }
        // The suffix may hold further groups: expand recursively.
        expand_item(&format!("{prefix}{number}{suffix}"), list, out)?;
    }
    Ok(())
}

fn expand_group(group: &str, list: &str) -> Result<Vec<String>, HostlistError> {
    let bad = |range: &str| HostlistError::BadRange {
        range: range.into(),
        list: list.into(),
    };
    let mut numbers = Vec::new();
    for range in group.split(',').map(str::trim) {
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        match range.split_once('-') {
            Some((lo, hi)) if digits(lo) && digits(hi) => {
                let (a, b): (u64, u64) = (
                    lo.parse().map_err(|_| bad(range))?,
                    hi.parse().map_err(|_| bad(range))?,
                );
                if b < a {
                    return Err(bad(range));
                }
                if b - a >= MAX_HOSTS as u64 {
                    return Err(HostlistError::TooLarge(list.into()));
                }
                let width = lo.len();
                numbers.extend((a..=b).map(|n| format!("{n:0width$}")));
            }
            None if digits(range) => numbers.push(range.to_string()),
            _ => return Err(bad(range)),
        }
    }
    Ok(numbers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_from_issue_3() {
        assert_eq!(
            expand("node[01-03,7],gpu-a[1-2]").unwrap(),
            ["node01", "node02", "node03", "node7", "gpu-a1", "gpu-a2"]
        );
    }

    #[test]
    fn plain_names_padding_and_products() {
        assert_eq!(expand("login1").unwrap(), ["login1"]);
        assert_eq!(expand("a,b").unwrap(), ["a", "b"]);
        assert_eq!(
            expand("n[098-101]").unwrap(),
            ["n098", "n099", "n100", "n101"]
        );
        assert_eq!(
            expand("r[1-2]n[1-2]").unwrap(),
            ["r1n1", "r1n2", "r2n1", "r2n2"]
        );
        assert_eq!(expand("x[5]-ib").unwrap(), ["x5-ib"]);
        assert_eq!(expand("").unwrap(), Vec::<String>::new());
        assert_eq!(first("c[3-4]").unwrap().as_deref(), Some("c3"));
    }

    #[test]
    fn malformed_lists_are_errors() {
        for bad in [
            "node[1-3",
            "node1-3]",
            "node[3-1]",
            "node[a-b]",
            "node[]",
            "n[1-2-3]",
            "n[0-99999999999]",
        ] {
            assert!(expand(bad).is_err(), "{bad}");
        }
    }
}
