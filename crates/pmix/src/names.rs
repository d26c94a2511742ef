//! The name service of one PMIx server (`MPI_Publish_name`, `MPI_Lookup_name`,
//! `MPI_Unpublish_name`): names its ranks published, found by key, removed by their owner.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use crate::{Proc, Published};

#[derive(Debug, Default)]
pub struct Names(BTreeMap<String, Published>);

impl Names {
    /// `owner` publishes `names` (key, value); a key published again takes the new value.
    pub fn publish(&mut self, owner: &Proc, names: Vec<(String, String)>) {
        for (key, value) in names {
            let owner = owner.clone();
            self.0.insert(key.clone(), Published { owner, key, value });
        }
    }

    /// The published names among `keys`.
    pub fn find(&self, keys: &[String]) -> Vec<Published> {
        keys.iter().filter_map(|k| self.0.get(k).cloned()).collect()
    }

    /// Removes `owner`'s names among `keys` (no keys: all of its names).
    pub fn unpublish(&mut self, owner: &Proc, keys: &[String]) {
        self.0
            .retain(|k, p| p.owner != *owner || !(keys.is_empty() || keys.contains(k)));
    }
}
