//! The policy configuration files the documentation points at build their policies.

use cosched_core::MachineShape;
use cosched_policy::{PolicyOptions, policy_config, registry};

#[test]
fn the_readme_t3d_file_builds_a_t3d_policy() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/t3d.toml");
    let opts = PolicyOptions {
        file: Some(file.clone()),
        ..PolicyOptions::default()
    };
    let cfg = policy_config(MachineShape::flat(128, 1), &opts)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert!(!cfg.options.is_empty(), "{} sets no option", file.display());
    let p = registry::build("t3d", &cfg).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert_eq!(p.name(), "t3d");
}
