//! A Huffman tree over counts (labels of a classifier, words of a vocabulary), as word2vec.c's
//! `CreateBinaryTree` and fastText's `HierarchicalSoftmaxLoss::buildTree` build it: the leaves in
//! order of falling count, then the two smallest of the remaining leaves and inner nodes joined
//! under a new inner node until one root is left. Frequent leaves get short paths, so a
//! hierarchical softmax costs about `log2(n)` binary decisions per instance for `n` leaves, and
//! fewer for the frequent ones.
//!
//! A leaf is reached from the root through its *points* (the inner nodes on the way, numbered
//! `0..n-1` in the order they were made, so the root is `n - 2`: the rows of a model's output
//! layer) and its *codes* (at each point, whether the way goes to the second child, `true`, or
//! the first). Equal counts are ordered by id, so the tree is a function of the counts alone.

/// The tree of `n >= 2` leaves: each leaf's points and codes, from the root down, and each inner
/// node's two children.
#[derive(Debug, Clone, PartialEq)]
pub struct Huffman {
    /// Leaf `i`'s points and codes are at `offsets[i]..offsets[i + 1]`.
    offsets: Vec<usize>,
    points: Vec<u32>,
    codes: Vec<bool>,
    /// Per inner node: its first and second child, a leaf id below `leaves`, or `leaves + inner`.
    children: Vec<[u32; 2]>,
}

/// A child of an inner node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    /// A leaf: the label (or word) of this index.
    Leaf(usize),
    /// An inner node of this index.
    Inner(usize),
}

