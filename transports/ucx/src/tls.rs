//! Checking a UCX transport list (`--ucx-tls`, UCX's `UCX_TLS`) against the
//! transports UCX offers on this machine, before UCX sees it: UCX itself only
//! warns about a name it does not know and goes on with the others (or fails
//! later with "no such device"), so a misspelt name would measure something
//! else than asked.
//!
//! A name is accepted when UCX offers a transport of that name here, when it is
//! one of UCX's aliases of which at least one transport is offered (the rule
//! and table of `ucp_get_aliases_set` and `ucp_tl_aliases` in UCX 1.13's
//! `src/ucp/core/ucp_context.c`), or `all`. A leading `^` (everything but the
//! list) and a `:aux` suffix (a transport used for wireup only) are UCX syntax
//! around a name.

/// UCX's transport aliases and what each stands for.
pub const ALIASES: &[(&str, &[&str])] = &[
    ("mm", &["posix", "sysv", "xpmem"]),
    ("sm", &["posix", "sysv", "xpmem", "knem", "cma"]),
    ("shm", &["posix", "sysv", "xpmem", "knem", "cma"]),
    (
        "ib",
        &["rc_verbs", "ud_verbs", "rc_mlx5", "ud_mlx5", "dc_mlx5"],
    ),
    ("ud_v", &["ud_verbs"]),
    ("ud_x", &["ud_mlx5"]),
    ("ud", &["ud_mlx5", "ud_verbs"]),
    ("rc_v", &["rc_verbs"]),
    ("rc_x", &["rc_mlx5"]),
    ("rc", &["rc_mlx5", "rc_verbs"]),
    ("dc", &["dc_mlx5"]),
    ("dc_x", &["dc_mlx5"]),
    ("ugni", &["ugni_smsg", "ugni_rdma"]),
    ("cuda", &["cuda_copy", "cuda_ipc", "gdr_copy"]),
    ("rocm", &["rocm_copy", "rocm_ipc", "rocm_gdr"]),
];

/// Every name a transport list may use here, sorted: the transports `offered`
/// (UCX's resources on this machine), the aliases that cover one of them, and
/// `all`.
pub fn accepted(offered: &[String]) -> Vec<String> {
    let mut names: Vec<String> = offered.to_vec();
    for (alias, tls) in ALIASES {
        if tls.iter().any(|t| offered.iter().any(|o| o == t)) {
            names.push(alias.to_string());
        }
    }
    names.push("all".into());
    names.sort();
    names.dedup();
    names
}

/// `Ok` when every name of the comma-separated `list` is accepted (see the
/// module docs), else the one-line reason naming the first unknown one and what
/// UCX offers here.
pub fn check(list: &str, offered: &[String]) -> Result<(), String> {
    let names = accepted(offered);
    let offers = || names.join(", ");
    if list.split(',').all(|n| n.trim().is_empty()) {
        return Err(format!(
            "the UCX transport list is empty; UCX offers here: {}",
            offers()
        ));
    }
    for item in list.split(',') {
        let name = item.trim().trim_start_matches('^');
        let name = name.strip_suffix(":aux").unwrap_or(name);
        if name.is_empty() || !names.iter().any(|n| n == name) {
            return Err(format!(
                "unknown UCX transport `{}` in `{list}`; UCX offers here: {}",
                item.trim(),
                offers()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn here() -> Vec<String> {
        ["self", "tcp", "sysv", "posix", "cma"]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn transports_aliases_and_ucx_syntax_are_accepted() {
        for list in [
            "posix,self",
            "tcp",
            "sm",
            "shm,self",
            "all",
            "^tcp",
            "tcp:aux,posix",
            " posix , self ",
        ] {
            assert_eq!(check(list, &here()), Ok(()), "{list}");
        }
    }

    #[test]
    fn unknown_names_and_absent_devices_name_what_ucx_offers() {
        let e = check("posix,tpc", &here()).unwrap_err();
        assert!(e.contains("unknown UCX transport `tpc`"), "{e}");
        assert!(
            e.contains("UCX offers here: all, cma, mm, posix, self, shm, sm, sysv, tcp"),
            "{e}"
        );
        // rc is an alias, but no verbs device is here.
        assert!(check("rc", &here()).unwrap_err().contains("`rc`"));
        assert!(check("rc", &["rc_verbs".to_string()]).is_ok());
        assert!(check("", &here()).unwrap_err().contains("empty"));
        assert!(check("posix,,self", &here()).is_err());
    }
}
