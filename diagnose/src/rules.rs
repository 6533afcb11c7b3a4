//! Rules from a tree (conditions along a root-to-leaf path joined by AND,
//! paths ending in the same class joined by OR), and the research's
//! Algorithm 1: build a tree, keep its rule, remove its root attribute, and
//! build again, up to `top` times.

use crate::dataset::{Column, Dataset};
use crate::fmt::format_number;
use crate::tree::{self, Node, Presorted, Tree, TreeParams};

/// One condition of a path, with consecutive conditions on the same numeric
/// attribute merged into one range.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// `lower <= attribute < upper` (either bound may be absent).
    Range {
        /// The attribute's index.
        attribute: usize,
        /// Inclusive lower bound.
        lower: Option<f64>,
        /// Exclusive upper bound.
        upper: Option<f64>,
    },
    /// `attribute = level`.
    Is {
        /// The attribute's index.
        attribute: usize,
        /// The level's name.
        level: String,
    },
}

impl Condition {
    /// The attribute the condition tests.
    pub fn attribute(&self) -> usize {
        match self {
            Condition::Range { attribute, .. } | Condition::Is { attribute, .. } => *attribute,
        }
    }

    /// The condition as text (`num_read < 23631.5`).
    pub fn text(&self, data: &Dataset) -> String {
        match self {
            Condition::Range {
                attribute,
                lower,
                upper,
            } => {
                let name = &data.attributes[*attribute].name;
                match (lower, upper) {
                    (Some(l), Some(u)) => {
                        format!("{} <= {name} < {}", format_number(*l), format_number(*u))
                    }
                    (Some(l), None) => format!("{name} >= {}", format_number(*l)),
                    (None, Some(u)) => format!("{name} < {}", format_number(*u)),
                    (None, None) => format!("{name} is any value"),
                }
            }
            Condition::Is { attribute, level } => {
                format!("{} = {level}", data.attributes[*attribute].name)
            }
        }
    }
}

/// A root-to-leaf path.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    /// Its conditions, all of which hold (AND), in order from the root.
    pub conditions: Vec<Condition>,
    /// The class its leaf predicts.
    pub class: u32,
    /// Training runs that reach the leaf.
    pub runs: usize,
}

/// Every root-to-leaf path of `tree`, leftmost (smaller values) first.
pub fn paths(tree: &Tree, data: &Dataset) -> Vec<Path> {
    let mut out = Vec::new();
    walk(&tree.root, data, &mut Vec::new(), &mut out);
    out
}

fn walk(node: &Node, data: &Dataset, conditions: &mut Vec<Condition>, out: &mut Vec<Path>) {
    match node {
        Node::Leaf { class, counts } => out.push(Path {
            conditions: conditions.clone(),
            class: *class,
            runs: counts.iter().sum(),
        }),
        Node::Numeric {
            attribute,
            threshold,
            below,
            at_or_above,
            ..
        } => {
            for (child, is_below) in [(below, true), (at_or_above, false)] {
                let saved = conditions.clone();
                narrow(conditions, *attribute, *threshold, is_below);
                walk(child, data, conditions, out);
                *conditions = saved;
            }
        }
        Node::Categorical {
            attribute,
            branches,
            ..
        } => {
            let levels = match &data.attributes[*attribute].column {
                Column::Categorical { levels, .. } => levels,
                Column::Numeric(_) => return,
            };
            // Branches by the class they lean to, good (class 0) first,
            // then in level order: the rule then reads "if fact.adapter =
            // bridged then good else bad" whichever level came first.
            let mut ordered: Vec<&(u32, Node)> = branches.iter().collect();
            ordered.sort_by_key(|(code, child)| (tree::majority(child.counts()).0, *code));
            for (code, child) in ordered {
                conditions.push(Condition::Is {
                    attribute: *attribute,
                    level: levels[*code as usize].clone(),
                });
                walk(child, data, conditions, out);
                conditions.pop();
            }
        }
    }
}

/// Adds `attribute < threshold` (or `>=`), merged into an existing range on
/// the same attribute.
fn narrow(conditions: &mut Vec<Condition>, attribute: usize, threshold: f64, below: bool) {
    for c in conditions.iter_mut() {
        if let Condition::Range {
            attribute: a,
            lower,
            upper,
        } = c
        {
            if *a == attribute {
                if below {
                    *upper = Some(upper.map_or(threshold, |u| u.min(threshold)));
                } else {
                    *lower = Some(lower.map_or(threshold, |l| l.max(threshold)));
                }
                return;
            }
        }
    }
    conditions.push(Condition::Range {
        attribute,
        lower: (!below).then_some(threshold),
        upper: below.then_some(threshold),
    });
}

