//! A C4.5-style decision tree, written for this job: information gain (or
//! C4.5's gain ratio), binary splits of numeric attributes at the midpoint
//! between adjacent distinct values, multiway splits of categorical
//! attributes, a minimum leaf size, and growth only while a split improves
//! the training accuracy (the research's stopping rule).
//!
//! The tree is grown level by level in the manner of SLIQ: every numeric
//! attribute is sorted once ([`Presorted`], reused by every tree of
//! Algorithm 1), and each level scans each attribute's sorted order once,
//! updating the class counts of whichever open node each run sits in. A level
//! thus costs O(runs) per attribute however many nodes it has, and the
//! attributes are scanned in parallel.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::dataset::{Column, Dataset};

/// How trees are grown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeParams {
    /// Fewest runs in a leaf (a split leaving fewer on a side is not
    /// considered; a categorical split needs two branches this large).
    pub min_leaf: usize,
    /// Deepest level a split may be made at (the root is level 0).
    pub max_depth: usize,
    /// Choose splits by C4.5's gain ratio (among splits with at least the
    /// average gain) instead of plain information gain.
    pub gain_ratio: bool,
}

impl Default for TreeParams {
    fn default() -> Self {
        TreeParams {
            min_leaf: 1,
            max_depth: 5,
            gain_ratio: false,
        }
    }
}

/// A node of a grown tree. `counts[c]` is the number of training runs of
/// class `c` that reached the node.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// Predicts `class`.
    Leaf {
        /// The majority class.
        class: u32,
        /// Training runs per class.
        counts: Vec<usize>,
    },
    /// `attribute < threshold` goes to `below`, the rest to `at_or_above`.
    Numeric {
        /// The attribute's index in the dataset.
        attribute: usize,
        /// Midpoint between two adjacent distinct training values.
        threshold: f64,
        /// Information gain of the split.
        gain: f64,
        /// Training runs per class.
        counts: Vec<usize>,
        /// Runs with a smaller value.
        below: Box<Node>,
        /// Runs with a value at least the threshold.
        at_or_above: Box<Node>,
    },
    /// One branch per level seen in training; other levels get `default`.
    Categorical {
        /// The attribute's index in the dataset.
        attribute: usize,
        /// Information gain of the split.
        gain: f64,
        /// Training runs per class.
        counts: Vec<usize>,
        /// (level code, subtree), in level order.
        branches: Vec<(u32, Node)>,
        /// The node's majority class, for levels not seen here in training.
        default: u32,
    },
}

impl Node {
    /// Training runs per class that reached the node.
    pub fn counts(&self) -> &[usize] {
        match self {
            Node::Leaf { counts, .. }
            | Node::Numeric { counts, .. }
            | Node::Categorical { counts, .. } => counts,
        }
    }

    /// Predicts the class of row `row` of `data`.
    pub fn predict(&self, data: &Dataset, row: usize) -> u32 {
        match self {
            Node::Leaf { class, .. } => *class,
            Node::Numeric {
                attribute,
                threshold,
                below,
                at_or_above,
                ..
            } => match &data.attributes[*attribute].column {
                Column::Numeric(v) if v[row] < *threshold => below.predict(data, row),
                _ => at_or_above.predict(data, row),
            },
            Node::Categorical {
                attribute,
                branches,
                default,
                ..
            } => {
                let code = match &data.attributes[*attribute].column {
                    Column::Categorical { codes, .. } => codes[row],
                    Column::Numeric(_) => return *default,
                };
                branches
                    .iter()
                    .find(|(c, _)| *c == code)
                    .map_or(*default, |(_, n)| n.predict(data, row))
            }
        }
    }
}

/// A grown tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    /// The root.
    pub root: Node,
}

impl Tree {
    /// The attribute the root splits on; `None` when the root is a leaf (no
    /// split improved on predicting the majority class).
    pub fn root_attribute(&self) -> Option<usize> {
        match &self.root {
            Node::Leaf { .. } => None,
            Node::Numeric { attribute, .. } | Node::Categorical { attribute, .. } => {
                Some(*attribute)
            }
        }
    }

