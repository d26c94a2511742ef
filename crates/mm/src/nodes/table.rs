//! The nodes a machine manager starts with: its database's rows reconciled with the
//! configuration.

use std::collections::BTreeSet;

use cosched_core::NodeId;

use crate::db::NodeRow;

/// The nodes a machine manager starts with, from its database and its configuration.
///
/// Nodes keep their ids whatever order they register in: a node's id is its row's, and a
/// configured node the database does not know takes the next free id. A row no longer
/// configured (or beyond `--nodes`) stays, *removed*: its id is never given again, since old
/// jobs' records name it, and it may not register. A row whose PEs differ from the
/// configuration's takes the configuration's. So the state directory follows the machine as
/// it grows and shrinks, with its accounting.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeTable {
    /// Every node, by id (dense from 0).
    pub rows: Vec<NodeRow>,
    /// Rows to write: new or changed.
    pub changed: Vec<NodeRow>,
    /// Rows no longer part of the machine.
    pub removed: BTreeSet<NodeId>,
    /// The nodes of the machine: the rows, or with `--nodes`, as many as it says if more.
    pub size: u32,
    /// How many of the rows (the first) the database held.
    pub known: usize,
}

impl NodeTable {
    /// The table for `names` (the configuration's nodes; empty: the first `nodes` to
    /// register, by name, as `--nodes` says) of `pes` PEs each, given the database's `rows`.
    pub fn new(
        nodes: u32,
        pes: u32,
        names: &[String],
        rows: Vec<NodeRow>,
    ) -> Result<NodeTable, String> {
        let mut t = NodeTable::default();
        for (i, mut row) in rows.into_iter().enumerate() {
            if row.id.0 as usize != i {
                return Err(format!(
                    "the database's nodes are not numbered 0, 1, 2, …: node {} has id {} at position {i}; restore the state directory from a backup",
                    row.name, row.id
                ));
            }
            let kept = if names.is_empty() {
                row.id.0 < nodes
            } else {
                names.contains(&row.name)
            };
            if !kept {
                t.removed.insert(row.id);
            } else if row.pes != pes {
                row.pes = pes;
                t.changed.push(row.clone());
            }
            t.rows.push(row);
        }
        t.known = t.rows.len();
        for name in names {
            if !t.rows.iter().any(|r| &r.name == name) {
                let row = NodeRow {
                    id: NodeId(t.rows.len() as u32),
                    name: name.clone(),
                    pes,
                };
                t.changed.push(row.clone());
                t.rows.push(row);
            }
        }
        t.size = if names.is_empty() {
            (t.rows.len() as u32).max(nodes)
        } else {
            t.rows.len() as u32
        };
        Ok(t)
    }
}
