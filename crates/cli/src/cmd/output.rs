//! What every command prints through: text to stdout that a closed pipe does not fail, one
//! pretty JSON document for `--json`, and plain tables of figures (`cosched_report::table`).

use std::io::Write;

/// Prints to stdout; a reader that went away (`| head`) is not an error.
pub(crate) fn emit(text: &str) {
    let _ = std::io::stdout().write_all(text.as_bytes());
}

/// Prints `v` as one pretty JSON document (`--json`).
pub(crate) fn print_json(v: &impl serde::Serialize) -> anyhow::Result<()> {
    emit(&format!("{}\n", serde_json::to_string_pretty(v)?));
    Ok(())
}

pub(crate) use cosched_report::table::{aligned_table, table};
