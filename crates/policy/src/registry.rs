//! Policies by name: the one place a policy is registered.

use crate::{ConfigError, Policy, PolicyConfig};

type Builder = fn(&PolicyConfig) -> Result<Box<dyn Policy>, ConfigError>;

/// One registered policy.
struct Entry {
    name: &'static str,
    /// One line, for `--help` texts and `cosched sim --list`.
    what: &'static str,
    /// The named options its constructor reads (a test checks the list against the
    /// constructor, which refuses any other key).
    options: &'static [&'static str],
    build: Builder,
}

/// Names are unique (a test checks it).
const POLICIES: &[Entry] = &[
    Entry {
        name: "fcfs",
        what: "first come, first served: start the queue head when it fits, never skip it",
        options: &[],
        build: |cfg| Ok(Box::new(crate::fcfs::Fcfs::new(cfg)?)),
    },
    Entry {
        name: "easy",
        what: "EASY backfilling: a reservation for the queue head; later jobs jump ahead if they do not delay it",
        options: &["variant"],
        build: |cfg| Ok(Box::new(crate::easy::Easy::new(cfg)?)),
    },
    Entry {
        name: "conservative",
        what: "conservative backfilling: a reservation for every waiting job on an availability profile",
        options: &[],
        build: |cfg| Ok(Box::new(crate::conservative::Conservative::new(cfg)?)),
    },
    Entry {
        name: "gang",
        what: "gang scheduling: Ousterhout matrix, buddy/first-fit/best-fit packing, alternate scheduling",
        options: &["alternate", "packing", "queue", "relaxed", "repack"],
        build: |cfg| Ok(Box::new(crate::gang::Gang::new(cfg)?)),
    },
    Entry {
        name: "prime",
        what: "prime/non-prime: during prime time long and large jobs wait for the night (seed 002)",
        options: &[
            "day_offset",
            "large_job",
            "prime_end",
            "prime_free",
            "prime_large_limit",
            "prime_small_limit",
            "prime_start",
            "schedule",
            "shift",
            "weekends",
        ],
        build: |cfg| Ok(Box::new(crate::prime::Prime::new(cfg)?)),
    },
    Entry {
        name: "t3d",
        what: "Cray T3D gang scheduler: job classes, do-not-disturb times, two-pass preemptive loading (seed 002)",
        options: &[
            "classes",
            "day_end",
            "day_offset",
            "day_start",
            "default_class",
            "job_limit",
            "large_job",
            "large_limit",
            "night",
            "queues",
            "swap_per_pe",
            "system_limit",
            "weekends",
        ],
        build: |cfg| Ok(Box::new(crate::t3d::T3d::new(cfg)?)),
    },
    Entry {
        name: "scojo-pect",
        what: "Scojo-PECT: short/medium/long time slices on multi-core nodes, space sharing with formula 11's PPN (seed 001)",
        options: crate::scojo::OPTIONS,
        build: |cfg| {
            Ok(Box::new(crate::scojo::Scojo::new(
                "scojo-pect",
                crate::scojo::glomarc::Variant::Ssp,
                cfg,
            )?))
        },
    },
    Entry {
        name: "glomarc",
        what: "G-LOMARC-TS group matchmaking inside Scojo-PECT's medium and long slices; variant=glts|ssp|cst|cstws|fbo|ns|nh (seed 001)",
        options: crate::scojo::OPTIONS,
        build: |cfg| {
            Ok(Box::new(crate::scojo::Scojo::new(
                "glomarc",
                crate::scojo::glomarc::Variant::Glts,
                cfg,
            )?))
        },
    },
];

/// Builds the policy registered as `name`.
///
/// `external:CMD` is not in the table: it runs CMD (split like a shell would) as a child
/// process speaking the policy protocol ([`crate::external`]), and takes any options (the
/// child reads them from its hello).
pub fn build(name: &str, cfg: &PolicyConfig) -> Result<Box<dyn Policy>, ConfigError> {
    if is_external(name) {
        return Ok(Box::new(crate::external::External::new(name, cfg)?));
    }
    match POLICIES.iter().find(|e| e.name == name) {
        Some(e) => (e.build)(cfg),
        None => Err(ConfigError::UnknownPolicy {
            name: name.to_string(),
            known: format!("{}, or external:CMD", names().join(", ")),
        }),
    }
}

/// Whether `name` is an external policy (`external:CMD`).
pub fn is_external(name: &str) -> bool {
    name.starts_with(crate::external::PREFIX)
}

/// Registered names, in registration order.
pub fn names() -> Vec<&'static str> {
    POLICIES.iter().map(|e| e.name).collect()
}

/// `(name, description)` pairs, for `--help` texts and listings.
pub fn describe() -> impl Iterator<Item = (&'static str, &'static str)> {
    POLICIES.iter().map(|e| (e.name, e.what))
}

/// The named options a policy takes (sorted), or `None` for an unknown policy.
pub fn options(name: &str) -> Option<&'static [&'static str]> {
    POLICIES.iter().find(|e| e.name == name).map(|e| e.options)
}

/// `cfg` with only the options policy `name` takes: for a configuration shared by several
/// readers (a sweep's policies; the T3D classes that the time-sharing report reads whatever
/// the policy).
pub fn restrict(name: &str, cfg: &PolicyConfig) -> PolicyConfig {
    if is_external(name) {
        // An external policy reads what it likes from its hello.
        return cfg.clone();
    }
    let takes = options(name).unwrap_or_default();
    let mut own = cfg.clone();
    own.options.retain(|k, _| takes.contains(&k));
    own
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
        let err = build("external:", &cfg).err().unwrap().to_string();
        assert!(err.contains("give a command after `external:`"), "{err}");
    }

    /// Every policy refuses a key it does not read, and the keys it reads are exactly the
    /// registry's list: the error names them.
    #[test]
    fn unknown_options_are_refused_with_the_known_ones() {
        let mut cfg = PolicyConfig::new(cosched_core::MachineShape::flat(8, 1));
        cfg.options
            .insert("packng".into(), toml::Value::from("best-fit"));
        for name in names() {
            let err = build(name, &cfg)
                .err()
                .expect("packng is no option")
                .to_string();
            let known = options(name).unwrap();
            let want = if known.is_empty() {
                format!("policy {name}: unknown option packng; {name} takes no options")
            } else {
                format!(
                    "policy {name}: unknown option packng; known options: {}",
                    known.join(", ")
                )
            };
            assert_eq!(err, want);
            // Each listed key is accepted on its own as far as the unknown-key check goes.
            for key in known {
                let mut one = PolicyConfig::new(cosched_core::MachineShape::flat(8, 1));
                one.options.insert(key.to_string(), toml::Value::from("?"));
                if let Err(e) = build(name, &one) {
                    assert!(!e.to_string().contains("unknown option"), "{name}: {e}");
                }
            }
        }
        assert_eq!(
            build("gang", &cfg).err().unwrap().to_string(),
            "policy gang: unknown option packng; known options: alternate, packing, queue, relaxed, repack"
        );
        cfg.options.insert("zz".into(), toml::Value::from(1));
        let err = build("fcfs", &cfg).err().unwrap().to_string();
        assert_eq!(
            err,
            "policy fcfs: unknown options packng, zz; fcfs takes no options"
        );
    }
}
