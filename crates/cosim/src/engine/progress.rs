//! A process's progress through its BSP iterations: compute segments, messages sent and
//! received over the network, blocked waits, and its exit.

use super::*;

impl Engine<'_> {
    /// Blocked-wait time counts for FCS only while the process's own slot is active (seed 000
    /// §3.4: time spent suspended is not counted); for the other schemes always.
    pub(super) fn flush_blocked(&mut self, id: u32, row_was_active: bool) {
        let now = self.now;
        let p = &mut self.procs[id as usize];
        if p.blocked {
            if row_was_active {
                p.wait_waited += now.since(p.blocked_since);
            }
            p.blocked_since = now;
        }
    }

    pub(super) fn row_active(&self, id: u32) -> bool {
        !self.scheme.is_gang() || self.jobs[self.procs[id as usize].job].row == self.slot
    }

    /// Moves a running process through its zero-time steps and schedules the end of its
    /// segment.
    pub(super) fn advance(&mut self, id: u32) {
        let i = id as usize;
        let gpe = self.procs[i].gpe;
        loop {
            let job = &self.jobs_in[self.procs[i].job];
            match self.procs[i].phase {
                Phase::Compute if self.procs[i].rem > Dur::ZERO => break,
                Phase::Compute => {
                    if job.io > Dur::ZERO {
                        let p = &mut self.procs[i];
                        p.phase = Phase::Io;
                        let io = draw(&mut p.rng, job.io, 1.0, p.variance);
                        let node = p.node as usize;
                        self.at(self.now + io, Ev::IoDone(id));
                        let acts = self.nodes[node].block(id);
                        self.apply(node, acts);
                        return;
                    }
                    self.procs[i].phase = Phase::Send;
                }
                Phase::Send => {
                    let p = &self.procs[i];
                    let node = p.node as usize;
                    let info = if self.scheme.uses_proc() {
                        self.nodes[node].load_info(self.now)
                    } else {
                        LoadInfo::default()
                    };
                    let (iter, from_node) = (p.iter, p.node);
                    let mut dsts = p.peers.clone();
                    let serial = self.sc.costs.serial_nic;
                    if serial {
                        // Each rank starts with its right-hand peer (rank + 1, + 2, ...), so
                        // that an all-to-all does not send everyone's first message to rank 0.
                        let (rank, n) = (p.rank, self.jobs_in[p.job].procs.max(1));
                        dsts.sort_by_key(|&d| (self.procs[d as usize].rank + n - rank) % n);
                    }
                    let mut done = self.now;
                    let jobs_in = self.jobs_in;
                    let sizes = &jobs_in[self.procs[i].job].msg_sizes;
                    for dst in dsts {
                        let transit = if sizes.is_empty() {
                            self.transit
                        } else {
                            let b = draw_size(&mut self.procs[i].rng, sizes);
                            self.sc.costs.transit_bytes(b)
                        };
                        let arrive = if serial {
                            // The NIC is busy for the transfer; the fixed startup part of
                            // the latency (`[costs] startup`) overlaps the next message.
                            let startup = self.sc.costs.startup.min(transit);
                            let nic = &mut self.nic_free[from_node as usize];
                            let start = (*nic).max(self.now);
                            *nic = start + (transit - startup);
                            *nic + startup
                        } else {
                            self.now + transit
                        };
                        done = done.max(arrive);
                        self.at(
                            arrive,
                            Ev::Msg {
                                dst,
                                iter,
                                from_node,
                                info,
                            },
                        );
                    }
                    let cc = self.scheme.waits_for_send() && done > self.now;
                    if cc {
                        self.at(done, Ev::SendDone(id));
                    }
                    let p = &mut self.procs[i];
                    p.phase = if cc { Phase::SendWait } else { Phase::Wait };
                    p.send_done = done;
                    p.got = 0;
                    p.policy = None;
                    p.wait_waited = Dur::ZERO;
                    p.wait_blocked = false;
                }
                Phase::SendWait if self.now >= self.procs[i].send_done => {
                    let p = &mut self.procs[i];
                    p.phase = Phase::Wait;
                    p.policy = None;
                    p.spin_left = None;
                }
                Phase::SendWait => {
                    // Spin for the spin time waiting for the send to complete, then block;
                    // SendDone wakes a blocked sender.
                    if self.procs[i].policy.is_none() {
                        let spin = self.sc.schemes.spin_time.unwrap_or(self.sc.costs.latency);
                        let p = &mut self.procs[i];
                        p.policy = Some(WaitPolicy::Spin(spin));
                        p.spin_left = Some(spin);
                    }
                    if self.procs[i].spin_left.is_some_and(|s| s <= Dur::ZERO) {
                        let p = &mut self.procs[i];
                        p.blocked = true;
                        p.blocked_since = self.now;
                        let node = p.node as usize;
                        let acts = self.nodes[node].block(id);
                        self.apply(node, acts);
                        return;
                    }
                    break;
                }
                Phase::Wait => {
                    let before = self.procs[i].got;
                    self.consume(id);
                    if self.sc.schemes.spin_per_message && self.procs[i].got > before {
                        // A fresh spin budget for the next message.
                        self.procs[i].policy = None;
                    }
                    let p = &self.procs[i];
                    if p.got as usize >= p.peers.len() {
                        let node = p.node as usize;
                        let (msgs, waited, blocked) =
                            (p.peers.len() as u32, p.wait_waited, p.wait_blocked);
                        if !p.peers.is_empty() {
                            self.nodes[node].comm_done(id, msgs, waited, blocked);
                        }
                        let p = &mut self.procs[i];
                        p.iter += 1;
                        if p.iter >= job.iterations {
                            self.exit(id);
                            return;
                        }
                        p.phase = Phase::Compute;
                        p.rem = draw(&mut p.rng, job.compute, p.work_factor, p.variance);
                        continue;
                    }
                    if p.policy.is_none() {
                        let pol = self.nodes[node_of(p)].wait_policy(id);
                        let p = &mut self.procs[i];
                        p.policy = Some(pol);
                        p.spin_left = match pol {
                            WaitPolicy::SpinForever => None,
                            WaitPolicy::Spin(d) => Some(d),
                            WaitPolicy::Block => Some(Dur::ZERO),
                        };
                    }
                    if self.procs[i].spin_left.is_some_and(|s| s <= Dur::ZERO) {
                        self.block_wait(id);
                        return;
                    }
                    break;
                }
                Phase::Io | Phase::Done => return,
            }
        }
        // Still running: the segment ends at the first of compute end, spin end, quantum end.
        let p = &self.procs[i];
        let mut end = match p.phase {
            Phase::Compute => Some(self.now + p.rem),
            Phase::SendWait => p
                .spin_left
                .map(|s| (self.now + s).min(p.send_done))
                .or(Some(p.send_done)),
            _ => p.spin_left.map(|s| self.now + s),
        };
        if let Some(q) = self.pes[gpe].quantum_end {
            end = Some(end.map_or(q, |e| e.min(q)));
        }
        self.pes[gpe].epoch += 1;
        if let Some(e) = end {
            let epoch = self.pes[gpe].epoch;
            self.at(e.max(self.now), Ev::SegEnd { pe: gpe, epoch });
        }
    }

    pub(super) fn block_wait(&mut self, id: u32) {
        let p = &mut self.procs[id as usize];
        p.blocked = true;
        p.wait_blocked = true;
        p.blocked_since = self.now;
        let node = p.node as usize;
        let acts = self.nodes[node].block(id);
        self.apply(node, acts);
    }

    /// Takes the messages of the current iteration out of the inbox.
    pub(super) fn consume(&mut self, id: u32) {
        let p = &mut self.procs[id as usize];
        let iter = p.iter;
        let mut from = Vec::new();
        let mut k = 0;
        while k < p.inbox.len() {
            if p.inbox[k].0 == iter {
                let (_, arrived, node) = p.inbox.swap_remove(k);
                self.pending_sum += self.now.since(arrived);
                self.pending_n += 1;
                p.got += 1;
                from.push(node);
            } else {
                k += 1;
            }
        }
        if !from.is_empty() {
            let node = p.node as usize;
            self.nodes[node].msgs_consumed(id, &from);
        }
    }

    pub(super) fn msg(&mut self, dst: u32, iter: u32, from_node: u32, info: LoadInfo) {
        let i = dst as usize;
        if self.procs[i].phase == Phase::Done {
            return;
        }
        self.procs[i].inbox.push((iter, self.now, from_node));
        let gpe = self.procs[i].gpe;
        let running = self.pes[gpe].state == (PeState::Running { proc: dst });
        let p = &self.procs[i];
        let waiting_now = p.phase == Phase::Wait && p.iter == iter;
        let node = p.node as usize;
        let acts = self.nodes[node].msg_arrived(
            self.now,
            dst,
            from_node,
            info,
            waiting_now && p.blocked,
            running,
        );
        self.apply(node, acts);
        // A receiver spinning on its PE takes the message at once.
        if waiting_now && self.pes[gpe].state == (PeState::Running { proc: dst }) {
            self.close(gpe);
            self.advance(dst);
        }
    }

    /// CC: the NIC finished a sender's messages. A blocked sender is woken as a blocked
    /// receiver is (interrupt, boost); a spinning one goes on at once.
    pub(super) fn send_done(&mut self, id: u32) {
        let i = id as usize;
        if self.procs[i].phase != Phase::SendWait {
            return;
        }
        let gpe = self.procs[i].gpe;
        let node = self.procs[i].node as usize;
        if self.procs[i].blocked {
            let p = &mut self.procs[i];
            p.blocked = false;
            p.policy = None;
            let pe = self.pes[gpe].local;
            let mut acts = vec![Action::Overhead {
                pe,
                dur: self.sc.costs.interrupt,
            }];
            acts.extend(self.nodes[node].wake(id, true));
            self.apply(node, acts);
        } else if self.pes[gpe].state == (PeState::Running { proc: id }) {
            self.close(gpe);
            self.advance(id);
        }
    }

    pub(super) fn exit(&mut self, id: u32) {
        let class = self.nodes[self.procs[id as usize].node as usize]
            .class(id)
            .map(ProcClass::label);
        let p = &mut self.procs[id as usize];
        p.phase = Phase::Done;
        p.final_class = class;
        let (j, gpe, node) = (p.job, p.gpe, p.node as usize);
        let row = self.jobs[j].row as usize;
        self.matrix[row][gpe] = None;
        self.jobs[j].left -= 1;
        if self.jobs[j].left == 0 {
            self.jobs[j].end = Some(self.now);
            self.unfinished -= 1;
        }
        let acts = self.nodes[node].remove(id);
        self.apply(node, acts);
        self.admit();
    }
}
