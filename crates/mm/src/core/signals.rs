//! Holds, shutdown, the gang switch's signals, strobe and announced rotation, and the events
//! of the instant gathered for the policy.

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
        // The jobs of the matrix need no stop or continue of their own: the nodes switch them
        // from the announced rotation ([`Core::announce`]).
        if let Some(m) = self.policy.matrix() {
            let rows = crate::announce::rows(&m);
            let in_matrix = |j: &JobId| rows.iter().any(|(r, _)| r == j);
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
    }

    /// Announces the gang rotation again when the real policy's matrix is not where the last
    /// announcement said it would be (an arrival, an end, a hold, a repack, or the end of a
    /// rotation with no cycle): the rotation from now, forecast by a copy of the policy
    /// ([`crate::announce`]). A switch that follows the announcement costs no message.
    pub(super) fn announce(&mut self, now: Time) {
        let Some(strobe) = self.strobe() else {
            self.announced.clear();
            return;
        };
        if self.announced.follows(&strobe) {
            return;
        }
        let timers = self.pending_timers();
        let r = crate::announce::forecast(self.policy.as_ref(), now, strobe, &timers);
        self.announced.set(r.clone());
        self.push(Effect::Broadcast(ToNode::Rotation(r)));
    }

    /// The gang strobe (seed 000 §4.1): the active slot, each job's row and the jobs the
    /// policy runs now (in the order of their ids); `None` for a policy without a matrix.
    pub(crate) fn strobe(&self) -> Option<Strobe> {
        let m = self.policy.matrix()?;
        let mut running: Vec<JobId> = self
            .live
            .iter()
            .map(|&i| self.ledger.entry(i))
            .filter(|e| e.is_running())
            .map(|e| e.req.id)
            .collect();
        running.sort();
        Some(Strobe {
            slot: m.active,
            rows: crate::announce::rows(&m),
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
