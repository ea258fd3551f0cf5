//! Models fitted to measurements: least squares (plain and robust), change points,
//! LogGP parameters.

pub mod changepoint;
pub mod confirm;
pub mod loggp;
pub mod lsq;
pub mod params;
pub mod propose;
pub mod refine;
pub mod robust;
pub mod segment;
pub mod sensitivity;