    /// Share of `data`'s runs the tree classifies correctly.
    pub fn accuracy(&self, data: &Dataset) -> f64 {
        if data.rows() == 0 {
            return 0.0;
        }
        let correct = (0..data.rows())
            .filter(|&r| self.root.predict(data, r) == data.labels[r])
            .count();
        correct as f64 / data.rows() as f64
    }
}

/// Every numeric attribute's rows in increasing order of value, computed
/// once per dataset. Each entry is a row index whose top bit is set when its
/// value differs from the previous entry's: a scan then knows where values
/// change without reading them.
#[derive(Debug, Clone)]
pub struct Presorted {
    order: Vec<Option<Vec<u32>>>,
}

/// Marks an entry of [`Presorted`] whose value differs from the one before.
const NEW_VALUE: u32 = 1 << 31;

/// Most runs a tree is grown from (row indices keep one bit for
/// [`NEW_VALUE`]).
pub const MAX_ROWS: usize = (NEW_VALUE - 1) as usize;

impl Presorted {
    /// Sorts every numeric attribute of `data` (in parallel). Datasets have
    /// at most [`MAX_ROWS`] rows; the rows beyond are ignored.
    pub fn new(data: &Dataset) -> Presorted {
        let order = data
            .attributes
            .par_iter()
            .map(|a| match &a.column {
                Column::Numeric(values) => {
                    let n = values.len().min(MAX_ROWS);
                    let mut idx: Vec<u32> = (0..n as u32).collect();
                    idx.sort_unstable_by(|&x, &y| {
                        values[x as usize].total_cmp(&values[y as usize])
                    });
                    let mut previous: Option<f64> = None;
                    for e in idx.iter_mut() {
                        let v = values[*e as usize];
                        if previous != Some(v) {
                            *e |= NEW_VALUE;
                        }
                        previous = Some(v);
                    }
                    Some(idx)
                }
                Column::Categorical { .. } => None,
            })
            .collect();
        Presorted { order }
    }
}

/// `n * log2(n)` for every count up to the number of runs: entropies become
/// table lookups (`n·H = n log n − Σ c log c`).
struct NLogN(Vec<f64>);

impl NLogN {
    fn new(max: usize) -> NLogN {
        NLogN(
            (0..=max)
                .map(|n| {
                    if n == 0 {
                        0.0
                    } else {
                        n as f64 * (n as f64).log2()
                    }
                })
                .collect(),
        )
    }

    #[inline]
    fn get(&self, n: usize) -> f64 {
        self.0[n]
    }

    /// `n · entropy(counts)`, n = Σ counts.
    #[inline]
    fn weighted_entropy(&self, counts: &[usize]) -> f64 {
        let n: usize = counts.iter().sum();
        self.get(n) - counts.iter().map(|&c| self.get(c)).sum::<f64>()
    }
}

/// The best split one attribute offers one node.
#[derive(Debug, Clone)]
struct Candidate {
    attribute: usize,
    gain: f64,
    split_info: f64,
    /// For numeric splits: the gap between the two values the threshold
    /// lies between, relative to the attribute's range at the node. Breaks
    /// ties between equal gains in favour of the clearest separation.
    margin: f64,
    kind: CandidateKind,
}

impl Candidate {
    /// A categorical split into two branches: as simple as a numeric
    /// split, without its free choice of threshold (see [`choose`]).
    fn is_two_way_categorical(&self) -> bool {
        matches!(&self.kind, CandidateKind::Categorical { branches } if branches.len() == 2)
    }
}

#[derive(Debug, Clone)]
enum CandidateKind {
    Numeric {
        threshold: f64,
        below: Vec<usize>,
    },
    /// (level code, class counts) per branch, in level order.
    Categorical {
        branches: Vec<(u32, Vec<usize>)>,
    },
}

