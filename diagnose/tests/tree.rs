//! The tree against hand-computed information gains and thresholds, gain
//! ratio, the stopping rule, and rule extraction on known trees.

use diagnose::dataset::{Attribute, Column, Dataset};
use diagnose::rules::{self, paths, rule_text};
use diagnose::tree::{build, Node, Presorted, Tree, TreeParams};

fn entropy(counts: &[f64]) -> f64 {
    let n: f64 = counts.iter().sum();
    counts
        .iter()
        .filter(|&&c| c > 0.0)
        .map(|&c| -(c / n) * (c / n).log2())
        .sum()
}

fn numeric(name: &str, v: &[f64]) -> Attribute {
    Attribute {
        name: name.into(),
        column: Column::Numeric(v.to_vec()),
    }
}

fn categorical(name: &str, v: &[&str]) -> Attribute {
    Attribute {
        name: name.into(),
        column: Column::categorical(v),
    }
}

fn dataset(attributes: Vec<Attribute>, labels: &str) -> Dataset {
    let labels = labels
        .chars()
        .map(|c| match c {
            'g' => 0,
            'b' => 1,
            _ => panic!("label {c}"),
        })
        .collect();
    Dataset::new(attributes, labels, vec!["good".into(), "bad".into()]).unwrap()
}

fn grow(data: &Dataset, params: TreeParams) -> Tree {
    let active = vec![true; data.attributes.len()];
    build(data, &Presorted::new(data), &active, &[], &params)
}

#[test]
fn numeric_split_matches_hand_computed_gain_and_midpoint() {
    // x = 1..=11, classes g g g g b g b b b b b (5 good, 6 bad).
    // Parent entropy H(5/11, 6/11) = 0.99403.
    // Threshold 4.5: {4g} | {1g 6b}: gain = 0.99403 - 7/11·H(1/7) = 0.61751.
    // Threshold 6.5: {5g 1b} | {5b}: gain = 0.99403 - 6/11·H(1/6) = 0.63947 (best).
    let x: Vec<f64> = (1..=11).map(f64::from).collect();
    let data = dataset(vec![numeric("x", &x)], "ggggbgbbbbb");
    let parent = entropy(&[5.0, 6.0]);
    assert!((parent - 0.99403).abs() < 1e-5);
    let gain_45 = parent - 7.0 / 11.0 * entropy(&[1.0, 6.0]);
    let gain_65 = parent - 6.0 / 11.0 * entropy(&[5.0, 1.0]);
    assert!((gain_45 - 0.61751).abs() < 1e-5, "{gain_45}");
    assert!((gain_65 - 0.63947).abs() < 1e-5, "{gain_65}");

    let tree = grow(&data, TreeParams::default());
    match &tree.root {
        Node::Numeric {
            attribute,
            threshold,
            gain,
            counts,
            below,
            at_or_above,
        } => {
            assert_eq!(*attribute, 0);
            assert_eq!(*threshold, 6.5);
            assert!((gain - gain_65).abs() < 1e-12, "gain {gain} vs {gain_65}");
            assert_eq!(counts, &vec![5, 6]);
            // The left side {5g 1b} cannot be split so that more runs are
            // right (every split of it still gets 5 right): a leaf.
            assert_eq!(
                **below,
                Node::Leaf {
                    class: 0,
                    counts: vec![5, 1]
                }
            );
            assert_eq!(
                **at_or_above,
                Node::Leaf {
                    class: 1,
                    counts: vec![0, 5]
                }
            );
        }
        other => panic!("expected a numeric root, got {other:?}"),
    }
    assert!((tree.accuracy(&data) - 10.0 / 11.0).abs() < 1e-12);
}

