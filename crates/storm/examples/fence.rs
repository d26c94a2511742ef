//! Fence time on a loopback tree: N node transports under a root of fan-out K; in each
//! round every node contributes a part (P bytes) and the root, once it holds all N, sends
//! one XFER down to all, the round ending when every node has it. Combined (every hop
//! gathers its subtree's parts into one message, `gather_up`) against forwarded (each part
//! travels up on its own, `signal_up`), alternating by round.
//!
//! `cargo run --release -p cosched-storm --example fence -- N K ROUNDS P`
//! (defaults 16 2 500 256).

use std::time::{Duration, Instant};

use cosched_core::NodeId;
use cosched_storm::{Delivery, Dest, Key, Root, RootEvent, spawn_node};
use tokio::net::TcpListener;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers: N K ROUNDS P"))
        .collect();
    let arg = |i: usize, d: u64| args.get(i).copied().unwrap_or(d);
    let (n, k, rounds, p) = (
        arg(0, 16) as u32,
        arg(1, 2) as u32,
        arg(2, 500),
        arg(3, 256),
    );
    let key = Key::generate().expect("key");
    let mut handles = Vec::new();
    let mut members = Vec::new();
    let mut deliveries = Vec::new();
    for i in 0..n {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        members.push((NodeId(i), l.local_addr().expect("addr").to_string()));
        let (h, rx) = spawn_node(l, key.clone(), NodeId(i));
        handles.push(h);
        deliveries.push(rx);
    }
    let (mut root, mut up) = Root::new(key, k);
    root.set_members(1, members);
    let id = root.xfer_acked(&Dest::All, None, Vec::new(), Duration::from_secs(10));
    loop {
        if let Some(RootEvent::Answer(o)) = up.recv().await
            && o.id() == id
        {
            assert!(o.holds_everywhere(), "tree not linked: {o:?}");
            break;
        }
    }
    // Drain the warm-up XFER.
    for d in &mut deliveries {
        while let Ok(ev) = d.try_recv() {
            drop(ev);
        }
    }
    let stats = root.stats();
    let all = Dest::nodes((0..n).map(NodeId).collect());
    let mut times = [Vec::new(), Vec::new()];
    let mut frames = [0u64, 0u64];
    for round in 0..rounds * 2 {
        let combined = round % 2 == 0;
        let before = stats
            .signal_frames
            .load(std::sync::atomic::Ordering::Relaxed);
        let t = Instant::now();
        for (i, h) in handles.iter().enumerate() {
            let part = vec![i as u8; p as usize];
            if combined {
                h.gather_up((1, 1, round), all.clone(), part);
            } else {
                h.signal_up(part);
            }
        }
        let mut got = 0;
        while got < n {
            if let Some(RootEvent::Signal { .. }) = up.recv().await {
                got += 1;
            }
        }
        root.xfer(&Dest::All, None, vec![0; 64]);
        for d in &mut deliveries {
            loop {
                if let Some(Delivery::Xfer(_)) = d.recv().await {
                    break;
                }
            }
        }
        let slot = usize::from(!combined);
        times[slot].push(t.elapsed());
        frames[slot] += stats
            .signal_frames
            .load(std::sync::atomic::Ordering::Relaxed)
            - before;
    }
    println!("{n} nodes, fan-out {k}, {rounds} fences each, {p}-byte parts");
    for (name, slot) in [("combined", 0), ("forwarded", 1)] {
        let t = &mut times[slot];
        t.sort();
        let q = |f: f64| t[((t.len() - 1) as f64 * f) as usize].as_secs_f64() * 1e6;
        println!(
            "{name:>9}: median {:.0} µs, p10 {:.0} µs, p90 {:.0} µs, frames at the root per fence {:.1}",
            q(0.5),
            q(0.1),
            q(0.9),
            frames[slot] as f64 / rounds as f64
        );
    }
}
