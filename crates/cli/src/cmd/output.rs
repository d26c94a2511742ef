//! What every command prints through: text to stdout that a closed pipe does not fail, one
//! pretty JSON document for `--json`, and plain tables of figures.

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

/// A table as text: a header line and one line per row, columns padded, the
/// first `left` columns aligned left and the others (figures) right.
pub(crate) fn table(
    header: &[&str],
    left: usize,
    rows: impl Iterator<Item = Vec<String>>,
) -> String {
    let right: Vec<bool> = (0..header.len()).map(|i| i >= left).collect();
    aligned_table(header, &right, rows)
}

/// A table as text whose column `i` is aligned right where `right[i]` (figures) and left
/// elsewhere (names, free text).
pub(crate) fn aligned_table(
    header: &[&str],
    right: &[bool],
    rows: impl Iterator<Item = Vec<String>>,
) -> String {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    t.set_header(header);
    for r in rows {
        t.add_row(r);
    }
    for (i, &r) in right.iter().enumerate() {
        if let (true, Some(col)) = (r, t.column_mut(i)) {
            col.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    format!("{t}\n")
}
