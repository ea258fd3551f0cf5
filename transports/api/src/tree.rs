//! The shape of a control plane: who relays whose control frames.
//!
//! A star through rank 0 makes rank 0 handle p - 1 frames per collective and hold
//! p - 1 connections; at thousands of ranks on an oversubscribed host that is what
//! ends a job (docs/findings/2026-11-29-launch-scale.md). Both control planes (the
//! launcher's TCP one and MPI's point-to-point one) run over a binomial tree
//! instead: rank r's parent is r with its highest set bit cleared, its children are
//! r + 2^k for every 2^k > r below the job size. Every rank has at most
//! ceil(log2 p) children and the tree is ceil(log2 p) deep, so a barrier, broadcast
//! or gather costs rank 0 O(log p) frames and every rank O(log p) time (Hoefler et
//! al., "Accurately measuring collective operations", sec. 3: the O(log p) tree used
//! for group synchronization). A tree rooted elsewhere is this one over ranks
//! renumbered relative to its root. The star stays as a shape for jobs that were
//! joined through one (tests, small jobs built by hand).

use crate::transport::Rank;

/// How the ranks of a job are linked for control frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Every rank is a child of rank 0.
    Star,
    /// The binomial tree rooted at rank 0.
    Binomial,
}

impl Shape {
    /// The rank that relays `rank`'s frames towards rank 0 (`None` for rank 0).
    pub fn parent(self, rank: Rank) -> Option<Rank> {
        if rank == 0 {
            return None;
        }
        Some(match self {
            Shape::Star => 0,
            Shape::Binomial => rank & !highest_bit(rank),
        })
    }

    /// The ranks whose parent is `rank` in a job of `size`, in increasing order.
    pub fn children(self, rank: Rank, size: usize) -> Vec<Rank> {
        match self {
            Shape::Star if rank == 0 => (1..size).collect(),
            Shape::Star => Vec::new(),
            Shape::Binomial => {
                let mut out = Vec::new();
                let mut step = if rank == 0 { 1 } else { highest_bit(rank) << 1 };
                while rank + step < size {
                    out.push(rank + step);
                    step <<= 1;
                }
                out
            }
        }
    }

    /// Whether `rank` lies in the subtree under `top` (`top` itself included).
    pub fn contains(self, top: Rank, rank: Rank) -> bool {
        match self {
            _ if top == rank || top == 0 => true,
            Shape::Star => false,
            // Rank s descends from `top` when clearing high bits of s reaches `top`:
            // s agrees with `top` on the bits up to `top`'s highest one.
            Shape::Binomial => rank & ((highest_bit(top) << 1) - 1) == top,
        }
    }

    /// The ranks of the subtree under `top` in a job of `size` (`top` itself
    /// included), in increasing order. In the binomial tree they are `top` and every
    /// 2h-th rank after it, h being `top`'s highest bit: the ranks that agree with
    /// `top` on its low bits ([`Shape::contains`]).
    pub fn subtree(self, top: Rank, size: usize) -> Vec<Rank> {
        let stride = match self {
            _ if top == 0 => 1,
            Shape::Star => return vec![top],
            Shape::Binomial => highest_bit(top) << 1,
        };
        (top..size).step_by(stride).collect()
    }
}

/// The highest set bit of `rank` (which is not 0).
fn highest_bit(rank: Rank) -> Rank {
    1 << (Rank::BITS - 1 - rank.leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_parents_and_children_agree() {
        for size in [1, 2, 3, 5, 16, 17, 100, 1024] {
            let mut seen = vec![0usize; size];
            for r in 0..size {
                for c in Shape::Binomial.children(r, size) {
                    assert_eq!(Shape::Binomial.parent(c), Some(r), "{c} in {size}");
                    seen[c] += 1;
                }
            }
            // Every rank but 0 has exactly one parent.
            assert!(seen.iter().skip(1).all(|&n| n == 1), "{size}");
            assert_eq!(seen[0], 0);
        }
        assert_eq!(Shape::Binomial.children(0, 16), [1, 2, 4, 8]);
        assert_eq!(Shape::Binomial.children(2, 16), [6, 10]);
        assert_eq!(Shape::Binomial.children(12, 16), Vec::<Rank>::new());
        assert_eq!(Shape::Binomial.parent(13), Some(5));
    }

    #[test]
    fn rank_zero_has_log_p_children() {
        assert_eq!(Shape::Binomial.children(0, 4096).len(), 12);
        assert_eq!(Shape::Star.children(0, 4096).len(), 4095);
    }

    #[test]
    fn subtrees_are_what_the_parents_say() {
        let size = 64;
        for shape in [Shape::Star, Shape::Binomial] {
            for top in 0..size {
                for r in 0..size {
                    // r is under top when walking up from r meets top.
                    let mut walk = Some(r);
                    let mut under = false;
                    while let Some(w) = walk {
                        under |= w == top;
                        walk = shape.parent(w);
                    }
                    assert_eq!(shape.contains(top, r), under, "{shape:?} {top} {r}");
                }
                let listed: Vec<Rank> = (0..size).filter(|&r| shape.contains(top, r)).collect();
                assert_eq!(shape.subtree(top, size), listed, "{shape:?} {top}");
            }
        }
    }
}
