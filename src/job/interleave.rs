//! Several transports in one run (`transports = ["mpi", "tcp"]`): measured
//! interleaved, size by size, alternating transports, so that a drift of the
//! machine (frequency, a neighbour's load) hits all of them alike and side-by-side
//! figures compare like with like (issue 6, "MPI versus raw").

/// The measuring order: for each size of `sizes` in turn, every transport (index into
/// `per_transport`, in order) whose own size list holds it.
pub fn schedule<T: Copy + PartialEq>(sizes: &[T], per_transport: &[Vec<T>]) -> Vec<(T, usize)> {
    sizes
        .iter()
        .flat_map(|&s| {
            per_transport
                .iter()
                .enumerate()
                .filter(move |(_, these)| these.contains(&s))
                .map(move |(i, _)| (s, i))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_alternate_between_transports_and_skip_missing_ones() {
        let sizes = [1u64, 2, 4];
        let order = schedule(&sizes, &[vec![1, 2, 4], vec![1, 4], vec![2]]);
        assert_eq!(order, vec![(1, 0), (1, 1), (2, 0), (2, 2), (4, 0), (4, 1)]);
        assert!(schedule::<u64>(&sizes, &[]).is_empty());
    }
}
