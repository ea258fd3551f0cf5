//! Models fitted to measurements: least squares (plain and robust), change points,
//! LogGP parameters.

pub mod lsq;
