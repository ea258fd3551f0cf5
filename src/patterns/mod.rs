//! Measurement procedures written against the [`ngauge_transport::Transport`] and
//! [`ngauge_transport::Control`] traits: each gets a clock, a transport and a control
//! channel, and nothing else.

pub mod loggp;
