//! The name service across jobs and nodes (`MPI_Publish_name`, `MPI_Lookup_name`,
//! `MPI_Unpublish_name`, from PMIx and PMI-1 alike): one table, in memory, one name space per
//! user. A name belongs to the job that published it and goes when that job ends; a lookup
//! that asked to wait is answered when its names appear, or dropped with its job.
//!
//! In memory, not in the store: a published name is a running process's port (an address to
//! connect to), worth nothing once its job has ended, so there is nothing to keep across a
//! restart of the machine manager (docs/daemons.md, "The name service").

use std::collections::BTreeMap;

use cosched_core::{JobId, NodeId};
use cosched_proto::names::{FoundName, NameAnswer, NameOp};

/// The most names one user may have published at once, and lookups waiting at once: the
/// table is in memory and a user's program must not grow it without bound.
pub const MAX_PER_USER: usize = 4096;

/// Who waits for an answer: the node that asked and its request number there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Asker {
    pub node: NodeId,
    pub req: u64,
}

#[derive(Clone, Debug)]
struct Entry {
    value: String,
    job: JobId,
    rank: u32,
}

#[derive(Clone, Debug)]
struct Waiting {
    uid: u32,
    job: JobId,
    names: Vec<String>,
    asker: Asker,
}

/// The machine manager's name table.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// (user, name) → what was published.
    table: BTreeMap<(u32, String), Entry>,
    /// Lookups with `wait` whose names are not all published yet, oldest first.
    waiting: Vec<Waiting>,
}

impl Names {
    /// Rank `rank` of `job`, which runs as `uid`, asks `op` (through `asker`). Returns the
    /// answers to send: to `asker` at once, unless its lookup waits, and to earlier lookups
    /// a publication completes.
    pub fn ask(
        &mut self,
        uid: u32,
        job: JobId,
        rank: u32,
        op: NameOp,
        asker: Asker,
    ) -> Vec<(Asker, NameAnswer)> {
        match op {
            NameOp::Publish { names } => {
                let answer = self.publish(uid, job, rank, names);
                let done = answer == NameAnswer::Done;
                let mut out = vec![(asker, answer)];
                if done {
                    out.extend(self.wake(uid));
                }
                out
            }
            NameOp::Lookup { names, wait } => {
                let found = self.find(uid, &names);
                if found.len() == names.len() && !names.is_empty() {
                    return vec![(asker, NameAnswer::Found(found))];
                }
                if !wait || names.is_empty() {
                    let answer = if found.is_empty() {
                        NameAnswer::NotFound
                    } else {
                        NameAnswer::Found(found)
                    };
                    return vec![(asker, answer)];
                }
                if self.waiting.iter().filter(|w| w.uid == uid).count() >= MAX_PER_USER {
                    let why = format!("too many lookups waiting (at most {MAX_PER_USER} per user)");
                    return vec![(asker, NameAnswer::Refused(why))];
                }
                self.waiting.push(Waiting {
                    uid,
                    job,
                    names,
                    asker,
                });
                Vec::new()
            }
            NameOp::Unpublish { names } => vec![(asker, self.unpublish(uid, job, &names))],
        }
    }

    fn publish(
        &mut self,
        uid: u32,
        job: JobId,
        rank: u32,
        names: Vec<(String, String)>,
    ) -> NameAnswer {
        // The same job publishing the same value again is its request repeated (a node that
        // joined the tree again asks again what was not answered), not a clash.
        let taken = names.iter().find(|(n, v)| {
            self.table
                .get(&(uid, n.clone()))
                .is_some_and(|e| e.job != job || e.value != *v)
        });
        if let Some((name, _)) = taken {
            return NameAnswer::Taken(name.clone());
        }
        let mine = self
            .table
            .range((uid, String::new())..)
            .take_while(|((u, _), _)| *u == uid);
        if mine.count() + names.len() > MAX_PER_USER {
            return NameAnswer::Refused(format!(
                "too many names published (at most {MAX_PER_USER} per user)"
            ));
        }
        for (name, value) in names {
            self.table.insert((uid, name), Entry { value, job, rank });
        }
        NameAnswer::Done
    }

