//! The element types and operations of MPI's reductions, as the shim numbers them.

use std::os::raw::c_int;

/// Element type of a reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Datatype {
    /// `MPI_DOUBLE`.
    F64,
    /// `MPI_INT64_T`.
    I64,
    /// `MPI_UINT64_T`.
    U64,
    /// `MPI_INT32_T`.
    I32,
}

impl Datatype {
    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            Datatype::F64 | Datatype::I64 | Datatype::U64 => 8,
            Datatype::I32 => 4,
        }
    }
    pub(crate) fn code(self) -> c_int {
        match self {
            Datatype::F64 => 0,
            Datatype::I64 => 1,
            Datatype::U64 => 2,
            Datatype::I32 => 3,
        }
    }
}

/// Reduction operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// `MPI_SUM`.
    Sum,
    /// `MPI_MAX`.
    Max,
    /// `MPI_MIN`.
    Min,
    /// `MPI_BOR` (integer types only).
    Bor,
}

impl ReduceOp {
    pub(crate) fn code(self) -> c_int {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Max => 1,
            ReduceOp::Min => 2,
            ReduceOp::Bor => 3,
        }
    }
}
