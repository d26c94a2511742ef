//! A user's credential file for remote clients, in the spirit of munge: the administrator
//! (who holds the cluster key) writes `user_key(uid)` for Unix user `uid` with `cosched
//! cluster user-key`, and that user's client proves who it is over TCP with it, getting that
//! user's rights and no more. Rotating the cluster key revokes every credential once the
//! rotation's grace period is over (until then those of the old key are accepted); one user's
//! alone is revoked by a new serial: the machine manager holds each user's current serial
//! (and when it expires, if it does: [`Credential`]) and derives the key from it, so a file
//! of an older serial no longer authenticates.
//!
//! The file records the uid with the key (`uid U` and `key HEX` lines), so a client cannot
//! pair a key with the wrong uid by mistake; a wrong pairing is refused by the machine
//! manager anyway, since the key only authenticates frames claiming its own uid.

use std::path::Path;

use cosched_storm::Key;

use crate::DaemonError;

/// A user credential: whose it is, its serial and the key derived for that uid and serial.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserKey {
    pub uid: u32,
    pub serial: u32,
    pub key: Key,
}

/// What the machine manager holds of a user's credential: the serial it accepts, and until
/// when (µs since the epoch), if the administrator said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Credential {
    pub serial: u32,
    pub expires_us: Option<i64>,
}

impl Credential {
    /// Why a credential of this user is refused at `now_us`, if it is.
    pub fn expired(&self, now_us: i64) -> Option<String> {
        let at = self.expires_us.filter(|&e| now_us >= e)?;
        Some(format!(
            "your user credential expired at {}; ask the cluster's administrator for a new one (`cosched cluster user-key`)",
            crate::util::utc_us(at)
        ))
    }
}

impl UserKey {
    /// The `serial`-th credential of `uid` on the cluster whose key is `cluster`.
    pub fn derive(cluster: &Key, uid: u32, serial: u32) -> UserKey {
        UserKey {
            uid,
            serial,
            key: cluster.user_key_serial(uid, serial),
        }
    }

    /// The file's text: `uid U`, `serial N` and `key HEX`, one per line.
    pub fn to_text(&self) -> String {
        format!(
            "uid {}\nserial {}\nkey {}\n",
            self.uid,
            self.serial,
            self.key.to_hex()
        )
    }

    pub fn from_text(text: &str) -> Result<UserKey, String> {
        let (mut uid, mut key, mut serial) = (None, None, 0);
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            match line.split_once(char::is_whitespace) {
                Some(("uid", v)) => {
                    uid = Some(v.trim().parse::<u32>().map_err(|_| "uid is not a number")?)
                }
                Some(("serial", v)) => {
                    serial = v
                        .trim()
                        .parse::<u32>()
                        .map_err(|_| "serial is not a number")?
                }
                Some(("key", v)) => {
                    key = Some(Key::from_hex(v).ok_or("the key is not 64 hex digits")?)
                }
                _ => return Err(format!("unexpected line {line:?}")),
            }
        }
        match (uid, key) {
            (Some(uid), Some(key)) => Ok(UserKey { uid, serial, key }),
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
        let u = UserKey::derive(&Key::from_bytes([3; 32]), 1234, 2);
        assert_eq!(UserKey::from_text(&u.to_text()).unwrap(), u);
        // A file from before serials is serial 0.
        let old = UserKey::derive(&Key::from_bytes([3; 32]), 1234, 0);
        let text = format!("uid 1234\nkey {}\n", old.key.to_hex());
        assert_eq!(UserKey::from_text(&text).unwrap(), old);
        assert!(UserKey::from_text("uid x\nkey 00\n").is_err());
        assert!(UserKey::from_text(&format!("key {}\n", u.key.to_hex())).is_err());
        assert!(UserKey::from_text("uid 5\nkey 1234\n").is_err());
    }
}
