//! Holds, shutdown, the gang switch's signals and strobe, and the events of the instant
//! gathered for the policy.

use super::*;

impl Core {
    /// Takes job `id` out of this step's switch message (its stops, continues and kills).
    pub(super) fn unsignal(&mut self, id: JobId) {
        for list in [
            &mut self.switch.stop,
            &mut self.switch.cont,
            &mut self.switch.kill,
        ] {
            list.retain(|j| *j != id);
        }
    }

    /// Adds a job's nodes to this step's switch message, in the list `which` picks.
    pub(super) fn signal(&mut self, i: Ix, which: fn(&mut Switch) -> &mut Vec<JobId>) {
        let id = self.ledger.entry(i).req.id;
        which(&mut self.switch).push(id);
        let nodes = self.side[i].placement.iter().map(|p| p.node);
        self.switch.nodes.extend(nodes);
    }

    /// A user's hold or release (`cosched suspend` / `resume`).
    pub(crate) fn set_held(&mut self, now: Time, i: Ix, hold: bool) {
        let id = self.ledger.entry(i).req.id;
        let change = if hold {
            self.ledger.hold(i, now)
        } else {
            self.ledger.release(i, now)
        };
        self.carry_out(now, change, None);
        self.mark(i);
        if self.deferred.contains(&i) {
            // Not the policy's yet: it is given to it held, if still held then.
            return;
        }
        self.instant.rest.push(if hold {
            Event::Held(id)
        } else {
            Event::Released(id)
        });
    }

    /// Stops everything for good, without asking the policy (nothing new starts).
    pub(crate) fn shutdown(&mut self, now: Time) {
        let live: Vec<Ix> = self.live.iter().copied().collect();
        for i in live {
            self.finish(now, i, Outcome::Cancelled, None, Some(SHUT_DOWN.into()));
        }
        self.flush_switch();
        self.push(Effect::Broadcast(ToNode::Shutdown));
        self.push(Effect::Exit);
        self.shutting_down = true;
    }

    pub(super) fn flush_switch(&mut self) {
        let mut s = std::mem::take(&mut self.switch);
        if s.stop.is_empty() && s.cont.is_empty() && s.kill.is_empty() {
            return;
        }
        self.switches += 1;
        // Every node hears the new matrix state now, not at the next heartbeat: the node
        // schemes switch from it, so the jobs of the matrix need no stop or continue of their
        // own (one message per switch instead of two: at millisecond quanta the daemons'
        // CPU per message is a visible share of the cores).
        let strobe = self.strobe();
        if let Some(st) = &strobe {
            let in_matrix = |j: &JobId| st.rows.iter().any(|(r, _)| r == j);
            s.stop.retain(|j| !in_matrix(j));
            s.cont.retain(|j| !in_matrix(j));
        }
        if !(s.stop.is_empty() && s.cont.is_empty() && s.kill.is_empty()) {
            self.send(
                s.nodes.into_iter().collect(),
                ToNode::Switch {
                    stop: s.stop,
                    cont: s.cont,
                    kill: s.kill,
                },
            );
        }
        if let Some(strobe) = strobe {
            self.push(Effect::Broadcast(ToNode::Strobe(strobe)));
        }
    }

    /// The gang strobe (seed 000 §4.1): the active slot, each job's row and the jobs the
    /// policy runs now; `None` for a policy without a matrix.
    pub(crate) fn strobe(&self) -> Option<Strobe> {
        let m = self.policy.matrix()?;
        let rows = m
            .slots
            .iter()
            .enumerate()
            .flat_map(|(r, s)| s.jobs.iter().map(move |(j, _)| (*j, r as u32)))
            .collect();
        let running = self
            .live
            .iter()
            .map(|&i| self.ledger.entry(i))
            .filter(|e| e.is_running())
            .map(|e| e.req.id)
            .collect();
        Some(Strobe {
            slot: m.active,
            rows,
            running,
        })
    }

    pub(crate) fn add_node_events(&mut self, ev: Event) {
        self.instant.rest.push(ev);
    }
    pub(crate) fn push_submitted(&mut self, ev: Event) {
        self.instant.submitted.push(ev);
    }
    pub(crate) fn push_rest(&mut self, ev: Event) {
        self.instant.rest.push(ev);
    }
}
