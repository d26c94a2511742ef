//! Serde for byte buffers (`#[serde(with = "cosched_storm::bytes")]` on a `Vec<u8>` field, or
//! on a `&[u8]` field that borrows from the input) as one run of bytes instead of a sequence
//! of `u8`s.
//!
//! serde's own `Vec<u8>` goes through a sequence, one visitor call per byte: profiled during a
//! file broadcast, decoding the chunks that way took more CPU than the SHA-256 of
//! every hop together. Postcard writes a byte string exactly like a sequence of `u8` (a varint
//! length, then the bytes), so the encoding on the wire is unchanged; only the copy is one
//! `memcpy`; and a borrowing reader (a node decoding a frame it keeps, to forward it and hand
//! its payload on) makes none.

use serde::Deserialize;
use serde::de::{Deserializer, Error, SeqAccess, Visitor};
use serde::ser::Serializer;

pub fn serialize<S: Serializer, B: AsRef<[u8]> + ?Sized>(
    bytes: &B,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(bytes.as_ref())
}

pub fn deserialize<'de, D: Deserializer<'de>, B: FromBytes<'de>>(d: D) -> Result<B, D::Error> {
    B::from_bytes(d)
}

/// A byte buffer that can be decoded from a byte string: an owned `Vec<u8>`, or a `&[u8]`
/// borrowed from the input (which fails on a reader that cannot lend its bytes).
pub trait FromBytes<'de>: Sized {
    fn from_bytes<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
}

impl<'de> FromBytes<'de> for Vec<u8> {
    fn from_bytes<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_byte_buf(Bytes)
    }
}

impl<'de: 'a, 'a> FromBytes<'de> for &'a [u8] {
    fn from_bytes<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a [u8]>::deserialize(d)
    }
}

struct Bytes;

impl<'de> Visitor<'de> for Bytes {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a byte string")
    }
    fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }
    fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }
    /// Self-describing formats (JSON) that write bytes as a list of numbers.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
        while let Some(b) = seq.next_element()? {
            v.push(b);
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Plain(u32, Vec<u8>);
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Fast(u32, #[serde(with = "super")] Vec<u8>);
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Lent<'a>(u32, #[serde(with = "super", borrow)] &'a [u8]);

    /// The encoding is the one serde's `Vec<u8>` gives, so either end may use either.
    #[test]
    fn same_bytes_on_the_wire_as_a_sequence() {
        let data: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
        let plain = postcard::to_stdvec(&Plain(7, data.clone())).unwrap();
        let fast = postcard::to_stdvec(&Fast(7, data.clone())).unwrap();
        assert_eq!(plain, fast);
        assert_eq!(
            postcard::from_bytes::<Fast>(&plain).unwrap(),
            Fast(7, data.clone())
        );
        // A borrowing reader gets the bytes in place, and writes them the same way.
        let lent = postcard::from_bytes::<Lent>(&plain).unwrap();
        assert_eq!(lent.1, &data[..]);
        assert!(plain.as_ptr_range().contains(&lent.1.as_ptr()));
        assert_eq!(postcard::to_stdvec(&lent).unwrap(), plain);
    }
}
