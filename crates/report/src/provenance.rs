//! Where an output came from: cosched's version, the command line and a hash of the input,
//! carried by every JSON, CSV and figure the simulator writes, so a file found later can be
//! traced back to what made it.
//!
//! The input hash is the SHA-256 of the trace file's bytes as stored (compressed or not),
//! or, for a model workload, of the model's parameters serialized as TOML (the same
//! parameters give the same hash, whatever flags spelled them).
//!
//! Forms: JSON gets a `provenance` object; CSV leading `# key: value` lines (the workload
//! crate's readers skip them, so a CSV or SWF with them is still a valid input); SVG a
//! `<metadata>` element and a `<desc>`; PNG `tEXt` chunks (see [`png_with_text`]).

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::setup::Source;

/// The provenance of one output.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// `cosched <version>`; `generator` in every form, JSON included.
    #[serde(rename = "generator")]
    pub version: String,
    /// The command line, arguments quoted where the shell would need it.
    pub command: String,
    /// What the input was: a trace's path, or `model lublin`.
    pub input: String,
    /// SHA-256 (hex) of the input: the trace file's bytes, or the model's parameters.
    pub input_sha256: String,
}

impl Provenance {
    /// The provenance of an output of this process made from `source`.
    pub fn of(source: &Source) -> Provenance {
        let (input, input_sha256) = match source {
            Source::Trace { path, digest, .. } => {
                (path.display().to_string(), digest.get(path).to_string())
            }
            Source::Lublin { model } => model_input("lublin", model.as_ref()),
            Source::Feitelson97 { model } => model_input("feitelson97", model.as_ref()),
        };
        Provenance {
            version: version(),
            command: command_line(),
            input,
            input_sha256,
        }
    }

    /// The same, for an input that is not a simulator source (e.g. a real run's records):
    /// `bytes` are hashed.
    pub fn of_bytes(input: &str, bytes: &[u8]) -> Provenance {
        Provenance {
            version: version(),
            command: command_line(),
            input: input.to_string(),
            input_sha256: sha256_hex(bytes),
        }
    }

