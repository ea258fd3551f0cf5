//! [`BuildFacts`]: what `build.rs` recorded about this binary (compiler, profile,
//! target features, transports compiled in, git revision), for result metadata and
//! for telling a transport that is not compiled in from one that cannot run.
//! A leaf module: it imports nothing from the crate.

use serde::Serialize;

/// Facts recorded by `build.rs` when this binary was compiled.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct BuildFacts {
    /// `rustc --version`.
    pub rustc: &'static str,
    /// `debug` or `release`.
    pub profile: &'static str,
    /// Optimisation level.
    pub opt_level: &'static str,
    /// Target triple.
    pub target: &'static str,
    /// Enabled target features (`sse2,...`).
    pub target_features: &'static str,
    /// Transports compiled in, comma separated.
    pub transports: &'static str,
    /// Git revision (`-dirty` when the tree had changes).
    pub git: &'static str,
}

impl BuildFacts {
    /// The facts of this binary.
    pub const fn current() -> Self {
        BuildFacts {
            rustc: env!("NGAUGE_BUILD_RUSTC"),
            profile: env!("NGAUGE_BUILD_PROFILE"),
            opt_level: env!("NGAUGE_BUILD_OPT_LEVEL"),
            target: env!("NGAUGE_BUILD_TARGET"),
            target_features: env!("NGAUGE_BUILD_TARGET_FEATURES"),
            transports: env!("NGAUGE_BUILD_TRANSPORTS"),
            git: env!("NGAUGE_BUILD_GIT"),
        }
    }

    /// Whether `transport` was compiled into this binary.
    pub fn has_transport(&self, transport: &str) -> bool {
        self.transports.split(',').any(|t| t == transport)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_facts_name_the_always_built_transports() {
        let b = BuildFacts::current();
        assert!(b.has_transport("tcp") && b.has_transport("udp"));
        assert!(!b.has_transport("t"));
    }
}
