//! Finds OpenPMIx through pkg-config and compiles the C glue against it. Without it (a fresh
//! machine with only Rust and a C compiler), the crate builds its stand-in: the `cosched_pmix`
//! cfg stays unset and `Server::start` says how to get the real server.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cosched_pmix)");
    println!("cargo::rerun-if-changed=src/sys/glue.c");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
    match pkg_config::Config::new()
        .atleast_version("4.0")
        .probe("pmix")
    {
        Ok(lib) => {
            let mut build = cc::Build::new();
            build
                .file("src/sys/glue.c")
                .warnings(true)
                .extra_warnings(true);
            for dir in &lib.include_paths {
                build.include(dir);
            }
            build.compile("cosched_pmix_glue");
            println!("cargo::rustc-cfg=cosched_pmix");
        }
        Err(e) => {
            println!(
                "cargo::warning=cosched-pmix: OpenPMIx not found ({}); building without the PMIx server (install libpmix-dev and pkg-config, then rebuild)",
                e.to_string()
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
    }
}