    /// The key/value pairs, in the order every form writes them.
    pub fn pairs(&self) -> [(&'static str, &str); 4] {
        [
            ("generator", &self.version),
            ("command", &self.command),
            ("input", &self.input),
            ("input_sha256", &self.input_sha256),
        ]
    }

    /// Leading CSV comment lines, `# key: value`, each ending in a newline.
    pub fn csv_comments(&self) -> String {
        self.pairs()
            .iter()
            .map(|(k, v)| format!("# {k}: {}\n", one_line(v)))
            .collect()
    }

    /// The SVG form: a `<metadata>` element holding the pairs as `cosched:` attributes and
    /// a `<desc>` saying the same in words. Goes right after the opening `<svg …>` tag.
    pub fn svg_elements(&self) -> String {
        let attrs: String = self
            .pairs()
            .iter()
            .map(|(k, v)| format!(" {k}=\"{}\"", xml_escape(v)))
            .collect();
        let desc: String = self
            .pairs()
            .iter()
            .map(|(k, v)| format!("{k}: {}\n", xml_escape(v)))
            .collect();
        format!(
            "<metadata><cosched:provenance xmlns:cosched=\"https://cosched.invalid/provenance\"{attrs}/></metadata>\n<desc>{desc}</desc>\n"
        )
    }
}

/// A CSV table written with the `csv` crate: the provenance's comment lines (when given),
/// the header, the records. Fields with commas, quotes or newlines are quoted as RFC 4180
/// says; a reader that skips `#` lines (the `csv` crate's `comment(Some(b'#'))`, pandas'
/// `comment='#'`) reads it back as written.
pub fn csv_table<R, F>(provenance: Option<&Provenance>, header: &[&str], records: R) -> String
where
    R: IntoIterator<Item = Vec<F>>,
    F: AsRef<[u8]>,
{
    let mut w = csv::Writer::from_writer(Vec::new());
    // Writing to a Vec cannot fail.
    let _ = w.write_record(header);
    for r in records {
        let _ = w.write_record(&r);
    }
    let mut out = provenance.map(Provenance::csv_comments).unwrap_or_default();
    out.push_str(&String::from_utf8_lossy(
        &w.into_inner().unwrap_or_default(),
    ));
    out
}

/// A model workload as an input: its name, and the hash of its parameters as TOML (the
/// options serialize; a failure would be a bug in their derive).
fn model_input(name: &str, params: &impl Serialize) -> (String, String) {
    let text = toml::to_string(params).unwrap_or_default();
    (format!("model {name}"), sha256_hex(text.as_bytes()))
}

/// `cosched <version>`.
pub fn version() -> String {
    format!("cosched {}", env!("CARGO_PKG_VERSION"))
}

/// This process's command line, each argument quoted when it holds anything a shell would
/// split or expand.
pub fn command_line() -> String {
    std::env::args()
        .map(|a| shell_quote(&a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `s` quoted for sh when it holds anything a shell would split or expand.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// SHA-256 of a file's bytes; `unreadable: …` when it cannot be read (it was read a moment
/// ago to run at all, so this is rare, and the output is still worth writing).
pub fn file_sha256(path: &Path) -> String {
    match std::fs::read(path) {
        Ok(b) => sha256_hex(&b),
        Err(e) => format!("unreadable: {e}"),
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// Escapes text for an XML attribute or element.
pub fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Inserts an SVG fragment right after the opening `<svg …>` tag (where `<metadata>`,
/// `<desc>` and `<defs>` belong). Unchanged when there is no such tag.
pub fn svg_insert_after_open(svg: &str, fragment: &str) -> String {
    let Some(start) = svg.find("<svg") else {
        return svg.to_string();
    };
    let Some(end) = svg[start..].find('>') else {
        return svg.to_string();
    };
    let at = start + end + 1;
    format!("{}\n{fragment}{}", &svg[..at], &svg[at..])
}

/// A PNG with `tEXt` chunks (keyword, text; Latin-1 text, so other characters become `?`)
/// and optionally a `pHYs` chunk of `dpi`, inserted after the header chunk. The bytes are
/// returned unchanged if they are not a PNG.
pub fn png_with_text(png: &[u8], texts: &[(&str, &str)], dpi: Option<u32>) -> Vec<u8> {
    const SIG: &[u8] = b"\x89PNG\r\n\x1a\n";
    // The signature, then IHDR: length (4), type (4), 13 bytes, CRC (4).
    let ihdr_end = SIG.len() + 4 + 4 + 13 + 4;
    if png.len() < ihdr_end || &png[..SIG.len()] != SIG || &png[12..16] != b"IHDR" {
        return png.to_vec();
    }
    let mut out = png[..ihdr_end].to_vec();
    let mut chunk = |kind: &[u8; 4], data: &[u8]| {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    };
    if let Some(dpi) = dpi {
        // Pixels per metre, both axes, unit 1 (metre).
        let ppm = (f64::from(dpi) / 0.0254).round() as u32;
        let mut d = ppm.to_be_bytes().to_vec();
        d.extend_from_slice(&ppm.to_be_bytes());
        d.push(1);
        chunk(b"pHYs", &d);
    }
    for (key, text) in texts {
        let mut d: Vec<u8> = key.bytes().take(79).collect();
        d.push(0);
        d.extend(text.chars().map(|c| {
            let c = c as u32;
            if (0x20..0x7f).contains(&c) || (0xa0..=0xff).contains(&c) || c == 0x0a {
                c as u8
            } else {
                b'?'
            }
        }));
        chunk(b"tEXt", &d);
    }
    out.extend_from_slice(&png[ihdr_end..]);
    out
}

/// The CRC-32 of PNG chunks (ISO 3309, reflected, polynomial 0xEDB88320).
fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_the_png_specification() {
        // The CRC of an IEND chunk's type, as every PNG ends with it.
        assert_eq!(crc32(b"IEND"), 0xae42_6082);
    }

    /// A job name with a comma and a quote survives a round trip through the csv crate,
    /// the provenance lines skipped as comments.
    #[test]
    fn csv_round_trips_awkward_names() {
        let p = Provenance {
            version: "cosched 9".into(),
            command: "cosched acct --csv-out x.csv".into(),
            input: "mm".into(),
            input_sha256: "00".into(),
        };
        let name = "solve \"big\", then small";
        let text = csv_table(
            Some(&p),
            &["id", "name", "user"],
            vec![vec!["1", name, "alice"], vec!["2", "plain", ""]],
        );
        assert!(text.starts_with("# generator: cosched 9\n"));
        assert!(
            text.contains("1,\"solve \"\"big\"\", then small\",alice\n"),
            "{text}"
        );
        let mut r = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            .from_reader(text.as_bytes());
        assert_eq!(r.headers().unwrap(), vec!["id", "name", "user"]);
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(&rows[0][1], name);
        assert_eq!(&rows[1][2], "");
    }

    #[test]
    fn forms_carry_every_pair() {
        let p = Provenance {
            version: "cosched 9".into(),
            command: "cosched sim --trace 'a b'".into(),
            input: "a <b>".into(),
            input_sha256: sha256_hex(b"abc"),
        };
        assert_eq!(
            p.input_sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let csv = p.csv_comments();
        assert_eq!(csv.lines().count(), 4);
        assert!(csv.starts_with("# generator: cosched 9\n# command: cosched sim"));
        let svg = svg_insert_after_open("<?xml?>\n<svg a=\"1\">\n<rect/></svg>", &p.svg_elements());
        assert!(svg.contains("<svg a=\"1\">\n<metadata>"), "{svg}");
        assert!(svg.contains("input=\"a &lt;b&gt;\""), "{svg}");
        assert!(svg.contains("<desc>generator: cosched 9"), "{svg}");
    }
}