/// A node while the tree grows, stored in an arena.
#[derive(Debug)]
enum Slot {
    Open {
        counts: Vec<usize>,
        depth: usize,
    },
    Leaf {
        counts: Vec<usize>,
    },
    Numeric {
        attribute: usize,
        threshold: f64,
        gain: f64,
        counts: Vec<usize>,
        below: usize,
        at_or_above: usize,
    },
    Categorical {
        attribute: usize,
        gain: f64,
        counts: Vec<usize>,
        branches: Vec<(u32, usize)>,
    },
}

/// Marks a run that sits in a finished leaf.
const DONE: u32 = u32::MAX;

/// The class most of `counts` have (the lowest on a tie) and its count: what
/// a leaf predicts.
pub fn majority(counts: &[usize]) -> (u32, usize) {
    let mut best = (0u32, 0usize);
    for (c, &n) in counts.iter().enumerate() {
        if n > best.1 {
            best = (c as u32, n);
        }
    }
    best
}

/// Grows a tree on `data` using only the attributes with `active[a]`. At
/// equal gain an attribute with `fresh[a]` (one about a syscall no earlier
/// rule named; missing entries count as fresh) goes before one without: see
/// [`choose`].
pub fn build(
    data: &Dataset,
    sorted: &Presorted,
    active: &[bool],
    fresh: &[bool],
    params: &TreeParams,
) -> Tree {
    let rows = data.rows();
    let k = data.classes.len();
    let nlogn = NLogN::new(rows);
    let min_leaf = params.min_leaf.max(1);
    let class_bits = k.max(2).next_power_of_two().trailing_zeros();

    let mut arena = vec![Slot::Open {
        counts: data.class_counts(),
        depth: 0,
    }];
    // Per run: its node's position in `open` (DONE once in a leaf).
    let mut node_of: Vec<u32> = vec![0; rows];
    // Arena indices of the nodes open at this level.
    let mut open: Vec<usize> = vec![0];

    let attributes: Vec<usize> = (0..data.attributes.len())
        .filter(|&a| active.get(a).copied().unwrap_or(false))
        .collect();

    while !open.is_empty() {
        // Nodes that cannot split become leaves before the scan.
        let mut splittable = vec![false; open.len()];
        for (j, &slot) in open.iter().enumerate() {
            if let Slot::Open { counts, depth } = &arena[slot] {
                let n: usize = counts.iter().sum();
                let pure = counts.iter().filter(|&&c| c > 0).count() <= 1;
                splittable[j] = !pure && n >= 2 * min_leaf && *depth < params.max_depth;
            }
        }
        // Node positions must fit beside the class in a u32 code (only a
        // level of millions of nodes could exceed it): stop growing there.
        if open.len() >= (DONE >> class_bits) as usize {
            splittable.fill(false);
        }
        let totals: Vec<Vec<usize>> = open
            .iter()
            .map(|&s| match &arena[s] {
                Slot::Open { counts, .. } => counts.clone(),
                _ => vec![0; k],
            })
            .collect();
        for j in node_of.iter_mut() {
            if *j != DONE && !splittable[*j as usize] {
                *j = DONE;
            }
        }

        // Node and class of every run in one word: one load per run in the
        // scans.
        let codes: Vec<u32> = node_of
            .iter()
            .zip(&data.labels)
            .map(|(&j, &l)| {
                if j == DONE {
                    DONE
                } else {
                    (j << class_bits) | l
                }
            })
            .collect();
        let scan = Scan {
            data,
            node_of: &node_of,
            codes: &codes,
            class_bits,
            totals: &totals,
            splittable: &splittable,
            nlogn: &nlogn,
            min_leaf,
        };
        let per_attribute: Vec<Vec<Option<Candidate>>> = if splittable.iter().any(|&s| s) {
            attributes
                .par_iter()
                .map(|&a| scan.attribute(a, sorted.order[a].as_deref()))
                .collect()
        } else {
            Vec::new()
        };

        // Choose each node's split, or make it a leaf.
        let mut next_open: Vec<usize> = Vec::new();
        // Per open node: child arena slots (numeric: [below, above];
        // categorical: (code, slot) pairs) to route runs.
        let mut routes: Vec<Option<Route>> = (0..open.len()).map(|_| None).collect();
        for (j, &slot) in open.iter().enumerate() {
            let (counts, depth) = match &arena[slot] {
                Slot::Open { counts, depth } => (counts.clone(), *depth),
                _ => continue,
            };
            let chosen = if splittable[j] {
                choose(
                    per_attribute.iter().filter_map(|c| c[j].as_ref()),
                    fresh,
                    params,
                )
            } else {
                None
            };
            // The research's stopping rule: split only if the children's
            // majority classes get more training runs right than the node's.
            let chosen = chosen.filter(|c| {
                let before = majority(&counts).1;
                let after: usize = match &c.kind {
                    CandidateKind::Numeric { below, .. } => {
                        let above: Vec<usize> =
                            counts.iter().zip(below).map(|(t, b)| t - b).collect();
                        majority(below).1 + majority(&above).1
                    }
                    CandidateKind::Categorical { branches } => {
                        branches.iter().map(|(_, b)| majority(b).1).sum()
                    }
                };
                after > before
            });
            match chosen {
                None => arena[slot] = Slot::Leaf { counts },
                Some(c) => match c.kind {
                    CandidateKind::Numeric { threshold, below } => {
                        let above: Vec<usize> =
                            counts.iter().zip(&below).map(|(t, b)| t - b).collect();
                        let b = arena.len();
                        arena.push(Slot::Open {
                            counts: below,
                            depth: depth + 1,
                        });
                        let a = arena.len();
                        arena.push(Slot::Open {
                            counts: above,
                            depth: depth + 1,
                        });
                        routes[j] = Some(Route::Numeric {
                            attribute: c.attribute,
                            threshold,
                            below: next_open.len() as u32,
                        });
                        next_open.push(b);
                        next_open.push(a);
                        arena[slot] = Slot::Numeric {
                            attribute: c.attribute,
                            threshold,
                            gain: c.gain,
                            counts,
                            below: b,
                            at_or_above: a,
                        };
                    }
                    CandidateKind::Categorical { branches } => {
                        let mut slots = Vec::new();
                        let mut route = HashMap::new();
                        for (code, bc) in branches {
                            let s = arena.len();
                            arena.push(Slot::Open {
                                counts: bc,
                                depth: depth + 1,
                            });
                            route.insert(code, next_open.len() as u32);
                            next_open.push(s);
                            slots.push((code, s));
                        }
                        routes[j] = Some(Route::Categorical {
                            attribute: c.attribute,
                            next: route,
                        });
                        arena[slot] = Slot::Categorical {
                            attribute: c.attribute,
                            gain: c.gain,
                            counts,
                            branches: slots,
                        };
                    }
                },
            }
        }

        // Move every run to its child's position in the next level.
        for (r, j) in node_of.iter_mut().enumerate() {
            if *j == DONE {
                continue;
            }
            *j = match &routes[*j as usize] {
                None => DONE,
                Some(Route::Numeric {
                    attribute,
                    threshold,
                    below,
                }) => match &data.attributes[*attribute].column {
                    Column::Numeric(v) if v[r] < *threshold => *below,
                    _ => *below + 1,
                },
                Some(Route::Categorical { attribute, next }) => {
                    match &data.attributes[*attribute].column {
                        Column::Categorical { codes, .. } => {
                            next.get(&codes[r]).copied().unwrap_or(DONE)
                        }
                        Column::Numeric(_) => DONE,
                    }
                }
            };
        }
        open = next_open;
    }

    Tree {
        root: to_node(&arena, 0),
    }
}

