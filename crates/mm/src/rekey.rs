//! Rotating the cluster key on a live cluster (`cosched cluster rotate-key`), no job
//! disturbed: the machine manager makes a new key, writes it to its key file (the old one,
//! with the end of the grace period, beside it as `KEYFILE.previous`), accepts it, sends it
//! down the tree wrapped with the old key ([`ToNode::RotateKey`]), and waits by COMPARE
//! until every node manager has taken it (each sets [`VAR_KEY_ROTATION`]). Only then does it
//! seal with the new key: a frame is sealed with a key both ends know. The old key stays
//! accepted until the grace period ends (node managers that missed the rotation get the
//! new key when they register again: [`RegisterReply::NewKey`]; administrators' clients
//! with a copy of the old file get through), then it is refused (see
//! [`cosched_storm::keyring`]).

use std::path::{Path, PathBuf};

use cosched_storm::{Cmp, Cond, Dest, Key, Keys, Outcome};
use tokio::sync::oneshot;

use super::shell::Shell;
use cosched_proto::proto::*;

/// How long a node manager has to take the new key before the machine manager seals with it
/// anyway (the ones that did not are named, and get it when they register again).
const CONFIRM_WITHIN: std::time::Duration = std::time::Duration::from_secs(4);

/// A rotation the machine manager waits on: the nodes' confirmation of `rotation`.
pub(super) struct Rotation {
    key: Key,
    until_us: i64,
    rotation: i64,
    query: u64,
    file: PathBuf,
    reply: oneshot::Sender<Response>,
}

/// Where the key accepted during a rotation's grace period is kept: beside the key file.
pub fn previous_file(key_file: &Path) -> PathBuf {
    let mut p = key_file.as_os_str().to_owned();
    p.push(".previous");
    PathBuf::from(p)
}

/// The keys a machine manager starts with: `key`, and the previous one if `key_file`'s
/// `.previous` names one whose grace period has not ended at `now_us` (one that has is
/// removed).
pub fn load_keys(key: Key, key_file: Option<&Path>, now_us: i64) -> Keys {
    let mut keys = Keys::new(key);
    let Some(path) = key_file.map(previous_file) else {
        return keys;
    };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return keys;
    };
    match parse_previous(&text) {
        Some((old, until)) if now_us < until => keys.others = vec![(old, Some(until))],
        Some(_) => {
            let _ = std::fs::remove_file(&path);
        }
        None => tracing::warn!(
            "mm: {} is not `key HEX` and `until MICROSECONDS`: ignored",
            path.display()
        ),
    }
    keys
}

fn parse_previous(text: &str) -> Option<(Key, i64)> {
    let (mut key, mut until) = (None, None);
    for line in text.lines() {
        match line.trim().split_once(' ') {
            Some(("key", v)) => key = Key::from_hex(v),
            Some(("until", v)) => until = v.trim().parse().ok(),
            _ => {}
        }
    }
    Some((key?, until?))
}

impl Shell {
    /// `cosched cluster rotate-key`: starts a rotation whose old key is accepted `grace_us`
    /// more; the answer goes to `reply` once the machine manager seals with the new key.
    pub(super) fn rotate_key_request(
        &mut self,
        caller: Caller,
        grace_us: i64,
        reply: oneshot::Sender<Response>,
    ) {
        let refuse = |why: String| Response::Error(format!("the cluster key is unchanged: {why}"));
        let answer = if !caller.admin {
            refuse(format!(
                "permission denied: only root or the cluster's own user ({}) rotates the cluster key",
                cosched_proto::util::user_name(cosched_proto::util::euid())
            ))
        } else if self.rotation.is_some() {
            refuse("a rotation is under way; wait for its answer".into())
        } else if grace_us <= 0 {
            refuse("the grace period must be longer than zero".into())
        } else {
            match self.start_rotation(grace_us) {
                Ok(r) => {
                    self.rotation = Some(Rotation { reply, ..r });
                    return;
                }
                Err(why) => refuse(why),
            }
        };
        let _ = reply.send(answer);
    }