    fn find(&self, uid: u32, names: &[String]) -> Vec<FoundName> {
        names
            .iter()
            .filter_map(|n| {
                let e = self.table.get(&(uid, n.clone()))?;
                Some(FoundName {
                    name: n.clone(),
                    value: e.value.clone(),
                    job: e.job,
                    rank: e.rank,
                })
            })
            .collect()
    }

    fn unpublish(&mut self, uid: u32, job: JobId, names: &[String]) -> NameAnswer {
        if names.is_empty() {
            self.table.retain(|(u, _), e| *u != uid || e.job != job);
            return NameAnswer::Done;
        }
        let mut missing = false;
        for n in names {
            let key = (uid, n.clone());
            match self.table.get(&key) {
                Some(e) if e.job == job => {
                    self.table.remove(&key);
                }
                _ => missing = true,
            }
        }
        if missing {
            NameAnswer::NotFound
        } else {
            NameAnswer::Done
        }
    }

    /// The waiting lookups of `uid` whose names are now all published, answered.
    fn wake(&mut self, uid: u32) -> Vec<(Asker, NameAnswer)> {
        let table = &self.table;
        let complete = |w: &Waiting| {
            w.uid == uid
                && w.names
                    .iter()
                    .all(|n| table.contains_key(&(uid, n.clone())))
        };
        let woken: Vec<Waiting> = self.waiting.extract_if(.., |w| complete(w)).collect();
        woken
            .into_iter()
            .map(|w| (w.asker, NameAnswer::Found(self.find(uid, &w.names))))
            .collect()
    }

    /// `ended(job)` says which jobs have ended: their names go, and their lookups that
    /// wait are dropped (nobody is left to answer).
    pub fn jobs_ended(&mut self, ended: impl Fn(JobId) -> bool) {
        self.table.retain(|_, e| !ended(e.job));
        self.waiting.retain(|w| !ended(w.job));
    }

