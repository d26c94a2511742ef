use super::*;

fn launch(nodes: u32, fanout: u32, mb: f64, send: f64, exec: f64) -> Measurement {
    Measurement {
        bench: "launch".into(),
        nodes,
        fanout,
        depth: depth(nodes, fanout),
        mb,
        chunk_kib: 512,
        slots: 4,
        load: "idle".into(),
        send_ms: Some(send),
        execute_ms: Some(exec),
        total_ms: Some(send + exec),
        compare_ms: None,
        runs: 3,
    }
}

fn assume() -> Assumptions {
    Assumptions {
        cores: 2.0,
        link_mb_s: 1250.0,
        forward_share: 0.5,
    }
}

/// Synthetic points from known parameters (on the same settings as a real run, plus a
/// second fan-out): the fit gives them back, and predicts the points exactly.
#[test]
fn fit_recovers_known_parameters() {
    let (a, b, c, d) = (12.0, 15.0, 6.0, 40.0);
    let (e, f, g) = (8.0, 4.5, 20.0);
    let (h, j, i) = (0.3, 0.02, 0.25);
    let mut rows = Vec::new();
    for fanout in [2, 8] {
        for n in [1, 4, 16, 64] {
            let dd = depth(n, fanout) as f64;
            for mb in [4.0, 8.0, 12.0] {
                let send = a + mb * (b + c * n as f64) + d * dd;
                rows.push(launch(n, fanout, mb, send, e + f * n as f64 + g * dd));
            }
            let mut cmp = launch(n, fanout, 0.0, 0.0, 0.0);
            cmp.bench = "compare".into();
            (cmp.send_ms, cmp.execute_ms, cmp.total_ms) = (None, None, None);
            cmp.compare_ms = Some(h + j * n as f64 + i * dd);
            rows.push(cmp);
        }
    }
    // Rows under load are not fitted: a wild one changes nothing.
    let mut loaded = launch(64, 8, 12.0, 1e6, 1e6);
    loaded.load = "cpu".into();
    rows.push(loaded);
    let m = LaunchModel::fit(&rows, assume()).unwrap();
    let close = |got: &[f64], want: &[f64]| {
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() < 1e-6 * w.abs().max(1.0),
                "{got:?} != {want:?}"
            );
        }
    };
    close(&m.send.params, &[a, b, c, d]);
    close(&m.execute.params, &[e, f, g]);
    close(&m.compare.as_ref().unwrap().params, &[h, j, i]);
    assert!(m.send.max_rel_err < 1e-9 && m.total_max_rel_err < 1e-9);
    // Depths as the tree computes them.
    assert_eq!(depth(64, 2), 6);
    assert_eq!(depth(64, 8), 2);
}

/// Noisy points (±10 %, alternating): the stated error bounds every measured point's
/// prediction, and is about the noise put in.
#[test]
fn prediction_at_measured_points_within_stated_error() {
    let mut rows = Vec::new();
    let mut sign = 1.0;
    for n in [1, 4, 16, 64] {
        for mb in [4.0, 8.0, 12.0] {
            let dd = depth(n, 8) as f64;
            let send = (10.0 + mb * (20.0 + 5.0 * n as f64) + 30.0 * dd) * (1.0 + 0.1 * sign);
            let exec = (10.0 + 4.0 * n as f64 + 10.0 * dd) * (1.0 - 0.1 * sign);
            sign = -sign;
            rows.push(launch(n, 8, mb, send, exec));
        }
    }
    let m = LaunchModel::fit(&rows, assume()).unwrap();
    assert!(
        m.send.rms_rel_err > 0.02 && m.send.rms_rel_err < 0.15,
        "{:?}",
        m.send
    );
    for r in &rows {
        let p = m.on_this_host(r.nodes, r.fanout, r.mb);
        let err = |pred: f64, obs: Option<f64>| (pred / obs.unwrap() - 1.0).abs();
        assert!(err(p.send_ms, r.send_ms) <= m.send.max_rel_err + 1e-12);
        assert!(err(p.execute_ms, r.execute_ms) <= m.execute.max_rel_err + 1e-12);
        assert!(err(p.total_ms(), r.total_ms) <= m.total_max_rel_err + 1e-12);
    }
}

/// One node manager per host: the per-node cost does not grow with the node count, so
/// 16,384 nodes cost little more than 64; on one host they cost 256 times the per-node
/// part.
#[test]
fn one_per_host_scales_with_depth_only() {
    let mut rows = Vec::new();
    for n in [1, 4, 16, 64] {
        for mb in [4.0, 12.0] {
            let dd = depth(n, 8) as f64;
            rows.push(launch(
                n,
                8,
                mb,
                5.0 + mb * (10.0 + 2.0 * n as f64) + 20.0 * dd,
                5.0 + n as f64 + 5.0 * dd,
            ));
        }
    }
    let m = LaunchModel::fit(&rows, assume()).unwrap();
    let big = m.one_per_host(16_384, 8, 12.0);
    let small = m.one_per_host(64, 8, 12.0);
    // Depth 5 against 2: three more levels of d = 20 ms and g = 5 ms.
    assert!((big.total_ms() - small.total_ms() - 3.0 * 25.0).abs() < 1e-6);
    // Stage: a copy (2 ms/MB × 2 cores) plus 7 forwards at half that = 18 ms/MB.
    assert!((small.send_ms - (5.0 + 12.0 * (10.0 + 18.0) + 40.0)).abs() < 1e-6);
    assert!(m.on_this_host(16_384, 8, 12.0).send_ms > 100.0 * big.send_ms);
}

