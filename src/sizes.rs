//! Message-size lists from the command line: `--sizes SPEC`.
//!
//! - `1-65536`: powers of two from 1 to 65536 (both ends included; a non-power start
//!   is kept and followed by the next powers of two, a non-power end is included),
//! - `1-65536:1024`: the multiples of 1024 from 1 to 65536 (1024, 2048, ...), and
//!   the start when it is not one (1): sizes on page and cache-line boundaries, not
//!   `1, 1025, 2049, ...`; an end that is no multiple is not reached (`1-1000:64`
//!   ends at 960),
//! - `1,8,4K,1M`: an explicit list,
//! - parts may be combined with commas: `1-512,1K-64K:1K`.
//!
//! Suffixes K, M, G are binary (1K = 1024). The result is sorted and deduplicated.

/// Why a size specification was refused; the message names the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size '{part}': {reason} (examples: 1-65536, 1-65536:1024, 1,8,4K,1M)")]
pub struct SizeSpecError {
    /// The part of the spec that is wrong.
    pub part: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Largest size accepted: 16 GiB.
pub const MAX_SIZE_BYTES: u64 = 16 << 30;
/// Largest number of sizes one spec may expand to.
pub const MAX_POINTS: usize = 100_000;

/// Parses a size with an optional binary suffix (`4K`, `1M`, `2G`, `512`).
pub fn parse_size(text: &str) -> Result<u64, SizeSpecError> {
    let err = |reason| SizeSpecError {
        part: text.to_string(),
        reason,
    };
    let t = text.trim();
    let (digits, shift) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err("not a number with an optional K/M/G suffix"));
    }
    let value: u64 = digits.parse().map_err(|_| err("number too large"))?;
    let bytes = value
        .checked_mul(1 << shift)
        .ok_or_else(|| err("number too large"))?;
    if bytes > MAX_SIZE_BYTES {
        return Err(err("larger than 16G"));
    }
    Ok(bytes)
}

/// Parses a full `--sizes` specification into sorted, distinct sizes in bytes.
pub fn parse_sizes(spec: &str) -> Result<Vec<u64>, SizeSpecError> {
    let mut sizes = Vec::new();
    if spec.trim().is_empty() {
        return Err(SizeSpecError {
            part: spec.to_string(),
            reason: "empty",
        });
    }
    for part in spec.split(',') {
        let err = |reason| SizeSpecError {
            part: part.to_string(),
            reason,
        };
        match part.split_once('-') {
            None => sizes.push(parse_size(part)?),
            Some((from, rest)) => {
                let (to, step) = match rest.split_once(':') {
                    Some((to, step)) => (to, Some(parse_size(step)?)),
                    None => (rest, None),
                };
                let (from, to) = (parse_size(from)?, parse_size(to)?);
                if from > to {
                    return Err(err("range start is above its end"));
                }
                match step {
                    Some(0) => return Err(err("step must be positive")),
                    Some(step) => {
                        if (to - from) / step >= MAX_POINTS as u64 {
                            return Err(err("too many sizes"));
                        }
                        sizes.push(from);
                        let mut s = from.div_ceil(step) * step;
                        while s <= to {
                            sizes.push(s);
                            s += step;
                        }
                    }
                    None => {
                        let mut s = from;
                        sizes.push(s);
                        while s < to {
                            s = if s == 0 {
                                1
                            } else {
                                (s + 1).next_power_of_two()
                            };
                            sizes.push(s.min(to));
                        }
                    }
                }
            }
        }
        if sizes.len() > MAX_POINTS {
            return Err(err("too many sizes"));
        }
    }
    sizes.sort_unstable();
    sizes.dedup();
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_two_range() {
        assert_eq!(parse_sizes("1-16").unwrap(), vec![1, 2, 4, 8, 16]);
        assert_eq!(parse_sizes("3-20").unwrap(), vec![3, 4, 8, 16, 20]);
        assert_eq!(parse_sizes("0-2").unwrap(), vec![0, 1, 2]);
        assert_eq!(parse_sizes("1-1M").unwrap().len(), 21);
    }

    /// Issue 37: a step gives its multiples (and the start), so `1-64K:4K` gives
    /// 1, 4096, 8192, ..., not 1, 4097, 8193, ...
    #[test]
    fn issue_37_a_step_gives_its_multiples_and_the_start() {
        assert_eq!(parse_sizes("1-3K:1K").unwrap(), vec![1, 1024, 2048, 3072]);
        assert_eq!(parse_sizes("0-2048:1024").unwrap(), vec![0, 1024, 2048]);
        assert_eq!(parse_sizes("1K-3K:1K").unwrap(), vec![1024, 2048, 3072]);
        assert_eq!(
            parse_sizes("100-1000:256").unwrap(),
            vec![100, 256, 512, 768]
        );
        assert_eq!(parse_sizes("5-7:8").unwrap(), vec![5]);
        let quick = parse_sizes("1-16K:2K").unwrap();
        assert_eq!(
            quick,
            [1, 2048, 4096, 6144, 8192, 10240, 12288, 14336, 16384]
        );
    }

    #[test]
    fn lists_suffixes_and_combinations() {
        assert_eq!(parse_sizes("1,8,4K,1M").unwrap(), vec![1, 8, 4096, 1 << 20]);
        assert_eq!(parse_sizes("8,1,8").unwrap(), vec![1, 8]);
        assert_eq!(
            parse_sizes("1-4,1K-2K:512").unwrap(),
            vec![1, 2, 4, 1024, 1536, 2048]
        );
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
    }

    #[test]
    fn bad_specs_name_the_part() {
        for bad in [
            "",
            "x",
            "1-",
            "-5",
            "8-1",
            "1-8:0",
            "1K-2K:",
            "17G",
            "99999999999999999999",
            "1.5K",
            "1-1G:1",
        ] {
            let e = parse_sizes(bad).unwrap_err();
            assert!(e.to_string().starts_with("invalid size"), "{bad}: {e}");
        }
        assert_eq!(parse_sizes("1,zz").unwrap_err().part, "zz");
    }
}
