//! [`InfoSpec`]: what `ngauge info` looks at. It has no parameters: the job
//! (transports, verbs device) comes with the experiment's [`crate::job::JobSpec`].

use serde::{Deserialize, Serialize};

/// The parameters of `ngauge info` (none; unknown fields are rejected).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InfoSpec {}
