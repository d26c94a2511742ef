//! A user's credential file for remote clients, in the spirit of munge: the administrator
//! (who holds the cluster key) writes `user_key(uid)` for Unix user `uid` with `cosched
//! cluster user-key`, and that user's client proves who it is over TCP with it, getting that
//! user's rights and no more. Rotating the cluster key revokes every credential.
//!
//! The file records the uid with the key (`uid U` and `key HEX` lines), so a client cannot
//! pair a key with the wrong uid by mistake; a wrong pairing is refused by the machine
//! manager anyway, since the key only authenticates frames claiming its own uid.

use std::path::Path;

use cosched_storm::Key;

use crate::DaemonError;

/// A user credential: whose it is and the key derived for that uid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserKey {
    pub uid: u32,
    pub key: Key,
}

impl UserKey {
    /// The credential of `uid` on the cluster whose key is `cluster`.
    pub fn derive(cluster: &Key, uid: u32) -> UserKey {
        UserKey {
            uid,
            key: cluster.user_key(uid),
        }
    }

    /// The file's text: `uid U` and `key HEX`, one per line.
    pub fn to_text(&self) -> String {
        format!("uid {}\nkey {}\n", self.uid, self.key.to_hex())
    }

    pub fn from_text(text: &str) -> Result<UserKey, String> {
        let (mut uid, mut key) = (None, None);
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            match line.split_once(char::is_whitespace) {
                Some(("uid", v)) => {
                    uid = Some(v.trim().parse::<u32>().map_err(|_| "uid is not a number")?)
                }
                Some(("key", v)) => {
                    key = Some(Key::from_hex(v).ok_or("the key is not 64 hex digits")?)
                }
                _ => return Err(format!("unexpected line {line:?}")),
            }
        }
        match (uid, key) {
            (Some(uid), Some(key)) => Ok(UserKey { uid, key }),
            _ => Err("expected a `uid U` line and a `key HEX` line".into()),
        }
    }

    pub fn load(path: &Path) -> Result<UserKey, DaemonError> {
        let err =
            |why: String| DaemonError::Config(format!("user key file {}: {why}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        UserKey::from_text(&text).map_err(err)
    }

    /// Written as a new file of mode 0600 (see [`cosched_storm::frame::write_private`]): the
    /// administrator then hands it to the user (and `chown`s it to them).
    pub fn save(&self, path: &Path) -> Result<(), DaemonError> {
        cosched_storm::frame::write_private(path, self.to_text().as_bytes())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_round_trips_and_bad_files_are_refused() {
        let u = UserKey::derive(&Key::from_bytes([3; 32]), 1234);
        assert_eq!(UserKey::from_text(&u.to_text()).unwrap(), u);
        assert!(UserKey::from_text("uid x\nkey 00\n").is_err());
        assert!(UserKey::from_text(&format!("key {}\n", u.key.to_hex())).is_err());
        assert!(UserKey::from_text("uid 5\nkey 1234\n").is_err());
    }
}
