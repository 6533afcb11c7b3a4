//! The table the trees learn from: one row per run, one column per named
//! attribute, and a class label per row.

use anyhow::bail;

/// One attribute's values, one per run.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// Numbers (counts, seconds, bytes). Always finite.
    Numeric(Vec<f64>),
    /// Categories: `codes[row]` indexes `levels`.
    Categorical {
        /// Level index per row.
        codes: Vec<u32>,
        /// The level names.
        levels: Vec<String>,
    },
}

impl Column {
    /// A categorical column from one value per row (levels in order of first
    /// appearance).
    pub fn categorical<S: AsRef<str>>(values: &[S]) -> Column {
        let mut levels: Vec<String> = Vec::new();
        let codes = values
            .iter()
            .map(|v| {
                let v = v.as_ref();
                match levels.iter().position(|l| l == v) {
                    Some(i) => i as u32,
                    None => {
                        levels.push(v.to_string());
                        (levels.len() - 1) as u32
                    }
                }
            })
            .collect();
        Column::Categorical { codes, levels }
    }

    /// Rows in the column.
    pub fn len(&self) -> usize {
        match self {
            Column::Numeric(v) => v.len(),
            Column::Categorical { codes, .. } => codes.len(),
        }
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether every row holds the same value (such a column cannot split).
    pub fn is_constant(&self) -> bool {
        match self {
            Column::Numeric(v) => v.windows(2).all(|w| w[0] == w[1]),
            Column::Categorical { codes, .. } => codes.windows(2).all(|w| w[0] == w[1]),
        }
    }

    /// Row `row`'s value as text (for reports).
    pub fn value_text(&self, row: usize) -> String {
        match self {
            Column::Numeric(v) => crate::fmt::format_number(v[row]),
            Column::Categorical { codes, levels } => levels[codes[row] as usize].clone(),
        }
    }
}

/// Most classes a dataset may have (labels from a fact with more values
/// than this are refused: rules over so many classes say nothing).
pub const MAX_CLASSES: usize = 1024;

/// A named attribute.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    /// Its fixed name (`num_read`, `fact.os`, ...).
    pub name: String,
    /// Its values.
    pub column: Column,
}

/// Runs as rows of attributes, each with a class.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// The attributes.
    pub attributes: Vec<Attribute>,
    /// Class index per row.
    pub labels: Vec<u32>,
    /// Class names (`good`, `bad`).
    pub classes: Vec<String>,
}

impl Dataset {
    /// Checks that every column has one value per label, that numbers are
    /// finite and that labels name a class.
    pub fn new(
        attributes: Vec<Attribute>,
        labels: Vec<u32>,
        classes: Vec<String>,
    ) -> anyhow::Result<Dataset> {
        for a in &attributes {
            if a.column.len() != labels.len() {
                bail!(
                    "attribute {} has {} values for {} runs",
                    a.name,
                    a.column.len(),
                    labels.len()
                );
            }
            match &a.column {
                Column::Numeric(v) => {
                    if let Some(x) = v.iter().find(|x| !x.is_finite()) {
                        bail!(
                            "attribute {} holds a value that is not finite ({x})",
                            a.name
                        );
                    }
                }
                Column::Categorical { codes, levels } => {
                    if codes.iter().any(|c| *c as usize >= levels.len()) {
                        bail!("attribute {} has a code without a level", a.name);
                    }
                }
            }
        }
        if classes.len() > MAX_CLASSES {
            bail!(
                "{} classes: at most {MAX_CLASSES} (label by a fact with fewer values)",
                classes.len()
            );
        }
        if labels.iter().any(|l| *l as usize >= classes.len()) {
            bail!("a run's label names no class");
        }
        Ok(Dataset {
            attributes,
            labels,
            classes,
        })
    }

    /// Runs (rows).
    pub fn rows(&self) -> usize {
        self.labels.len()
    }

    /// Runs per class.
    pub fn class_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.classes.len()];
        for l in &self.labels {
            counts[*l as usize] += 1;
        }
        counts
    }

    /// The index of the attribute named `name`.
    pub fn attribute_index(&self, name: &str) -> Option<usize> {
        self.attributes.iter().position(|a| a.name == name)
    }
}