/// Where the runs of a node that split go.
#[derive(Debug)]
enum Route {
    Numeric {
        attribute: usize,
        threshold: f64,
        /// Position of the `below` child in the next level (`above` follows).
        below: u32,
    },
    Categorical {
        attribute: usize,
        next: HashMap<u32, u32>,
    },
}

fn to_node(arena: &[Slot], slot: usize) -> Node {
    match &arena[slot] {
        Slot::Open { counts, .. } | Slot::Leaf { counts } => Node::Leaf {
            class: majority(counts).0,
            counts: counts.clone(),
        },
        Slot::Numeric {
            attribute,
            threshold,
            gain,
            counts,
            below,
            at_or_above,
        } => Node::Numeric {
            attribute: *attribute,
            threshold: *threshold,
            gain: *gain,
            counts: counts.clone(),
            below: Box::new(to_node(arena, *below)),
            at_or_above: Box::new(to_node(arena, *at_or_above)),
        },
        Slot::Categorical {
            attribute,
            gain,
            counts,
            branches,
        } => Node::Categorical {
            attribute: *attribute,
            gain: *gain,
            counts: counts.clone(),
            branches: branches
                .iter()
                .map(|(code, s)| (*code, to_node(arena, *s)))
                .collect(),
            default: majority(counts).0,
        },
    }
}