#[test]
fn thresholds_lie_between_distinct_values_and_ties_stay_together() {
    // Equal values never straddle a threshold: 2.0 appears for a good and a
    // bad run, so the only clean cut is between 2 and 7.
    let data = dataset(
        vec![numeric("x", &[1.0, 2.0, 2.0, 7.0, 7.0, 9.0])],
        "ggbbbb",
    );
    let tree = grow(&data, TreeParams::default());
    let Node::Numeric { threshold, .. } = tree.root else {
        panic!("no split");
    };
    // Best gain: {1}|{2,2,7,7,9} (1g | 1g 4b) vs {1,2,2}|{7,7,9} (2g1b | 3b):
    // H-weighted 5/6·H(1/5)=0.60161 vs 3/6·H(1/3)=0.45915: the latter wins.
    assert_eq!(threshold, 4.5);
}

#[test]
fn min_leaf_is_respected() {
    let x: Vec<f64> = (1..=6).map(f64::from).collect();
    // The only perfect cut leaves one run on a side.
    let data = dataset(vec![numeric("x", &x)], "gbbbbb");
    let tree = grow(
        &data,
        TreeParams {
            min_leaf: 2,
            ..TreeParams::default()
        },
    );
    // With two runs per leaf, a cut at 2.5 ({g b} | {b b b b}) gains
    // information but gets no more runs right (5 either way): no split.
    assert!(tree.root_attribute().is_none(), "{:?}", tree.root);
    let tree = grow(&data, TreeParams::default());
    assert_eq!(tree.root_attribute(), Some(0));
}

#[test]
fn a_split_that_does_not_improve_accuracy_is_not_made() {
    // XOR: no single split gets more runs right than the majority guess.
    let data = dataset(
        vec![
            numeric("a", &[0.0, 0.0, 1.0, 1.0]),
            numeric("b", &[0.0, 1.0, 0.0, 1.0]),
        ],
        "gbbg",
    );
    let tree = grow(&data, TreeParams::default());
    assert_eq!(tree.root_attribute(), None);
    assert!(rules::top_rules(&data, &TreeParams::default(), 10).is_empty());
}

/// Rows 0-3 good, 4-7 bad. `cat`: four levels of two runs, separates
/// perfectly (gain 1, split info 2, ratio 0.5). `num`: {3g} | {1g 4b}
/// (gain 0.54879, split info H(3/8) = 0.95443, ratio 0.57500). `noise`:
/// alternating classes, best gain 0.04879 (min leaf 2).
fn ratio_data() -> Dataset {
    dataset(
        vec![
            categorical("cat", &["p", "p", "q", "q", "r", "r", "s", "s"]),
            numeric("num", &[1.0, 2.0, 3.0, 12.5, 11.0, 12.0, 13.0, 14.0]),
            numeric("noise", &[1.0, 3.0, 5.0, 7.0, 2.0, 4.0, 6.0, 8.0]),
        ],
        "ggggbbbb",
    )
}

