//! The virtual topologies of Open MPI's tuned collectives
//! (`ompi/mca/coll/base/coll_base_topo.c`), computed for one rank in O(log np) time
//! and O(children) memory, so a rank of a job of 2^20 ranks costs nothing to place.
//!
//! Nuriyev, "Model-based selection of optimal MPI broadcast algorithms", sec. 4.1.1
//! (Fig. 4.1) and 4.1.2 describe the trees; the constructions below are Open MPI's,
//! including the order of children, which decides who is served first.

use ngauge_transport::Rank;

/// One rank's place in a tree (by default: a tree of one rank).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    /// The rank it receives from; `None` for the root.
    pub parent: Option<Rank>,
    /// The ranks it sends to, in the order Open MPI serves them.
    pub children: Vec<Rank>,
}

/// `rank - root` modulo `np`: the rank in a tree rooted at 0.
pub fn shifted(rank: Rank, root: Rank, np: usize) -> usize {
    (rank + np - root) % np
}

/// Undoes [`shifted`].
pub fn unshifted(shifted: usize, root: Rank, np: usize) -> Rank {
    (shifted + root) % np
}

/// The `fanout`-ary tree of `ompi_coll_base_topo_build_tree` (binary broadcast with
/// `fanout = 2`, Nuriyev Fig. 4.1c): level `l` holds `fanout^l` shifted ranks in
/// order; the children of shifted rank `s` on level `l` are `s + i * fanout^l` for
/// `i = 1..=fanout`. For `fanout = 2` the subtree of shifted rank 1 holds the odd
/// shifted ranks and that of 2 the even ones (the split-binary broadcast needs this).
///
/// # Panics
///
/// If `fanout` is 0 or `rank`, `root` are not below `np`.
pub fn kary(fanout: usize, rank: Rank, root: Rank, np: usize) -> Tree {
    assert!(fanout >= 1 && rank < np && root < np);
    let s = shifted(rank, root, np);
    // calculate_level: the level whose cumulative node count first exceeds s.
    let (mut level_start, mut width) = (0usize, 1usize);
    while level_start + width <= s {
        level_start += width;
        width = width.saturating_mul(fanout);
    }
    let delta = width;
    let children = (1..=fanout)
        .map(|i| s + delta * i)
        .take_while(|&c| c < np)
        .map(|c| unshifted(c, root, np))
        .collect();
    let parent = if s == 0 {
        None
    } else {
        // Open MPI walks up by delta / fanout until below the level's start.
        let step = delta / fanout;
        let mut p = s;
        while p >= level_start {
            p -= step;
        }
        Some(unshifted(p, root, np))
    };
    Tree { parent, children }
}

/// The balanced binomial tree of `ompi_coll_base_topo_build_bmtree` (binomial
/// broadcast, Nuriyev sec. 4.1.1, Definition 4.1.1): shifted rank `s` has parent
/// `s - 2^k` for its highest set bit `2^k`, and children `s + 2^j` for every
/// `2^j > s` with `s + 2^j < np`, smallest first (so the root serves 1, 2, 4, ...).
pub fn binomial(rank: Rank, root: Rank, np: usize) -> Tree {
    assert!(rank < np && root < np);
    let s = shifted(rank, root, np);
    let mut mask = next_power_of_two_above(s);
    let parent = (s != 0).then(|| unshifted(s ^ (mask >> 1), root, np));
    let mut children = Vec::new();
    while mask < np {
        let child = s ^ mask;
        if child >= np {
            break;
        }
        children.push(unshifted(child, root, np));
        mask <<= 1;
    }
    Tree { parent, children }
}

/// The in-order binomial tree of `ompi_coll_base_topo_build_in_order_bmtree`
/// (binomial gather, Nuriyev sec. 4.1.2, Definition 4.1.2): shifted rank `v` has
/// children `v + 2^j` for every `2^j` below its lowest set bit, smallest first, and
/// parent `v - 2^k` for its lowest set bit `2^k`. The subtree of child `v + 2^j` is
/// the contiguous shifted range `[v + 2^j, min(v + 2^(j+1), np))`.
pub fn in_order_binomial(rank: Rank, root: Rank, np: usize) -> Tree {
    assert!(rank < np && root < np);
    let v = shifted(rank, root, np);
    let mut parent = None;
    let mut children = Vec::new();
    let mut mask = 1usize;
    while mask < np {
        let remote = v ^ mask;
        if remote < v {
            parent = Some(unshifted(remote, root, np));
            break;
        } else if remote < np {
            children.push(unshifted(remote, root, np));
        }
        mask <<= 1;
    }
    Tree { parent, children }
}

