//! The keys a daemon checks frames with, and the one it seals them with: what lets the cluster
//! key change on a running cluster.
//!
//! A rotation gives every daemon a new key while the old one stays accepted until a deadline
//! (the grace period), so that a peer that has not heard of the new key yet (a node manager
//! cut off during the rotation, an administrator's copy of the old key file) still gets
//! through, and is told the new key, until then. The rule ([`Keys::accepted`]): the sealing key
//! is always accepted; any other key only before its deadline, by the wall clock (the
//! deadline is shared by hosts whose clocks agree within the minute the replay window already
//! asks of them). After the deadline the old key is refused like any foreign key.
//!
//! The new key travels down the tree wrapped ([`Key::wrap`]) with the old one: frames are not
//! encrypted, and a key sent in clear would make every eavesdropper an administrator. Whoever
//! holds the old key can unwrap it, which is why a rotation is a planned change of keys and
//! not the answer to a stolen one (docs/deploy.md, *Rotating the cluster key*).

use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::frame::{FrameError, Key};

/// What the pad of a wrapped key is derived under: a new version changes it.
const WRAP_CONTEXT: &[u8] = b"cosched cluster key rotation v1";

/// A key wrapped with another one (see [`Key::wrap`]): a fresh random nonce and the key's
/// bytes XORed with a pad that only the wrapping key's holder can compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wrapped {
    pub nonce: [u8; 16],
    pub bytes: [u8; 32],
}

impl Key {
    /// `new`, hidden from whoever does not hold `self`: XORed with keyed BLAKE3 (`self`) over
    /// the context and a fresh nonce, a one-time pad since no nonce is used twice.
    pub fn wrap(&self, new: &Key) -> Result<Wrapped, FrameError> {
        let nonce: [u8; 16] = Key::generate()?.as_bytes()[..16]
            .try_into()
            .expect("16 of 32 bytes");
        let mut bytes = self.pad(&nonce);
        for (b, k) in bytes.iter_mut().zip(new.as_bytes()) {
            *b ^= k;
        }
        Ok(Wrapped { nonce, bytes })
    }

    /// The key `self` wrapped into `w` (garbage if `self` is not the wrapping key: the frame
    /// that carried `w` was sealed with it, so its tag already proved that).
    pub fn unwrap_key(&self, w: &Wrapped) -> Key {
        let mut bytes = self.pad(&w.nonce);
        for (b, k) in bytes.iter_mut().zip(&w.bytes) {
            *b ^= k;
        }
        Key::from_bytes(bytes)
    }

    fn pad(&self, nonce: &[u8; 16]) -> [u8; 32] {
        let mut mac = blake3::Hasher::new_keyed(self.as_bytes());
        mac.update(WRAP_CONTEXT);
        mac.update(nonce);
        *mac.finalize().as_bytes()
    }
}

/// A daemon's keys at one moment: the one it seals with, and the others it accepts, each
/// until its deadline (µs since the epoch), or for good.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    pub seal: Key,
    pub others: Vec<(Key, Option<i64>)>,
}

impl Keys {
    pub fn new(seal: Key) -> Keys {
        Keys {
            seal,
            others: Vec::new(),
        }
    }

    /// The keys a frame may be sealed with at `now_us`: the sealing key first (the usual
    /// case costs one tag), then the others whose deadline has not passed.
    pub fn accepted(&self, now_us: i64) -> impl Iterator<Item = &Key> {
        self.accepted_until(now_us).map(|(k, _)| k)
    }

    /// [`Keys::accepted`], each with its deadline if it has one (a key accepted only for a
    /// rotation's grace period).
    pub fn accepted_until(&self, now_us: i64) -> impl Iterator<Item = (&Key, Option<i64>)> {
        std::iter::once((&self.seal, None)).chain(
            self.others
                .iter()
                .filter(move |(_, until)| until.is_none_or(|u| now_us < u))
                .map(|(k, u)| (k, *u)),
        )
    }

    /// Accepts `new` too, for good, still sealing with the current key: the machine manager
    /// does so before it sends the new key down, so that the first frames sealed with it by
    /// the node managers that have it are not refused.
    pub fn accept_also(&mut self, new: Key) {
        if new != self.seal && !self.others.iter().any(|(k, _)| *k == new) {
            self.others.push((new, None));
        }
    }

    /// Seals with `new` from now on; the key sealed with so far is accepted until `until_us`
    /// (every older one is forgotten: one rotation at a time has a grace period).
    pub fn rotate(&mut self, new: Key, until_us: i64) {
        let old = std::mem::replace(&mut self.seal, new);
        self.others = vec![(old, Some(until_us))];
    }

