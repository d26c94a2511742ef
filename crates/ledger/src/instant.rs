//! The order of one instant, for both drivers. Everything that happens at one time reaches
//! the policy before it decides once, grouped by kind in the order of [`ORDER`]; a round's
//! decisions may cause more events at the same time (a kill ends a job), and the instant
//! goes round again. Because the simulator and the machine manager both deliver in this
//! order, a policy decides the same in both (`sim_vs_mm` checks it).
//!
//! The machine manager gathers an instant's events as they come in an [`Instant`] and hands
//! them over with [`Instant::take`]; the simulator finds them stage by stage (it knows its
//! ends, arrivals and timers in order already) and walks [`order`] itself.

use cosched_core::JobId;
use cosched_policy::Event;

/// The kinds of event one instant delivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// A restarted machine manager's "hello": the jobs it found running. A simulation starts
    /// from nothing and has none.
    Hello,
    /// Ends the previous round's decisions caused (kills, rejections).
    Caused,
    /// Jobs whose processes are done, or reached their time limit, in the order they last
    /// started running: what arrives first at one time must not decide which PEs free first.
    Ends,
    /// Submissions, in submit order.
    Submitted,
    /// The policy's timers that are due.
    Timers,
    /// The rest — holds, releases, cancellations, nodes down and up — in the order they
    /// happened.
    Rest,
}

/// The order of one instant.
pub const ORDER: [Stage; 6] = [
    Stage::Hello,
    Stage::Caused,
    Stage::Ends,
    Stage::Submitted,
    Stage::Timers,
    Stage::Rest,
];

/// The order of one instant; `arrivals_first` swaps ends and submissions (a simulator
/// experiment: what a policy does when it sees arrivals before the ends of the same time).
#[inline]
pub fn order(arrivals_first: bool) -> [Stage; 6] {
    let mut o = ORDER;
    if arrivals_first {
        o.swap(2, 3);
    }
    o
}

/// The events gathered for the next round of the policy, by kind.
#[derive(Debug, Default)]
pub struct Instant {
    pub hello: Vec<Event>,
    pub caused: Vec<Event>,
    /// Ends with their run order (see [`Stage::Ends`]).
    pub ends: Vec<(u64, JobId)>,
    pub submitted: Vec<Event>,
    pub timers: Vec<Event>,
    pub rest: Vec<Event>,
}

impl Instant {
    pub fn is_empty(&self) -> bool {
        self.hello.is_empty()
            && self.caused.is_empty()
            && self.ends.is_empty()
            && self.submitted.is_empty()
            && self.timers.is_empty()
            && self.rest.is_empty()
    }

    /// Every event gathered, in the instant's order; the gathering starts empty again.
    pub fn take(&mut self) -> Vec<Event> {
        let mut all = Vec::new();
        for stage in ORDER {
            match stage {
                Stage::Hello => all.append(&mut self.hello),
                Stage::Caused => all.append(&mut self.caused),
                Stage::Ends => {
                    self.ends.sort_by_key(|&(seq, _)| seq);
                    all.extend(self.ends.drain(..).map(|(_, j)| Event::Ended(j)));
                }
                Stage::Submitted => all.append(&mut self.submitted),
                Stage::Timers => all.append(&mut self.timers),
                Stage::Rest => all.append(&mut self.rest),
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::{Dur, Time};
    use cosched_policy::JobRequest;

    /// Events gathered in any order come out by kind, ends by run order.
    #[test]
    fn an_instant_delivers_by_kind_and_ends_by_run_order() {
        let mut i = Instant::default();
        i.rest.push(Event::Held(JobId(9)));
        i.timers.push(Event::Timer(7));
        let req = JobRequest::new(JobId(5), Time::ZERO, 1, Dur::from_secs(1));
        i.submitted.push(Event::Submitted(req.clone()));
        i.ends.push((3, JobId(2)));
        i.ends.push((1, JobId(4)));
        i.caused.push(Event::Ended(JobId(8)));
        i.hello.push(Event::Held(JobId(1)));
        assert_eq!(
            i.take(),
            vec![
                Event::Held(JobId(1)),
                Event::Ended(JobId(8)),
                Event::Ended(JobId(4)),
                Event::Ended(JobId(2)),
                Event::Submitted(req),
                Event::Timer(7),
                Event::Held(JobId(9)),
            ]
        );
        assert!(i.is_empty());
    }

    #[test]
    fn arrivals_first_swaps_only_ends_and_submissions() {
        let o = order(true);
        assert_eq!(o[2..4], [Stage::Submitted, Stage::Ends]);
        assert_eq!(o[..2], ORDER[..2]);
        assert_eq!(o[4..], ORDER[4..]);
        assert_eq!(order(false), ORDER);
    }
}