/// Tolerance when comparing gains computed from different counts.
const EPS: f64 = 1e-9;

/// Picks the best of one node's candidates: highest gain (or, with gain
/// ratio, highest ratio among candidates with at least the average gain);
/// ties go to a two-way categorical split over any other, then to a fresh
/// attribute over one about a syscall an earlier rule named, then to the
/// larger margin, then to the earlier attribute.
///
/// Why fresh before margin: when a fault moves several syscalls, many
/// statistics separate the runs perfectly and their margins all lie near 1,
/// ordered by the runs' noise. The demo's wget writes what it reads, so
/// `consec_write`, `result_write` and `param_write` tie with `num_read`, and
/// which came first changed from run to run; rules about the same syscall
/// repeat one explanation, while the next syscall's rule offers another.
///
/// Why two-way categorical first: a numeric split also chooses its threshold among
/// the cuts between distinct values, so at equal gain it fits the runs
/// with one more free choice (C4.5 Release 8 charges numeric splits
/// log2(cuts)/runs bits of gain for it; here it only breaks ties, so no
/// existing choice between numeric splits changes). With few runs this
/// decides the case that matters: in three runs nearly every statistic
/// that differs separates them perfectly, and the fact that does too (the
/// research's VirtualBox adapter) is the simpler explanation. A split into
/// more branches is not simpler: a fact naming each client (one value per
/// device) separates any clustering perfectly and explains nothing, so it
/// gets no preference.
fn choose<'a>(
    candidates: impl Iterator<Item = &'a Candidate>,
    fresh: &[bool],
    params: &TreeParams,
) -> Option<Candidate> {
    let is_fresh = |c: &Candidate| fresh.get(c.attribute).copied().unwrap_or(true);
    let candidates: Vec<&Candidate> = candidates.filter(|c| c.gain > EPS).collect();
    if candidates.is_empty() {
        return None;
    }
    let score = |c: &Candidate| -> f64 {
        if params.gain_ratio {
            if c.split_info > EPS {
                c.gain / c.split_info
            } else {
                0.0
            }
        } else {
            c.gain
        }
    };
    let floor = if params.gain_ratio {
        candidates.iter().map(|c| c.gain).sum::<f64>() / candidates.len() as f64 - EPS
    } else {
        f64::NEG_INFINITY
    };
    let mut best: Option<&Candidate> = None;
    for &c in candidates.iter().filter(|c| c.gain >= floor) {
        best = match best {
            None => Some(c),
            Some(b) => {
                let (sc, sb) = (score(c), score(b));
                let better = sc > sb + EPS
                    || ((sc - sb).abs() <= EPS
                        && (c.is_two_way_categorical() && !b.is_two_way_categorical()
                            || (c.is_two_way_categorical() == b.is_two_way_categorical()
                                && (is_fresh(c) && !is_fresh(b)
                                    || (is_fresh(c) == is_fresh(b)
                                        && (c.margin > b.margin + EPS
                                            || ((c.margin - b.margin).abs() <= EPS
                                                && c.attribute < b.attribute)))))));
                Some(if better { c } else { b })
            }
        };
    }
    best.cloned()
}

