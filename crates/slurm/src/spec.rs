//! The format strings `squeue` and `sinfo` share: `-o` fields `%[.][size]type[suffix]`
//! (text before the first `%` printed as it is) and `-O` fields `type[:[.][size][suffix]]`,
//! comma-separated (20 wide without a size); and how a value fills a field.

/// One field of a format: what it names (a letter or a name), its width (0: as wide as the
/// value), whether it is right-justified (`.`), and the text printed after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec<K> {
    pub key: K,
    pub width: usize,
    pub right: bool,
    pub suffix: String,
}

impl<K> Spec<K> {
    /// The same field, naming what `key` names.
    pub fn with_key<L>(self, key: L) -> Spec<L> {
        Spec {
            key,
            width: self.width,
            right: self.right,
            suffix: self.suffix,
        }
    }
}

/// `[.][size]rest`: justification, width and what follows.
fn sized(s: &str) -> (bool, usize, &str) {
    let (right, s) = match s.strip_prefix('.') {
        Some(s) => (true, s),
        None => (false, s),
    };
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    (right, s[..digits].parse().unwrap_or(0), &s[digits..])
}

/// A `-o` format: the text before the first `%`, and each `%` field by its letter. A `%`
/// with no letter after its size is an error naming it.
pub fn percent(fmt: &str) -> Result<(String, Vec<Spec<char>>), String> {
    let (prefix, rest) = match fmt.find('%') {
        Some(p) => (&fmt[..p], &fmt[p..]),
        None => (fmt, ""),
    };
    let mut specs = Vec::new();
    for token in rest.split('%').filter(|t| !t.is_empty()) {
        let (right, width, rest) = sized(token);
        let mut chars = rest.chars();
        let key = chars.next().ok_or_else(|| format!("%{token}"))?;
        specs.push(Spec {
            key,
            width,
            right,
            suffix: chars.as_str().to_string(),
        });
    }
    Ok((prefix.to_string(), specs))
}

/// A `-O` format: each `name[:[.][size][suffix]]`.
pub fn named(fmt: &str) -> Vec<Spec<String>> {
    fmt.split(',')
        .filter(|t| !t.trim().is_empty())
        .map(|token| match token.split_once(':') {
            None => Spec {
                key: token.trim().to_string(),
                width: 20,
                right: false,
                suffix: String::new(),
            },
            Some((name, spec)) => {
                let (right, width, suffix) = sized(spec);
                Spec {
                    key: name.trim().to_string(),
                    width,
                    right,
                    suffix: suffix.to_string(),
                }
            }
        })
        .collect()
}

/// A value in a field of `width` (0: its own width), as Slurm's printf forms do:
/// left-justified values are always cut to the width, right-justified ones only when `cut`.
pub fn fit(text: &str, width: usize, right: bool, cut: bool) -> String {
    if width == 0 {
        return text.to_string();
    }
    let len = text.chars().count();
    let shown: String = if len > width && (cut || !right) {
        text.chars().take(width).collect()
    } else {
        text.to_string()
    };
    let pad = " ".repeat(width.saturating_sub(shown.chars().count()));
    if right {
        format!("{pad}{shown}")
    } else {
        format!("{shown}{pad}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_of_a_format() {
        let (prefix, s) = percent("id:%.18i %-5j%t|").unwrap();
        assert_eq!(prefix, "id:");
        assert_eq!(
            s.iter()
                .map(|s| (s.key, s.width, s.right))
                .collect::<Vec<_>>(),
            [('i', 18, true), ('-', 0, false), ('t', 0, false)]
        );
        assert_eq!(s[0].suffix, " ");
        assert_eq!(s[2].suffix, "|");
        assert!(percent("%.5").is_err());
        let n = named("jobid:.18 ,name,state:8");
        assert_eq!(
            n.iter()
                .map(|s| (s.key.as_str(), s.width, s.right, s.suffix.as_str()))
                .collect::<Vec<_>>(),
            [
                ("jobid", 18, true, " "),
                ("name", 20, false, ""),
                ("state", 8, false, "")
            ]
        );
        assert_eq!(fit("abcdef", 3, false, false), "abc");
        assert_eq!(fit("abcdef", 3, true, false), "abcdef");
        assert_eq!(fit("abcdef", 3, true, true), "abc");
        assert_eq!(fit("ab", 4, true, true), "  ab");
        assert_eq!(fit("ab", 0, true, true), "ab");
    }
}