    /// The key accepted for the grace period after a rotation, with its deadline, if it has
    /// not passed at `now_us`.
    pub fn previous(&self, now_us: i64) -> Option<(&Key, i64)> {
        self.others
            .iter()
            .find_map(|(k, u)| u.filter(|&u| now_us < u).map(|u| (k, u)))
    }
}

/// [`Keys`] shared by the tasks of one daemon (its listeners, its tree links): a rotation
/// applied to one handle holds for every clone.
#[derive(Clone, Debug)]
pub struct Keyring(Arc<RwLock<Keys>>);

impl From<Key> for Keyring {
    fn from(key: Key) -> Keyring {
        Keyring::new(Keys::new(key))
    }
}

impl Keyring {
    pub fn new(keys: Keys) -> Keyring {
        Keyring(Arc::new(RwLock::new(keys)))
    }

    /// The keys as they are now.
    pub fn keys(&self) -> Keys {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The key frames are sealed with now.
    pub fn current(&self) -> Key {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .seal
            .clone()
    }

    /// Changes the keys (see [`Keys::accept_also`], [`Keys::rotate`]).
    pub fn update(&self, change: impl FnOnce(&mut Keys)) {
        change(&mut self.0.write().unwrap_or_else(|e| e.into_inner()));
    }

    /// [`Key::seal`] with the current key.
    pub fn seal<T: Serialize>(&self, msg: &T) -> Vec<u8> {
        self.current().seal(msg)
    }

    /// [`Key::open`] with the first key accepted now that authenticates `body`; returns the
    /// message and that key (the one to answer this peer with).
    pub fn open_with<'a, T: Deserialize<'a>>(
        &self,
        body: &'a [u8],
    ) -> Result<(T, Key), FrameError> {
        let keys = self.0.read().unwrap_or_else(|e| e.into_inner());
        let mut last = FrameError::BadTag;
        for key in keys.accepted(crate::frame::now_us()) {
            match key.open(body) {
                Ok(msg) => return Ok((msg, key.clone())),
                Err(e @ FrameError::BadTag) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// [`Keyring::open_with`] without the key.
    pub fn open<'a, T: Deserialize<'a>>(&self, body: &'a [u8]) -> Result<T, FrameError> {
        self.open_with(body).map(|(msg, _)| msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(b: u8) -> Key {
        Key::from_bytes([b; 32])
    }

    #[test]
    fn the_old_key_is_accepted_until_the_grace_deadline_and_refused_after() {
        let mut keys = Keys::new(k(1));
        keys.rotate(k(2), 1_000);
        let at = |now| keys.accepted(now).cloned().collect::<Vec<_>>();
        assert_eq!(at(999), vec![k(2), k(1)]);
        assert_eq!(at(1_000), vec![k(2)]);
        assert_eq!(keys.previous(999), Some((&k(1), 1_000)));
        assert_eq!(keys.previous(1_000), None);
        // A second rotation forgets the first one's old key at once.
        keys.rotate(k(3), 2_000);
        assert_eq!(
            keys.accepted(500).cloned().collect::<Vec<_>>(),
            vec![k(3), k(2)]
        );
    }

    #[test]
    fn a_key_accepted_before_the_switch_opens_frames_but_does_not_seal_them() {
        let ring = Keyring::from(k(1));
        ring.update(|keys| keys.accept_also(k(2)));
        let by_new = k(2).seal(&7u32);
        assert_eq!(ring.open::<u32>(&by_new[4..]).unwrap(), 7);
        assert_eq!(ring.seal(&7u32), k(1).seal(&7u32));
        ring.update(|keys| keys.rotate(k(2), i64::MAX));
        assert_eq!(ring.seal(&7u32), by_new);
        let (_, with) = ring.open_with::<u32>(&k(1).seal(&7u32)[4..]).unwrap();
        assert_eq!(with, k(1), "a peer of the old key is answered with it");
        ring.update(|keys| keys.rotate(k(3), 0));
        assert!(matches!(
            ring.open::<u32>(&k(2).seal(&7u32)[4..]),
            Err(FrameError::BadTag)
        ));
    }

    #[test]
    fn a_wrapped_key_is_recovered_only_with_the_wrapping_key() {
        let (old, new) = (Key::generate().unwrap(), Key::generate().unwrap());
        let w = old.wrap(&new).unwrap();
        assert_eq!(old.unwrap_key(&w), new);
        assert_ne!(
            w.bytes,
            *new.as_bytes(),
            "the new key does not travel in clear"
        );
        assert_ne!(k(9).unwrap_key(&w), new);
        assert_ne!(old.wrap(&new).unwrap(), w, "a fresh nonce each time");
    }
}