/// The in-order binary tree of `ompi_coll_base_topo_build_in_order_bintree`
/// (the in-order binary reduce): rooted at rank `np - 1` whatever the operation's
/// root; a subtree of `n` ranks ending at rank `e` has `e` as its root, its right
/// subtree the first `n / 2` ranks and its left subtree the rest, left child served
/// first. Built by Open MPI's descent, O(log np).
pub fn in_order_binary(rank: Rank, np: usize) -> Tree {
    assert!(rank < np);
    let (mut size, mut me, mut delta) = (np, rank, 0usize);
    let mut parent_rank = size - 1;
    let mut parent = None;
    loop {
        let right = size >> 1;
        let lchild = (size > 1).then(|| parent_rank - 1);
        let rchild = lchild.filter(|&l| l > 0).map(|_| right - 1);
        if me == parent_rank {
            let children = [lchild, rchild].into_iter().flatten();
            let children = children.map(|c| c + delta).collect();
            return Tree { parent, children };
        }
        if rchild.is_none_or(|r| me > r) {
            if Some(me) == lchild {
                parent = Some(parent_rank + delta);
                if rchild.is_none() {
                    // Two ranks: Open MPI's descent leaves the left child a leaf.
                    return Tree {
                        parent,
                        children: Vec::new(),
                    };
                }
            }
            size -= right + 1;
            delta += right;
            me -= right;
            parent_rank = size - 1;
        } else {
            if Some(me) == rchild {
                parent = Some(parent_rank + delta);
            }
            size = right;
            parent_rank = right - 1;
        }
    }
}

/// The chains of `ompi_coll_base_topo_build_chain` (chain broadcast with `fanout =
/// 1`, Nuriyev Fig. 4.1b; k-chain with `fanout = K`, Fig. 4.1d): the root heads
/// `fanout` chains of consecutive shifted ranks; the first `(np - 1) % fanout` chains
/// are one longer than the rest.
///
/// # Panics
///
/// If `fanout` is 0 or `rank`, `root` are not below `np`.
pub fn chain(fanout: usize, rank: Rank, root: Rank, np: usize) -> Tree {
    assert!(fanout >= 1 && rank < np && root < np);
    let s = shifted(rank, root, np);
    let fanout = fanout.min(np - 1);
    if np == 1 {
        return Tree::default();
    }
    let (max_len, mark) = if (np - 1) % fanout != 0 {
        ((np - 1) / fanout + 1, (np - 1) % fanout)
    } else {
        ((np - 1) / fanout, fanout + 1)
    };
    // Head of chain `c` (shifted), as Open MPI lays the chains out.
    let head = |c: usize| {
        if c < mark || mark > fanout {
            1 + c * max_len
        } else {
            mark * max_len + 1 + (c - mark) * (max_len - 1)
        }
    };
    if s == 0 {
        let children = (0..fanout).map(|c| unshifted(head(c), root, np)).collect();
        return Tree {
            parent: None,
            children,
        };
    }
    let (first, len) = if mark > fanout || s - 1 < mark * max_len {
        let c = (s - 1) / max_len;
        (head(c), max_len)
    } else {
        let c = mark + (s - 1 - mark * max_len) / (max_len - 1);
        (head(c), max_len - 1)
    };
    let parent = if s == first { 0 } else { s - 1 };
    let children = if s == first + len - 1 || s + 1 >= np {
        Vec::new()
    } else {
        vec![unshifted(s + 1, root, np)]
    };
    Tree {
        parent: Some(unshifted(parent, root, np)),
        children,
    }
}

