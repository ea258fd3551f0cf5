//! Pinning a process to one core, and reading where it is allowed to run.

/// The cores this process may run on, from `/proc/self/status`.
pub fn allowed_cores() -> Vec<usize> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Cpus_allowed_list:"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(parse_cpu_list)
        })
        .unwrap_or_default()
}

/// The core this process is pinned to, if it may run on exactly one.
pub fn pinned_core() -> Option<usize> {
    match allowed_cores().as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// Pins the calling thread to `core`.
pub fn pin_to(core: usize) -> Result<(), String> {
    if core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
        Ok(())
    } else {
        Err(format!(
            "could not pin to core {core} (sched_setaffinity refused)"
        ))
    }
}

/// Number of cores this process may use (what the local launcher distributes).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Parses a kernel CPU list such as `0-3,8,10-11`; `None` on malformed input.
pub fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cores = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                cores.extend(a..=b);
            }
            None => cores.push(part.trim().parse().ok()?),
        }
    }
    Some(cores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn this_process_has_allowed_cores() {
        assert!(!allowed_cores().is_empty());
    }
}