#[test]
fn gain_ratio_prefers_the_split_with_fewer_branches() {
    let gain_num = 1.0 - 5.0 / 8.0 * entropy(&[1.0, 4.0]);
    let ratio_num = gain_num / entropy(&[3.0, 5.0]);
    let gain_noise = 1.0 - 3.0 / 8.0 * entropy(&[2.0, 1.0]) - 5.0 / 8.0 * entropy(&[2.0, 3.0]);
    assert!((gain_num - 0.54879).abs() < 1e-5);
    assert!((ratio_num - 0.57500).abs() < 1e-5);
    assert!((gain_noise - 0.04879).abs() < 1e-5);
    // C4.5 considers only candidates with at least the average gain:
    // (1 + 0.54879 + 0.04879) / 3 = 0.53253 <= 0.54879, so `num` qualifies,
    // and its ratio 0.575 beats `cat`'s 0.5.
    assert!((1.0 + gain_num + gain_noise) / 3.0 <= gain_num);

    let data = ratio_data();
    let params = TreeParams {
        min_leaf: 2,
        ..TreeParams::default()
    };
    let by_gain = grow(&data, params);
    assert_eq!(
        by_gain.root_attribute(),
        Some(0),
        "information gain picks cat"
    );
    let by_ratio = grow(
        &data,
        TreeParams {
            gain_ratio: true,
            ..params
        },
    );
    assert_eq!(by_ratio.root_attribute(), Some(1), "gain ratio picks num");
    match &by_ratio.root {
        Node::Numeric {
            threshold, gain, ..
        } => {
            assert_eq!(*threshold, 7.0);
            assert!((gain - gain_num).abs() < 1e-12);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ties_go_to_the_widest_gap() {
    // Both separate perfectly; `wide` has its classes far apart relative to
    // its range, `narrow` barely.
    let data = dataset(
        vec![
            numeric("narrow", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            numeric("wide", &[1.0, 1.1, 1.2, 9.0, 9.1, 9.2]),
        ],
        "gggbbb",
    );
    let tree = grow(&data, TreeParams::default());
    assert_eq!(tree.root_attribute(), Some(1));
}

/// The research's Figure 4: x < 50 → good; else y > 100 → good, else bad.
fn figure_4() -> (Dataset, Tree) {
    let data = dataset(
        vec![
            numeric("x", &[10.0, 20.0, 60.0, 70.0, 80.0, 90.0]),
            numeric("y", &[0.0, 300.0, 50.0, 60.0, 150.0, 200.0]),
        ],
        "ggbbgg",
    );
    let tree = Tree {
        root: Node::Numeric {
            attribute: 0,
            threshold: 50.0,
            gain: 0.5,
            counts: vec![4, 2],
            below: Box::new(Node::Leaf {
                class: 0,
                counts: vec![2, 0],
            }),
            at_or_above: Box::new(Node::Numeric {
                attribute: 1,
                threshold: 100.0,
                gain: 1.0,
                counts: vec![2, 2],
                below: Box::new(Node::Leaf {
                    class: 1,
                    counts: vec![0, 2],
                }),
                at_or_above: Box::new(Node::Leaf {
                    class: 0,
                    counts: vec![2, 0],
                }),
            }),
        },
    };
    (data, tree)
}

#[test]
fn rules_join_conditions_with_and_and_paths_with_or() {
    let (data, tree) = figure_4();
    let p = paths(&tree, &data);
    assert_eq!(p.len(), 3);
    let texts: Vec<Vec<String>> = p
        .iter()
        .map(|p| p.conditions.iter().map(|c| c.text(&data)).collect())
        .collect();
    assert_eq!(
        texts,
        vec![
            vec!["x < 50".to_string()],
            vec!["x >= 50".to_string(), "y < 100".to_string()],
            vec!["x >= 50".to_string(), "y >= 100".to_string()],
        ]
    );
    assert_eq!(
        rule_text(&p, &data),
        "if x < 50 or (x >= 50 and y >= 100) then good else bad"
    );
    assert_eq!(tree.accuracy(&data), 1.0);
    // The same tree grown from the data.
    let grown = grow(&data, TreeParams::default());
    assert_eq!(grown.accuracy(&data), 1.0);
}

#[test]
fn conditions_on_one_attribute_merge_into_a_range() {
    // bad at both ends: x < 2 → bad; else x < 5.5 → good, else bad.
    let data = dataset(vec![numeric("x", &[1.0, 3.0, 4.0, 5.0, 6.0])], "bgggb");
    let tree = Tree {
        root: Node::Numeric {
            attribute: 0,
            threshold: 2.0,
            gain: 0.0,
            counts: vec![3, 2],
            below: Box::new(Node::Leaf {
                class: 1,
                counts: vec![0, 1],
            }),
            at_or_above: Box::new(Node::Numeric {
                attribute: 0,
                threshold: 5.5,
                gain: 0.0,
                counts: vec![3, 1],
                below: Box::new(Node::Leaf {
                    class: 0,
                    counts: vec![3, 0],
                }),
                at_or_above: Box::new(Node::Leaf {
                    class: 1,
                    counts: vec![0, 1],
                }),
            }),
        },
    };
    let p = paths(&tree, &data);
    assert_eq!(
        rule_text(&p, &data),
        "if x < 2 or x >= 5.5 then bad else good"
    );
    assert_eq!(p[1].conditions.len(), 1);
    assert_eq!(p[1].conditions[0].text(&data), "2 <= x < 5.5");
    assert_eq!(p[1].runs, 3);
    // Grown from the data: the first cut goes in the wider gap (1 | 3),
    // giving the same tree.
    let grown = grow(&data, TreeParams::default());
    assert_eq!(grown, tree_with_gains(&grown, tree));
}

/// `expected` with the gains of `grown` (gains are checked elsewhere).
fn tree_with_gains(grown: &Tree, mut expected: Tree) -> Tree {
    fn copy(from: &Node, to: &mut Node) {
        if let (
            Node::Numeric {
                gain: g,
                below: b1,
                at_or_above: a1,
                ..
            },
            Node::Numeric {
                gain,
                below: b2,
                at_or_above: a2,
                ..
            },
        ) = (from, to)
        {
            *gain = *g;
            copy(b1, b2);
            copy(a1, a2);
        }
    }
    copy(&grown.root, &mut expected.root);
    expected
}

#[test]
fn top_rules_remove_each_root_and_rebuild() {
    // Three attributes separate the classes, each less cleanly than the one
    // before; the fourth is noise.
    let data = dataset(
        vec![
            numeric("second", &[1.0, 2.0, 3.0, 4.0, 10.0, 11.0, 3.5, 13.0]),
            numeric("first", &[1.0, 2.0, 3.0, 4.0, 10.0, 11.0, 12.0, 13.0]),
            numeric("noise", &[5.0, 1.0, 5.0, 1.0, 5.0, 1.0, 5.0, 1.0]),
        ],
        "ggggbbbb",
    );
    let rules = rules::top_rules(&data, &TreeParams::default(), 10);
    let names: Vec<&str> = rules
        .iter()
        .map(|r| data.attributes[r.attributes[0]].name.as_str())
        .collect();
    assert_eq!(names[0], "first");
    assert_eq!(rules[0].text, "if first < 7 then good else bad");
    assert_eq!(rules[0].accuracy, 1.0);
    assert_eq!(names[1], "second");
    assert_eq!(rules[0].rank, 1);
    assert_eq!(rules[1].rank, 2);
    // `noise` alone gets no more runs right than the majority guess.
    assert_eq!(rules.len(), 2, "{:?}", names);
    let limited = rules::top_rules(&data, &TreeParams::default(), 1);
    assert_eq!(limited.len(), 1);
}

#[test]
fn at_equal_gain_the_next_rule_is_about_another_syscall() {
    // The demo's shape: a fault moves writes and reads alike, and every
    // statistic below separates the runs perfectly. By margin alone the
    // write statistics would come first (the CI run where `consec_write`,
    // `result_write` and `param_write` were rules 1-3 and `num_read`
    // fourth); the second rule must be about the reads. The transition has
    // the larger margin but names the writes too, so it is not fresh.
    let data = dataset(
        vec![
            numeric("consec_write", &[10.0, 10.1, 10.2, 1.0, 1.1, 1.2]),
            numeric("result_write", &[9.0, 9.2, 9.4, 1.0, 1.2, 1.4]),
            numeric("param_write@file", &[9.0, 9.2, 9.4, 1.0, 1.2, 1.4]),
            numeric("num_read", &[1.0, 1.5, 2.0, 8.0, 8.5, 9.0]),
            numeric("gap_read@tcp->write@file", &[1.0, 1.1, 1.2, 8.0, 8.1, 8.2]),
        ],
        "gggbbb",
    );
    let rules = rules::top_rules(&data, &TreeParams::default(), 5);
    let names: Vec<&str> = rules
        .iter()
        .map(|r| data.attributes[r.attributes[0]].name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "consec_write",
            "num_read",
            "gap_read@tcp->write@file",
            "result_write",
            "param_write@file"
        ]
    );
}