/// Open MPI's `opal_next_poweroftwo`: the smallest power of two strictly above `v`
/// (1 for 0).
fn next_power_of_two_above(v: usize) -> usize {
    if v == 0 {
        1
    } else {
        1usize << (usize::BITS - v.leading_zeros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn children(t: Tree) -> Vec<Rank> {
        t.children
    }

    /// Every rank but the root has exactly one parent, which lists it as a child.
    fn consistent(np: usize, root: Rank, tree: impl Fn(Rank) -> Tree) {
        let trees: Vec<Tree> = (0..np).map(&tree).collect();
        for (r, t) in trees.iter().enumerate() {
            match t.parent {
                None => assert_eq!(r, root, "np {np}: rank {r} has no parent"),
                Some(p) => assert!(
                    trees[p].children.contains(&r),
                    "np {np} root {root}: {r}'s parent {p} does not list it"
                ),
            }
            for &c in &t.children {
                assert_eq!(trees[c].parent, Some(r));
            }
        }
        let edges: usize = trees.iter().map(|t| t.children.len()).sum();
        assert_eq!(edges, np - 1, "np {np}: a tree has np - 1 edges");
    }

    #[test]
    fn every_tree_is_a_spanning_tree() {
        for np in 1..=40 {
            for root in [0, np / 2, np - 1] {
                consistent(np, root, |r| kary(2, r, root, np));
                consistent(np, root, |r| kary(3, r, root, np));
                consistent(np, root, |r| binomial(r, root, np));
                consistent(np, root, |r| in_order_binomial(r, root, np));
                consistent(np, np - 1, |r| in_order_binary(r, np));
                for k in 1..=5 {
                    consistent(np, root, |r| chain(k, r, root, np));
                }
            }
        }
    }

    #[test]
    fn binary_tree_matches_open_mpi_comment() {
        // coll_base_topo.c: fanout 2, size 7: 0 -> 1 2; 1 -> 3 5; 2 -> 4 6.
        assert_eq!(children(kary(2, 0, 0, 7)), vec![1, 2]);
        assert_eq!(children(kary(2, 1, 0, 7)), vec![3, 5]);
        assert_eq!(children(kary(2, 2, 0, 7)), vec![4, 6]);
        assert_eq!(kary(2, 5, 0, 7).parent, Some(1));
        assert_eq!(kary(2, 6, 0, 7).parent, Some(2));
        // Odd shifted ranks left, even right, whatever the root.
        for np in 2..30 {
            for r in 1..np {
                let mut p = r;
                while let Some(q) = kary(2, p, 0, np).parent {
                    if q == 0 {
                        break;
                    }
                    p = q;
                }
                assert_eq!(p % 2, r % 2, "np {np}: rank {r} under subtree {p}");
            }
        }
        assert_eq!(children(kary(2, 3, 3, 7)), vec![4, 5]);
    }

    #[test]
    fn binomial_trees_match_open_mpi_comments() {
        // build_bmtree's code, size 8 (its comment draws the mirror image): 0 -> 1 2
        // 4; 1 -> 3 5; 2 -> 6; 3 -> 7: the first child heads the largest subtree.
        assert_eq!(children(binomial(0, 0, 8)), vec![1, 2, 4]);
        assert_eq!(children(binomial(1, 0, 8)), vec![3, 5]);
        assert_eq!(children(binomial(2, 0, 8)), vec![6]);
        assert_eq!(children(binomial(3, 0, 8)), vec![7]);
        assert_eq!(children(binomial(4, 0, 8)), Vec::<Rank>::new());
        assert_eq!(binomial(7, 0, 8).parent, Some(3));
        assert_eq!(binomial(6, 0, 8).parent, Some(2));
        // build_in_order_bmtree, size 8: 0 -> 1 2 4; 2 -> 3; 4 -> 5 6; 6 -> 7.
        assert_eq!(children(in_order_binomial(0, 0, 8)), vec![1, 2, 4]);
        assert_eq!(children(in_order_binomial(4, 0, 8)), vec![5, 6]);
        assert_eq!(in_order_binomial(7, 0, 8).parent, Some(6));
        // Rooted elsewhere: shifted by the root.
        assert_eq!(children(binomial(5, 5, 8)), vec![6, 7, 1]);
        assert_eq!(in_order_binomial(4, 5, 8).parent, Some(3));
    }

    #[test]
    fn in_order_binary_tree_matches_open_mpi_layout() {
        // np 3: 2 over [1 (left), 0 (right)]; np 7: 6 over 5 and 2, in order.
        assert_eq!(children(in_order_binary(2, 3)), vec![1, 0]);
        assert_eq!(children(in_order_binary(6, 7)), vec![5, 2]);
        assert_eq!(children(in_order_binary(5, 7)), vec![4, 3]);
        assert_eq!(children(in_order_binary(2, 7)), vec![1, 0]);
        assert_eq!(in_order_binary(3, 7).parent, Some(5));
        assert_eq!(children(in_order_binary(1, 2)), vec![0]);
    }

    #[test]
    fn chains_match_open_mpi_layout() {
        // np 10, 4 chains: 9 ranks in chains of 3, 2, 2, 2.
        assert_eq!(children(chain(4, 0, 0, 10)), vec![1, 4, 6, 8]);
        assert_eq!(children(chain(4, 1, 0, 10)), vec![2]);
        assert_eq!(children(chain(4, 3, 0, 10)), Vec::<Rank>::new());
        assert_eq!(chain(4, 4, 0, 10).parent, Some(0));
        assert_eq!(chain(4, 5, 0, 10).parent, Some(4));
        assert_eq!(children(chain(4, 9, 0, 10)), Vec::<Rank>::new());
        // A pipeline: one chain.
        assert_eq!(children(chain(1, 0, 0, 5)), vec![1]);
        assert_eq!(chain(1, 4, 0, 5).parent, Some(3));
        assert_eq!(children(chain(1, 1, 2, 5)), Vec::<Rank>::new());
        // More chains than ranks: every other rank is a child of the root.
        assert_eq!(children(chain(8, 0, 0, 4)), vec![1, 2, 3]);
    }

    #[test]
    fn trees_of_a_million_ranks_are_placed_without_enumerating() {
        let np = 1 << 20;
        assert_eq!(binomial(0, 0, np).children.len(), 20);
        assert_eq!(binomial(np - 1, 0, np).parent, Some((np - 1) >> 1));
        assert_eq!(kary(2, np - 1, 0, np).parent, Some((np - 1 - 1) / 2));
        assert_eq!(chain(4, 0, 0, np).children.len(), 4);
    }
}
