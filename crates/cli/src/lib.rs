//! The subcommands of `cosched` as a library, so that what they parse can be tested and fuzzed
//! outside the binary (the batch-script directives, for one: crates/fuzz). `main.rs` only
//! dispatches.

pub mod cmd;