/// With no per-level cost measured, one node manager per host still pays one chunk through
/// the busiest stage per extra level.
#[test]
fn one_per_host_pays_the_pipeline_fill() {
    let rows: Vec<_> = [1u32, 4, 16, 64]
        .iter()
        .flat_map(|&n| {
            [4.0, 12.0]
                .map(|mb| launch(n, 8, mb, 5.0 + mb * (10.0 + 2.0 * n as f64), 5.0 + n as f64))
        })
        .collect();
    let m = LaunchModel::fit(&rows, assume()).unwrap();
    // 512 KiB chunks through a stage of 18 ms/MB, three more levels (depth 5 against 2).
    let fill = 0.524_288 * 18.0;
    let extra = m.one_per_host(16_384, 8, 12.0).send_ms - m.one_per_host(64, 8, 12.0).send_ms;
    assert!((extra - 3.0 * fill).abs() < 1e-6, "{extra}");
}

/// A per-level cost that the noise makes negative is held at 0, and the fit of the rest
/// stays close to the truth.
#[test]
fn no_parameter_is_negative() {
    // Truth: e = 10, f = 5, g = 0; one fan-out, so depth moves with the node count.
    let x: Vec<Vec<f64>> = [1u32, 4, 16, 64]
        .iter()
        .map(|&n| node_row(n as f64, depth(n, 8) as f64))
        .collect();
    let y: Vec<f64> = x
        .iter()
        .zip([1.05, 0.95, 0.92, 1.02])
        .map(|(r, noise)| (10.0 + 5.0 * r[1]) * noise)
        .collect();
    let free = relative_lstsq(&x, &y).unwrap();
    assert!(
        free[2] < 0.0,
        "the noise was meant to push g below 0: {free:?}"
    );
    let p = nonnegative_lstsq(&x, &y).unwrap();
    assert_eq!(p[2], 0.0);
    assert!(p.iter().all(|&v| v >= 0.0));
    assert!(
        (p[1] - 5.0).abs() < 0.5 && (p[0] - 10.0).abs() < 3.0,
        "{p:?}"
    );
}

#[test]
fn csv_round_trips_and_accumulates() {
    let dir = std::env::temp_dir().join(format!("launch-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("b.csv");
    let _ = std::fs::remove_file(&path);
    let a = launch(4, 8, 12.0, 300.0, 20.0);
    let mut b = a.clone();
    b.bench = "bcast".into();
    b.execute_ms = None;
    append_csv(&path, std::slice::from_ref(&a)).unwrap();
    append_csv(&path, std::slice::from_ref(&b)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.matches(CSV_HEADER).count(), 1, "{text}");
    assert_eq!(read_csv(&path).unwrap(), vec![a, b]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn csv_errors_name_the_file_and_line() {
    let dir = std::env::temp_dir().join(format!("launch-model-err-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let no_header = dir.join("no-header.csv");
    std::fs::write(&no_header, "# measured today\n1,2,3\n").unwrap();
    let e = read_csv(&no_header).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}:2: ", no_header.display())),
        "{e}"
    );
    assert!(e.contains("expected the header"), "{e}");
    let bad = dir.join("bad.csv");
    std::fs::write(
            &bad,
            format!("{CSV_HEADER}\nlaunch,4,8,1,4,512,4,idle,1.0,2.0,3.0,,3\nlaunch,four,8,1,4,512,4,idle,1.0,2.0,3.0,,3\n"),
        )
        .unwrap();
    let e = read_csv(&bad).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:3: ", bad.display())), "{e}");
    assert!(e.contains("nodes"), "{e}");
    let missing = dir.join("absent.csv");
    let e = read_csv(&missing).unwrap_err().to_string();
    assert!(e.starts_with(&missing.display().to_string()), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The committed measurements read back and written out again are the same bytes: the
/// format `cluster model` fits on does not drift with the writer.
#[test]
fn committed_measurements_rewrite_byte_for_byte() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reproductions");
    let dir = std::env::temp_dir().join(format!("launch-model-docs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["storm-launch-model.csv", "storm-launch-model-after.csv"] {
        let original = docs.join(name);
        let rows = read_csv(&original).unwrap();
        assert!(rows.len() > 10, "{name}: {} rows", rows.len());
        let copy = dir.join(name);
        let _ = std::fs::remove_file(&copy);
        append_csv(&copy, &rows).unwrap();
        assert_eq!(
            std::fs::read(&copy).unwrap(),
            std::fs::read(&original).unwrap(),
            "{name}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn too_few_settings_are_refused() {
    // One node count: the per-node cost cannot be told from the fixed cost.
    let rows: Vec<_> = [4.0, 8.0, 12.0]
        .iter()
        .map(|&mb| launch(16, 8, mb, 100.0 * mb, 50.0))
        .collect();
    let e = LaunchModel::fit(&rows, assume()).unwrap_err();
    assert!(e.contains("send") || e.contains("execute"), "{e}");
}
