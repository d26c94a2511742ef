use super::*;

#[test]
fn errors_name_the_field() {
    let text = "[machine]\nnodes = 0\n[[jobs]]\nprocs = 1\nwork = \"1s\"\ngranularity = 0.5\n";
    let e = Scenario::parse(text, "x.toml").unwrap_err().to_string();
    assert!(e.contains("machine"), "{e}");
    let e = Scenario::parse("[machine]\nnodez = 1\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("x.toml:2:") || e.contains("x.toml:2 "), "{e}");
    let e = Scenario::parse(
        "[[jobs]]\nprocs = 99\nwork = \"1s\"\ngranularity = 0.5\n",
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("jobs[0].procs"), "{e}");
}

/// `[schemes.fcs]` goes through the node manager's builder: Table 4.1 for the time slice
/// with the overrides, and a bad key is refused with the file and table named.
#[test]
fn fcs_overrides_are_built_as_the_node_managers_are() {
    let jobs = "[[jobs]]\nprocs = 1\nwork = \"1s\"\ngranularity = 0.5\n";
    let text = format!(
        "[schemes]\ntimeslice = \"100ms\"\n[schemes.fcs]\nf_thresh = \"2ms\"\nmax_wdc_wcs = 3\n{jobs}"
    );
    let sc = Scenario::parse(&text, "f.toml").unwrap();
    let want = cosched_node::FcsParams::from_opts(
        Dur::from_millis(100),
        &["f_thresh=2ms".into(), "max_wdc_wcs=3".into()],
        "--fcs-opt",
    )
    .unwrap();
    assert_eq!(sc.fcs_params(), want);
    let text = format!("[schemes.fcs]\nbogus = 1\n{jobs}");
    let e = Scenario::parse(&text, "f.toml").unwrap_err().to_string();
    assert!(
        e.starts_with("f.toml: [schemes.fcs] bogus: unknown FCS parameter"),
        "{e}"
    );
}

#[test]
fn grid_is_a_cartesian_product() {
    let text = "[mix]\nworkload = \"WL1\"\njobs = 1\nprocs = 2\npattern = \"nn\"\nv = 0.5\niterations = 1\n\
                    [machine]\nnodes = 2\n[grid]\nworkload = [\"WL1\", \"WL2\"]\npattern = [\"nn\", \"aa\"]\n";
    let sc = Scenario::parse(text, "g").unwrap();
    let pts = sc.grid_points();
    assert_eq!(pts.len(), 4);
    let applied = sc.with_params(&pts[3]).unwrap();
    assert_eq!(applied.mix.unwrap().workload, "WL2");
}