    /// The jobs that have names published or lookups waiting.
    pub fn jobs(&self) -> impl Iterator<Item = JobId> + '_ {
        let named = self.table.values().map(|e| e.job);
        named.chain(self.waiting.iter().map(|w| w.job))
    }

    /// How many names are published (all users).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: u32 = 1000;
    const BOB: u32 = 1001;

    fn at(node: u32, req: u64) -> Asker {
        Asker {
            node: NodeId(node),
            req,
        }
    }

    fn publish(name: &str, value: &str) -> NameOp {
        NameOp::Publish {
            names: vec![(name.into(), value.into())],
        }
    }

    fn lookup(name: &str, wait: bool) -> NameOp {
        NameOp::Lookup {
            names: vec![name.into()],
            wait,
        }
    }

    fn found(name: &str, value: &str, job: u64, rank: u32) -> NameAnswer {
        NameAnswer::Found(vec![FoundName {
            name: name.into(),
            value: value.into(),
            job: JobId(job),
            rank,
        }])
    }

    #[test]
    fn a_name_published_by_one_job_is_found_by_another_job_of_the_same_user_only() {
        let mut n = Names::default();
        let ok = n.ask(ALICE, JobId(1), 3, publish("svc", "port-a"), at(0, 1));
        assert_eq!(ok, [(at(0, 1), NameAnswer::Done)]);
        let got = n.ask(ALICE, JobId(2), 0, lookup("svc", false), at(1, 7));
        assert_eq!(got, [(at(1, 7), found("svc", "port-a", 1, 3))]);
        // Another user sees nothing of it, and has a name space of their own.
        let other = n.ask(BOB, JobId(3), 0, lookup("svc", false), at(1, 8));
        assert_eq!(other, [(at(1, 8), NameAnswer::NotFound)]);
        let own = n.ask(BOB, JobId(3), 0, publish("svc", "port-b"), at(1, 9));
        assert_eq!(own, [(at(1, 9), NameAnswer::Done)]);
        let still = n.ask(ALICE, JobId(2), 0, lookup("svc", false), at(1, 10));
        assert_eq!(still, [(at(1, 10), found("svc", "port-a", 1, 3))]);
    }

    #[test]
    fn a_published_name_is_neither_overwritten_nor_withdrawn_by_another_job() {
        let mut n = Names::default();
        n.ask(ALICE, JobId(1), 0, publish("svc", "port-a"), at(0, 1));
        let again = n.ask(ALICE, JobId(2), 0, publish("svc", "port-x"), at(1, 2));
        assert_eq!(again, [(at(1, 2), NameAnswer::Taken("svc".into()))]);
        let withdraw = NameOp::Unpublish {
            names: vec!["svc".into()],
        };
        let theirs = n.ask(ALICE, JobId(2), 0, withdraw.clone(), at(1, 3));
        assert_eq!(theirs, [(at(1, 3), NameAnswer::NotFound)]);
        let got = n.ask(ALICE, JobId(2), 0, lookup("svc", false), at(1, 4));
        assert_eq!(got, [(at(1, 4), found("svc", "port-a", 1, 0))]);
        // The publishing job's request repeated (asked again after a lost answer) is no clash.
        let repeated = n.ask(ALICE, JobId(1), 0, publish("svc", "port-a"), at(0, 6));
        assert_eq!(repeated, [(at(0, 6), NameAnswer::Done)]);
        let own = n.ask(ALICE, JobId(1), 1, withdraw, at(0, 5));
        assert_eq!(own, [(at(0, 5), NameAnswer::Done)]);
        assert!(n.is_empty());
    }

    #[test]
    fn a_waiting_lookup_is_answered_when_the_name_appears_and_an_immediate_one_fails_at_once() {
        let mut n = Names::default();
        assert_eq!(
            n.ask(ALICE, JobId(2), 0, lookup("svc", false), at(1, 1)),
            [(at(1, 1), NameAnswer::NotFound)]
        );
        assert!(
            n.ask(ALICE, JobId(2), 0, lookup("svc", true), at(1, 2))
                .is_empty()
        );
        // Another user's publication of the same name wakes nobody of this user.
        assert_eq!(
            n.ask(BOB, JobId(5), 0, publish("svc", "bob"), at(2, 3)),
            [(at(2, 3), NameAnswer::Done)]
        );
        let out = n.ask(ALICE, JobId(1), 4, publish("svc", "port-a"), at(0, 4));
        assert_eq!(
            out,
            [
                (at(0, 4), NameAnswer::Done),
                (at(1, 2), found("svc", "port-a", 1, 4))
            ]
        );
    }

    #[test]
    fn a_jobs_names_and_waiting_lookups_go_when_it_ends() {
        let mut n = Names::default();
        n.ask(ALICE, JobId(1), 0, publish("svc", "port-a"), at(0, 1));
        n.ask(ALICE, JobId(3), 0, lookup("other", true), at(1, 2));
        n.jobs_ended(|j| j == JobId(1) || j == JobId(3));
        assert!(n.is_empty());
        let got = n.ask(ALICE, JobId(2), 0, lookup("svc", false), at(1, 3));
        assert_eq!(got, [(at(1, 3), NameAnswer::NotFound)]);
        // The dropped lookup is not answered by a later publication.
        let out = n.ask(ALICE, JobId(2), 0, publish("other", "x"), at(1, 4));
        assert_eq!(out, [(at(1, 4), NameAnswer::Done)]);
    }

    #[test]
    fn a_user_cannot_publish_without_bound() {
        let mut n = Names::default();
        let many: Vec<(String, String)> = (0..MAX_PER_USER)
            .map(|i| (format!("n{i}"), "v".into()))
            .collect();
        let ok = n.ask(
            ALICE,
            JobId(1),
            0,
            NameOp::Publish { names: many },
            at(0, 1),
        );
        assert_eq!(ok, [(at(0, 1), NameAnswer::Done)]);
        let one_more = n.ask(ALICE, JobId(1), 0, publish("last", "v"), at(0, 2));
        assert!(matches!(&one_more[0].1, NameAnswer::Refused(w) if w.contains("too many")));
        // Another user is not limited by it.
        let bob = n.ask(BOB, JobId(2), 0, publish("last", "v"), at(0, 3));
        assert_eq!(bob, [(at(0, 3), NameAnswer::Done)]);
    }
}
