//! Writes every target's seed inputs into `fuzz/corpus/TARGET/` (the corpus directories
//! `cargo fuzz run` starts from): `cargo run -p cosched-fuzz --example write_corpus`.

use std::path::Path;

fn main() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for &target in cosched_fuzz::TARGETS {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        for (i, seed) in cosched_fuzz::seeds::for_target(target).iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}")), seed)?;
        }
        println!("{}: seeds written", dir.display());
    }
    Ok(())
}