/// What every attribute scan of one level shares.
struct Scan<'a> {
    data: &'a Dataset,
    node_of: &'a [u32],
    /// Per run: `node << class_bits | class`, or DONE.
    codes: &'a [u32],
    class_bits: u32,
    totals: &'a [Vec<usize>],
    splittable: &'a [bool],
    nlogn: &'a NLogN,
    min_leaf: usize,
}

impl Scan<'_> {
    fn attribute(&self, a: usize, order: Option<&[u32]>) -> Vec<Option<Candidate>> {
        match (&self.data.attributes[a].column, order) {
            (Column::Numeric(values), Some(order)) => self.numeric(a, values, order),
            (Column::Categorical { codes, .. }, _) => self.categorical(a, codes),
            (Column::Numeric(_), None) => vec![None; self.totals.len()],
        }
    }

    /// The best threshold of numeric attribute `a` for every open node, in
    /// one pass over the attribute's sorted rows.
    fn numeric(&self, a: usize, values: &[f64], order: &[u32]) -> Vec<Option<Candidate>> {
        let nodes = self.totals.len();
        let k = self.data.classes.len();
        let class_mask = (1u32 << self.class_bits) - 1;
        let nlogn = self.nlogn;
        let row = |p: usize| (order[p] & !NEW_VALUE) as usize;
        let mut state = vec![NumericState::default(); nodes];
        let mut below = vec![0usize; nodes * k];
        let mut best_below = vec![0usize; nodes * k];
        // Counts distinct values so far: a node's rows on either side of a
        // change of `group` have different values.
        let mut group: u32 = 0;
        for (p, &entry) in order.iter().enumerate() {
            group += entry >> 31;
            let code = self.codes[(entry & !NEW_VALUE) as usize];
            if code == DONE {
                continue;
            }
            let j = (code >> self.class_bits) as usize;
            let class = (code & class_mask) as usize;
            let st = &mut state[j];
            if st.seen > 0 && st.last_group != group {
                let n = st.n;
                let rest = n - st.seen;
                if st.seen >= self.min_leaf && rest >= self.min_leaf {
                    let b = &below[j * k..(j + 1) * k];
                    let total = &self.totals[j];
                    let mut children = nlogn.get(st.seen) + nlogn.get(rest);
                    if k == 2 {
                        children -= nlogn.get(b[0])
                            + nlogn.get(b[1])
                            + nlogn.get(total[0] - b[0])
                            + nlogn.get(total[1] - b[1]);
                    } else {
                        for c in 0..k {
                            children -= nlogn.get(b[c]) + nlogn.get(total[c] - b[c]);
                        }
                    }
                    let tol = EPS * n as f64;
                    let better = if children < st.best_children - tol {
                        true
                    } else if children <= st.best_children + tol {
                        // Equal gain: keep the cut in the wider gap. Rare
                        // enough to read the values here.
                        let gap = values[row(p)] - values[row(st.last_pos)];
                        gap > values[row(st.best_hi)] - values[row(st.best_lo)]
                    } else {
                        false
                    };
                    if better {
                        st.best_children = children;
                        st.best_lo = st.last_pos;
                        st.best_hi = p;
                        st.best_seen = st.seen;
                        best_below[j * k..(j + 1) * k].copy_from_slice(b);
                    }
                }
            }
            if st.seen == 0 {
                st.first_pos = p;
                st.n = self.totals[j].iter().sum();
            }
            st.seen += 1;
            st.last_group = group;
            st.last_pos = p;
            below[j * k + class] += 1;
        }
        (0..nodes)
            .map(|j| {
                let st = &state[j];
                if !self.splittable[j] || st.best_seen == 0 {
                    return None;
                }
                let n = st.n as f64;
                let parent = nlogn.weighted_entropy(&self.totals[j]);
                let gain = (parent - st.best_children) / n;
                let split_info =
                    (nlogn.get(st.n) - nlogn.get(st.best_seen) - nlogn.get(st.n - st.best_seen))
                        / n;
                let (lo, hi) = (values[row(st.best_lo)], values[row(st.best_hi)]);
                let range = values[row(st.last_pos)] - values[row(st.first_pos)];
                Some(Candidate {
                    attribute: a,
                    gain,
                    split_info,
                    margin: if range > 0.0 { (hi - lo) / range } else { 0.0 },
                    kind: CandidateKind::Numeric {
                        threshold: midpoint(lo, hi),
                        below: best_below[j * k..(j + 1) * k].to_vec(),
                    },
                })
            })
            .collect()
    }

    /// The multiway split of categorical attribute `a` for every open node.
    fn categorical(&self, a: usize, codes: &[u32]) -> Vec<Option<Candidate>> {
        let nodes = self.totals.len();
        let k = self.data.classes.len();
        // (node, level) -> class counts.
        let mut counts: HashMap<(u32, u32), Vec<usize>> = HashMap::new();
        for (r, &j) in self.node_of.iter().enumerate() {
            if j == DONE {
                continue;
            }
            counts.entry((j, codes[r])).or_insert_with(|| vec![0; k])
                [self.data.labels[r] as usize] += 1;
        }
        let mut per_node: Vec<Vec<(u32, Vec<usize>)>> = vec![Vec::new(); nodes];
        for ((j, code), c) in counts {
            per_node[j as usize].push((code, c));
        }
        per_node
            .into_iter()
            .enumerate()
            .map(|(j, mut branches)| {
                if !self.splittable[j] {
                    return None;
                }
                branches.sort_by_key(|(code, _)| *code);
                let sizes: Vec<usize> = branches.iter().map(|(_, c)| c.iter().sum()).collect();
                // C4.5: at least two branches must hold min_leaf runs.
                if sizes.iter().filter(|&&s| s >= self.min_leaf).count() < 2 {
                    return None;
                }
                let n: usize = sizes.iter().sum();
                let parent = self.nlogn.weighted_entropy(&self.totals[j]);
                let children: f64 = branches
                    .iter()
                    .map(|(_, c)| self.nlogn.weighted_entropy(c))
                    .sum();
                let split_info = (self.nlogn.get(n)
                    - sizes.iter().map(|&s| self.nlogn.get(s)).sum::<f64>())
                    / n as f64;
                Some(Candidate {
                    attribute: a,
                    gain: (parent - children) / n as f64,
                    split_info,
                    margin: 0.0,
                    kind: CandidateKind::Categorical { branches },
                })
            })
            .collect()
    }
}

/// The midpoint of two adjacent values, always above the smaller one (so
/// `value < threshold` keeps it below) and at most the larger one.
fn midpoint(lo: f64, hi: f64) -> f64 {
    let m = lo + (hi - lo) / 2.0;
    if m > lo && m <= hi {
        m
    } else {
        hi
    }
}

/// One node's progress through one attribute's sorted rows. Positions
/// index the sorted order.
#[derive(Debug, Clone, Copy)]
struct NumericState {
    /// Runs of the node in the scan so far.
    seen: usize,
    /// Runs of the node.
    n: usize,
    first_pos: usize,
    last_pos: usize,
    last_group: u32,
    /// `n·H` of the best cut's children (lower is better).
    best_children: f64,
    /// Positions of the values the best cut lies between.
    best_lo: usize,
    best_hi: usize,
    /// Runs below the best cut (0: none found).
    best_seen: usize,
}

impl Default for NumericState {
    fn default() -> Self {
        NumericState {
            seen: 0,
            n: 0,
            first_pos: 0,
            last_pos: 0,
            last_group: 0,
            best_children: f64::INFINITY,
            best_lo: 0,
            best_hi: 0,
            best_seen: 0,
        }
    }
}