/// One tree's rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// 1 for the first tree, 2 for the tree built without the first root
    /// attribute, ...
    pub rank: usize,
    /// The rule as text: `if num_read < 23631.5 then good else bad`.
    pub text: String,
    /// The attributes it tests, root first.
    pub attributes: Vec<usize>,
    /// Share of the training runs the rule classifies correctly.
    pub accuracy: f64,
    /// The tree the rule was read from.
    pub tree: Tree,
    /// Its paths.
    pub paths: Vec<Path>,
}

/// The text of a tree's rule: the classes in the order their first leaf
/// appears, each with its paths joined by OR; the last class is "else".
pub fn rule_text(paths: &[Path], data: &Dataset) -> String {
    let mut classes: Vec<u32> = Vec::new();
    for p in paths {
        if !classes.contains(&p.class) {
            classes.push(p.class);
        }
    }
    if classes.len() <= 1 {
        let class = classes
            .first()
            .map_or("?", |c| data.classes[*c as usize].as_str());
        return format!("always {class}");
    }
    let mut parts = Vec::new();
    for (i, class) in classes.iter().enumerate() {
        let name = &data.classes[*class as usize];
        if i + 1 == classes.len() {
            let rules = parts.join("; ");
            return format!("{rules} else {name}");
        }
        let of_class: Vec<&Path> = paths.iter().filter(|p| p.class == *class).collect();
        let alternatives: Vec<String> = of_class
            .iter()
            .map(|p| {
                let conj: Vec<String> = p.conditions.iter().map(|c| c.text(data)).collect();
                if conj.len() > 1 && of_class.len() > 1 {
                    format!("({})", conj.join(" and "))
                } else {
                    conj.join(" and ")
                }
            })
            .collect();
        parts.push(format!("if {} then {name}", alternatives.join(" or ")));
    }
    parts.join("; ")
}

/// The attributes a tree tests, root first, each once.
fn tested_attributes(paths: &[Path]) -> Vec<usize> {
    let mut out = Vec::new();
    for p in paths {
        for c in &p.conditions {
            if !out.contains(&c.attribute()) {
                out.push(c.attribute());
            }
        }
    }
    out
}

/// The research's Algorithm 1: up to `top` trees, each built without the
/// root attributes of the trees before it (and their per-fd-kind twins);
/// stops early when no tree can be built (no split improves on the majority
/// class).
pub fn top_rules(data: &Dataset, params: &TreeParams, top: usize) -> Vec<Rule> {
    let sorted = Presorted::new(data);
    // Constant attributes cannot split; leaving them out saves their scans.
    let mut active: Vec<bool> = data
        .attributes
        .iter()
        .map(|a| !a.column.is_constant())
        .collect();
    // Attributes about a syscall no rule named yet: at equal gain the next
    // tree prefers them (`tree::build`), so ties give a new explanation.
    let mut fresh = vec![true; data.attributes.len()];
    let mut rules = Vec::new();
    for rank in 1..=top {
        let tree = tree::build(data, &sorted, &active, &fresh, params);
        let Some(root) = tree.root_attribute() else {
            break;
        };
        let paths = paths(&tree, data);
        let tested = tested_attributes(&paths);
        let named: Vec<&str> = tested
            .iter()
            .flat_map(|&a| syscalls_of(&data.attributes[a].name))
            .collect();
        for (a, attr) in data.attributes.iter().enumerate() {
            if syscalls_of(&attr.name).any(|sc| named.contains(&sc)) {
                fresh[a] = false;
            }
        }
        rules.push(Rule {
            rank,
            text: rule_text(&paths, data),
            attributes: tested,
            accuracy: tree.accuracy(data),
            tree,
            paths,
        });
        // Remove the root attribute, and with it its per-fd-kind twins
        // (`num_read` with `num_read@socket`, ...): they usually carry the
        // same information and would only repeat the rule.
        let family = family_of(&data.attributes[root].name);
        for (a, attr) in data.attributes.iter().enumerate() {
            if family_of(&attr.name) == family {
                active[a] = false;
            }
        }
        active[root] = false;
    }
    rules
}

/// The syscalls an attribute is about (`consec_write@file` -> `write`,
/// `gap_read->write` -> `read`, `write`); none for a fact.
fn syscalls_of(name: &str) -> impl Iterator<Item = &str> {
    let about = if name.starts_with("fact.") {
        ""
    } else {
        name.split_once('_').map_or("", |(_, about)| about)
    };
    about
        .split("->")
        .map(|entry| entry.split_once('@').map_or(entry, |(plain, _)| plain))
        .filter(|sc| !sc.is_empty())
}

/// An attribute's name without its fd-kind suffix (`num_read@socket` ->
/// `num_read`).
fn family_of(name: &str) -> &str {
    if name.starts_with("fact.") {
        return name;
    }
    name.split_once('@').map_or(name, |(plain, _)| plain)
}
