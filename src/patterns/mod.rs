//! Measurement procedures written against [`crate::transport::Transport`] and
//! [`crate::transport::Control`] only: each gets a clock, a transport and a control
//! channel, reads no global, and never touches the control channel inside a timed
//! region.

pub mod coll;
pub mod counters;
pub mod late;
pub mod loggp;
pub mod nbc;
pub mod noise;
pub mod order;
pub mod pingpong;
