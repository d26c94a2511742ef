//! Plain tables of figures as text (comfy-table, no borders): a header line and one line per
//! row, names aligned left and figures right. Every command's table of figures is printed
//! through here, the simulator's reports and the CLI's alike.

/// A table as text: a header line and one line per row, columns padded, the first `left`
/// columns aligned left and the others (figures) right.
pub fn table(header: &[&str], left: usize, rows: impl Iterator<Item = Vec<String>>) -> String {
    let right: Vec<bool> = (0..header.len()).map(|i| i >= left).collect();
    aligned_table(header, &right, rows)
}

/// A table as text whose column `i` is aligned right where `right[i]` (figures) and left
/// elsewhere (names, free text).
pub fn aligned_table(
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
