//! Memory sizes as Slurm's `--mem` and `--mem-per-cpu` take them: a whole number with an
//! optional unit `K`, `M`, `G` or `T` (powers of 1024), megabytes without one.

/// Bytes of a Slurm memory size (`4096`, `4G`, `512M`, `100K`). `0` is Slurm's "all the
/// memory of the node": `Ok(0)`, which a caller takes as no limit of its own.
pub fn parse_mem(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, shift) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 10),
        Some((i, 'm' | 'M')) => (&t[..i], 20),
        Some((i, 'g' | 'G')) => (&t[..i], 30),
        Some((i, 't' | 'T')) => (&t[..i], 40),
        _ => (t, 20),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| {
            format!(
                "{text:?} is not a memory size (a whole number of megabytes, or with K, M, G or T: 4096, 4G)"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurms_memory_forms_are_bytes_with_megabytes_by_default() {
        assert_eq!(parse_mem("4096"), Ok(4096 << 20));
        assert_eq!(parse_mem("4G"), Ok(4 << 30));
        assert_eq!(parse_mem("512m"), Ok(512 << 20));
        assert_eq!(parse_mem("100K"), Ok(100 << 10));
        assert_eq!(parse_mem("1T"), Ok(1 << 40));
        assert_eq!(parse_mem("0"), Ok(0));
        for bad in ["", "G", "1.5G", "-1", "4GB", "lots"] {
            assert!(parse_mem(bad).is_err(), "{bad}");
        }
    }
}