    fn start_rotation(&mut self, grace_us: i64) -> Result<Rotation, String> {
        let file = self.key_file.clone().ok_or(
            "this machine manager was started without a key file to write a new key to (--key-file or the configuration's `key`)",
        )?;
        let old = self.keys.current();
        let new = Key::generate().map_err(|e| e.to_string())?;
        let now_us = cosched_proto::util::now().as_micros();
        let until_us = now_us.saturating_add(grace_us);
        // Both files first: a machine manager restarted from here on seals with the new key
        // and accepts the old one for the rest of the grace period.
        let previous = previous_file(&file);
        cosched_storm::frame::write_private(
            &previous,
            format!("key {}\nuntil {until_us}\n", old.to_hex()).as_bytes(),
        )
        .map_err(|e| e.to_string())?;
        new.save(&file)
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        let wrapped = old.wrap(&new).map_err(|e| e.to_string())?;
        self.keys.update(|k| k.accept_also(new.clone()));
        let rotation = now_us;
        let msg = ToNode::RotateKey {
            key: wrapped,
            until_us,
            rotation,
        };
        let payload = msg.payload(super::shell::stamp(&self.root));
        self.root.xfer(&Dest::All, None, payload);
        let cond = Cond {
            var: VAR_KEY_ROTATION,
            cmp: Cmp::Ge,
            value: rotation,
        };
        let query =
            self.root
                .compare_waiting(&Dest::All, cond, None, CONFIRM_WITHIN, CONFIRM_WITHIN / 2);
        tracing::info!(
            "mm: rotating the cluster key: the new one is in {}, the old one accepted until {}",
            file.display(),
            cosched_proto::util::utc_us(until_us)
        );
        let (reply, _) = oneshot::channel();
        Ok(Rotation {
            key: new,
            until_us,
            rotation,
            query,
            file,
            reply,
        })
    }

    /// Takes the answer to a rotation's COMPARE, if `o` is it: from now on frames are sealed
    /// with the new key. A node that did not confirm (the answer names it) refuses them and
    /// registers again, with the old key, which gets it the new one during the grace period.
    pub(super) fn rekey_answer(&mut self, o: &Outcome) -> bool {
        if self.rotation.as_ref().is_none_or(|r| r.query != o.id()) {
            return false;
        }
        let r = self.rotation.take().expect("checked above");
        let (new, until_us) = (r.key.clone(), r.until_us);
        self.keys.update(|k| k.rotate(new, until_us));
        let mut missing: Vec<_> = o.answer.fails.clone();
        missing.extend(&o.answer.silent);
        let names = self.core.tree_nodes();
        let missing = missing
            .iter()
            .map(|n| {
                names
                    .iter()
                    .find(|(id, _)| id == n)
                    .map_or("?", |(_, name)| name)
            })
            .collect::<Vec<_>>()
            .join(", ");
        tracing::info!(
            "mm: the cluster key was rotated ({}): sealing with the new one{}",
            r.rotation,
            if missing.is_empty() {
                String::new()
            } else {
                format!("; not confirmed by {missing}, which get it when they register again")
            }
        );
        let _ = r.reply.send(Response::KeyRotated(format!(
            "the cluster key was rotated: the new key is in {} (the node managers wrote it to their key files; copy it to every other host whose commands use the key); the old key is accepted until {}{}; user credentials made from the old key stop working then: issue new ones (`cosched cluster user-key`)",
            r.file.display(),
            cosched_proto::util::utc_us(until_us),
            if missing.is_empty() {
                String::new()
            } else {
                format!(
                    " (nodes {missing} did not confirm: they get the new key when they register again before then, else copy it to them)"
                )
            },
        )));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_previous_key_is_kept_for_its_grace_period_and_dropped_after() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        let (old, new) = (Key::from_bytes([1; 32]), Key::from_bytes([2; 32]));
        std::fs::write(
            previous_file(&file),
            format!("key {}\nuntil 1000\n", old.to_hex()),
        )
        .unwrap();
        let keys = load_keys(new.clone(), Some(&file), 999);
        assert_eq!(keys.seal, new);
        assert_eq!(keys.previous(999), Some((&old, 1000)));
        assert!(previous_file(&file).exists());
        let keys = load_keys(new.clone(), Some(&file), 1000);
        assert_eq!(keys, Keys::new(new));
        assert!(
            !previous_file(&file).exists(),
            "an ended grace period is forgotten"
        );
    }
}
