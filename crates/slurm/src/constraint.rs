//! `--constraint` (`-C`): the node features a job asks for, in the forms of Slurm's that
//! cosched honours — a feature (`ib`), all of several (`ib&big`, or the older `ib,big`),
//! one of several (`ib|eth`), and alternatives of conjunctions (`ib&big|gpu`: `&` binds
//! tighter, as in Slurm). Slurm's node counts (`ib*2`), matching brackets (`[a|b]`), `!`
//! negation and changeable features are refused with the reason: they ask how a job's nodes
//! relate to each other, which a filter on each node cannot say.

use thiserror::Error;

/// A `--constraint` that cosched does not take.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConstraintError {
    #[error("--constraint={text:?}: an empty feature name (write FEATURE, A&B or A|B)")]
    Empty { text: String },
    #[error(
        "--constraint={text:?}: {what} is not supported; cosched takes a feature, A&B (or A,B) and A|B"
    )]
    Unsupported { text: String, what: &'static str },
}

/// Alternatives (any one holds) of conjunctions (every feature of one is on the node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Constraint(Vec<Vec<String>>);

impl Constraint {
    /// Reads Slurm's form.
    pub fn parse(text: &str) -> Result<Constraint, ConstraintError> {
        let unsupported = |what| ConstraintError::Unsupported {
            text: text.into(),
            what,
        };
        if text.contains(['[', ']']) {
            return Err(unsupported("a matching set ([...])"));
        }
        if text.contains('*') {
            return Err(unsupported("a node count (FEATURE*N)"));
        }
        if text.contains('!') {
            return Err(unsupported("a negation (!FEATURE)"));
        }
        if text.contains(['(', ')']) {
            return Err(unsupported("a parenthesis"));
        }
        let alternatives = text
            .split('|')
            .map(|alt| {
                alt.split(['&', ','])
                    .map(|f| {
                        let f = f.trim();
                        if f.is_empty() {
                            Err(ConstraintError::Empty { text: text.into() })
                        } else {
                            Ok(f.to_string())
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Constraint(alternatives))
    }

    /// Whether a node with `features` satisfies it.
    pub fn admits<S: AsRef<str>>(&self, features: &[S]) -> bool {
        self.0
            .iter()
            .any(|all| all.iter().all(|f| features.iter().any(|h| h.as_ref() == f)))
    }

    /// Every feature it names, each once, in order of appearance.
    pub fn features(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for f in self.0.iter().flatten() {
            if !out.contains(&f.as_str()) {
                out.push(f);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn and_binds_tighter_than_or_as_in_slurm() {
        let c = Constraint::parse("ib&big|gpu").unwrap();
        assert!(c.admits(&["ib", "big"]));
        assert!(c.admits(&["gpu"]));
        assert!(!c.admits(&["ib"]));
        let c = Constraint::parse("ib,big").unwrap();
        assert!(!c.admits(&["big"]));
        assert!(c.admits(&["big", "ib", "x"]));
        assert_eq!(Constraint::parse("a|b&a").unwrap().features(), ["a", "b"]);
    }

    #[test]
    fn forms_about_several_nodes_are_refused_saying_which() {
        for (text, what) in [
            ("[ib|eth]", "matching set"),
            ("ib*2", "node count"),
            ("!ib", "negation"),
        ] {
            let e = Constraint::parse(text).unwrap_err().to_string();
            assert!(e.contains(what), "{text}: {e}");
        }
        assert!(matches!(
            Constraint::parse("ib&"),
            Err(ConstraintError::Empty { .. })
        ));
    }
}