impl Huffman {
    /// The tree of `counts.len()` leaves (at least 2) of the given counts.
    pub fn new(counts: &[u64]) -> Self {
        let n = counts.len();
        assert!(n >= 2, "a Huffman tree needs at least two leaves");
        // Leaves by falling count (equal counts by id), then the inner nodes as they are made,
        // each of rising count: the two smallest are always at the end of the leaves or the start
        // of the inner nodes not yet joined.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
        let mut count: Vec<u64> = order.iter().map(|&i| counts[i]).collect();
        count.resize(2 * n - 1, u64::MAX);
        let mut parent = vec![0usize; 2 * n - 1];
        let mut second = vec![false; 2 * n - 1];
        let mut children = Vec::with_capacity(n - 1);
        // The next leaf to join (counting down) and the next inner node.
        let (mut leaf, mut node) = (n, n);
        for made in n..2 * n - 1 {
            let mut pick = [0usize; 2];
            for p in &mut pick {
                // A leaf only when strictly smaller: word2vec.c and fastText prefer the inner node.
                *p = if leaf > 0 && count[leaf - 1] < count[node] {
                    leaf -= 1;
                    leaf
                } else {
                    node += 1;
                    node - 1
                };
            }
            count[made] = count[pick[0]].saturating_add(count[pick[1]]);
            parent[pick[0]] = made;
            parent[pick[1]] = made;
            second[pick[1]] = true;
            let id = |p: usize| if p < n { order[p] } else { p } as u32;
            children.push([id(pick[0]), id(pick[1])]);
        }
        let root = 2 * n - 2;
        let mut paths: Vec<Vec<(u32, bool)>> = vec![Vec::new(); n];
        for (pos, &id) in order.iter().enumerate() {
            let path = &mut paths[id];
            let mut at = pos;
            while at != root {
                path.push(((parent[at] - n) as u32, second[at]));
                at = parent[at];
            }
            path.reverse();
        }
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0);
        let (mut points, mut codes) = (Vec::new(), Vec::new());
        for path in paths {
            points.extend(path.iter().map(|&(p, _)| p));
            codes.extend(path.iter().map(|&(_, c)| c));
            offsets.push(points.len());
        }
        Self {
            offsets,
            points,
            codes,
            children,
        }
    }

    /// The number of leaves.
    pub fn leaves(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The root, inner node `leaves - 2`.
    pub fn root(&self) -> usize {
        self.children.len() - 1
    }

    /// The inner nodes from the root down to leaf `leaf`.
    #[inline]
    pub fn points(&self, leaf: usize) -> &[u32] {
        &self.points[self.offsets[leaf]..self.offsets[leaf + 1]]
    }

    /// At each of [`Huffman::points`], whether the way to `leaf` goes to the second child.
    #[inline]
    pub fn codes(&self, leaf: usize) -> &[bool] {
        &self.codes[self.offsets[leaf]..self.offsets[leaf + 1]]
    }

    /// Inner node `inner`'s first and second child.
    #[inline]
    pub fn children(&self, inner: usize) -> [Node; 2] {
        let n = self.leaves();
        self.children[inner].map(|c| {
            let c = c as usize;
            if c < n {
                Node::Leaf(c)
            } else {
                Node::Inner(c - n)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // CLRS's Huffman example (a:45 b:13 c:12 d:16 e:9 f:5), ids 0-5 in that order. By word2vec.c's
    // CreateBinaryTree (and fastText's buildTree) on the counts sorted down, a d b c e f, with
    // inner nodes 0, 1, ... as made (a leaf is taken only when strictly smaller):
    //   inner 0 = f(5) + e(9) = 14        (first child f, second e)
    //   inner 1 = c(12) + b(13) = 25      (d 16 is not below inner 0's 14)
    //   inner 2 = inner 0 (14) + d(16) = 30
    //   inner 3 = inner 1 (25) + inner 2 (30) = 55   (a 45 is below neither)
    //   inner 4 = a(45) + inner 3 (55) = 100: the root
    // From the root down (points; codes, 1 = second child):
    //   a: [4]; [0]   b: [4 3 1]; [1 0 1]   c: [4 3 1]; [1 0 0]
    //   d: [4 3 2]; [1 1 1]   e: [4 3 2 0]; [1 1 0 1]   f: [4 3 2 0]; [1 1 0 0]
    // The code lengths 1 3 3 3 4 4 are CLRS's optimal ones (224 bits per 100 characters).
    #[test]
    fn codes_and_points_are_word2vecs() {
        let t = Huffman::new(&[45, 13, 12, 16, 9, 5]);
        let want: [(&[u32], &[u8]); 6] = [
            (&[4], &[0]),
            (&[4, 3, 1], &[1, 0, 1]),
            (&[4, 3, 1], &[1, 0, 0]),
            (&[4, 3, 2], &[1, 1, 1]),
            (&[4, 3, 2, 0], &[1, 1, 0, 1]),
            (&[4, 3, 2, 0], &[1, 1, 0, 0]),
        ];
        for (leaf, (points, codes)) in want.iter().enumerate() {
            assert_eq!(t.points(leaf), *points, "points of leaf {leaf}");
            let codes: Vec<bool> = codes.iter().map(|&c| c == 1).collect();
            assert_eq!(t.codes(leaf), codes, "codes of leaf {leaf}");
        }
        assert_eq!(t.root(), 4);
        assert_eq!(t.children(4), [Node::Leaf(0), Node::Inner(3)]);
        assert_eq!(t.children(0), [Node::Leaf(5), Node::Leaf(4)]);
    }

    #[test]
    fn equal_counts_give_a_balanced_tree_and_every_path_leads_to_its_leaf() {
        let t = Huffman::new(&[7; 8]);
        for leaf in 0..8 {
            assert_eq!(t.points(leaf).len(), 3, "leaf {leaf}");
            // Following the codes from the root reaches the leaf.
            let mut at = Node::Inner(t.root());
            for (&p, &c) in t.points(leaf).iter().zip(t.codes(leaf)) {
                assert_eq!(at, Node::Inner(p as usize));
                at = t.children(p as usize)[usize::from(c)];
            }
            assert_eq!(at, Node::Leaf(leaf));
        }
        let two = Huffman::new(&[0, 3]);
        // The rarer leaf is joined first: the first child.
        assert_eq!((two.points(0), two.codes(0)), (&[0u32][..], &[false][..]));
        assert_eq!((two.points(1), two.codes(1)), (&[0u32][..], &[true][..]));
    }
}
