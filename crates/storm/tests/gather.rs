//! Gathering on 16 node transports, fan-out 2 (a tree four levels deep): every node's
//! contribution reaches the root once, as that node's signal, and the root hears at most
//! one frame per child link per gathering, where forwarding brings it one per node.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cosched_core::NodeId;
use cosched_storm::{Dest, Key, NodeHandle, Root, RootEvent, spawn_node};
use tokio::net::TcpListener;
use tokio::sync::mpsc::UnboundedReceiver;

const T: Duration = Duration::from_secs(10);
const N: u32 = 16;
const FANOUT: u32 = 2;

/// The next `n` signals at the root, by sender.
async fn signals(up: &mut UnboundedReceiver<RootEvent>, n: usize) -> BTreeMap<NodeId, Vec<u8>> {
    let mut got = BTreeMap::new();
    while got.len() < n {
        let ev = tokio::time::timeout(T, up.recv())
            .await
            .expect("every contribution within 10 s")
            .unwrap();
        if let RootEvent::Signal { from, payload } = ev {
            assert!(got.insert(from, payload).is_none(), "{from} twice");
        }
    }
    got
}

async fn tree() -> (Vec<NodeHandle>, Root, UnboundedReceiver<RootEvent>) {
    let key = Key::generate().unwrap();
    let mut handles = Vec::new();
    let mut members = Vec::new();
    let mut deliveries = Vec::new();
    for i in 0..N {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        members.push((NodeId(i), l.local_addr().unwrap().to_string()));
        let (h, rx) = spawn_node(l, key.clone(), NodeId(i));
        handles.push(h);
        deliveries.push(rx);
    }
    let (mut root, up) = Root::new(key, FANOUT);
    root.set_members(1, members);
    // Every node is linked once an acknowledged XFER to all is held everywhere.
    let mut up = up;
    let id = root.xfer_acked(&Dest::All, None, Vec::new(), T);
    loop {
        match tokio::time::timeout(T, up.recv())
            .await
            .expect("linked")
            .unwrap()
        {
            RootEvent::Answer(o) if o.id() == id => {
                assert!(o.holds_everywhere(), "{o:?}");
                break;
            }
            _ => {}
        }
    }
    std::mem::forget(deliveries);
    (handles, root, up)
}

#[tokio::test]
async fn a_gathering_reaches_the_root_in_one_frame_per_child_link_with_every_part() {
    let (handles, root, mut up) = tree().await;
    let stats = root.stats();
    // A job on every other node: the relays in between contribute nothing but combine.
    let job: Vec<NodeId> = (0..N).filter(|n| n % 2 == 1).map(NodeId).collect();
    for round in 0..3u64 {
        let before = stats.signal_frames.load(Ordering::Relaxed);
        for &n in &job {
            let payload = format!("node {n} round {round}").into_bytes();
            handles[n.0 as usize].gather_up((9, 1, round), Dest::nodes(job.clone()), payload);
        }
        let got = signals(&mut up, job.len()).await;
        assert_eq!(got.keys().copied().collect::<Vec<_>>(), job);
        for (n, p) in &got {
            assert_eq!(p, format!("node {n} round {round}").as_bytes());
        }
        let frames = stats.signal_frames.load(Ordering::Relaxed) - before;
        assert!(
            frames <= FANOUT as u64,
            "round {round}: {frames} frames at the root for {} contributors",
            job.len()
        );
    }
    // Forwarding, for contrast: one frame per node.
    let before = stats.signal_frames.load(Ordering::Relaxed);
    for &n in &job {
        handles[n.0 as usize].signal_up(vec![1]);
    }
    signals(&mut up, job.len()).await;
    let frames = stats.signal_frames.load(Ordering::Relaxed) - before;
    assert_eq!(frames, job.len() as u64);
}
