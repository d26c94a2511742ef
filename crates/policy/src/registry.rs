//! Policies by name: the one place a policy is registered.

use crate::{ConfigError, Policy, PolicyConfig};

type Builder = fn(&PolicyConfig) -> Result<Box<dyn Policy>, ConfigError>;

/// `(name, one-line description, builder)`; names are unique (a test checks it).
const POLICIES: &[(&str, &str, Builder)] = &[
    (
        "fcfs",
        "first come, first served: start the queue head when it fits, never skip it",
        |cfg| Ok(Box::new(crate::fcfs::Fcfs::new(cfg))),
    ),
    (
        "easy",
        "EASY backfilling: a reservation for the queue head; later jobs jump ahead if they do not delay it",
        |cfg| Ok(Box::new(crate::easy::Easy::new(cfg))),
    ),
    (
        "conservative",
        "conservative backfilling: a reservation for every waiting job on an availability profile",
        |cfg| Ok(Box::new(crate::conservative::Conservative::new(cfg))),
    ),
    (
        "gang",
        "gang scheduling: Ousterhout matrix, buddy/first-fit/best-fit packing, alternate scheduling",
        |cfg| Ok(Box::new(crate::gang::Gang::new(cfg)?)),
    ),
    (
        "prime",
        "prime/non-prime: during prime time long and large jobs wait for the night (seed 002)",
        |cfg| Ok(Box::new(crate::prime::Prime::new(cfg)?)),
    ),
    (
        "t3d",
        "Cray T3D gang scheduler: job classes, do-not-disturb times, two-pass preemptive loading (seed 002)",
        |cfg| Ok(Box::new(crate::t3d::T3d::new(cfg)?)),
    ),
];

/// Builds the policy registered as `name`.
pub fn build(name: &str, cfg: &PolicyConfig) -> Result<Box<dyn Policy>, ConfigError> {
    match POLICIES.iter().find(|(n, _, _)| *n == name) {
        Some((_, _, builder)) => builder(cfg),
        None => Err(ConfigError::UnknownPolicy {
            name: name.to_string(),
            known: names().join(", "),
        }),
    }
}

/// Registered names, in registration order.
pub fn names() -> Vec<&'static str> {
    POLICIES.iter().map(|(n, _, _)| *n).collect()
}

/// `(name, description)` pairs, for `--help` texts and listings.
pub fn describe() -> impl Iterator<Item = (&'static str, &'static str)> {
    POLICIES.iter().map(|(n, d, _)| (*n, *d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_buildable() {
        let cfg = PolicyConfig::new(cosched_core::MachineShape::flat(8, 1));
        let mut seen = std::collections::HashSet::new();
        for name in names() {
            assert!(seen.insert(name), "duplicate policy name {name}");
            assert_eq!(build(name, &cfg).unwrap().name(), name);
        }
        let err = build("nope", &cfg).err().unwrap().to_string();
        assert!(err.contains("fcfs"), "{err}");
    }
}
