//! The partitions of the queue. A store several servers share keeps its queue in a
//! fixed number of partitions ([`crate::store::Store::partitions`]), each applied in
//! order and apart from the others, so that servers apply different partitions at
//! once instead of taking turns at one cursor.
//!
//! A queued operation goes to the partition of its user: the one its target
//! identifier (an external id, an alias, a Braze id, an email address or a phone
//! number, within its workspace) hashes to. Every operation naming a user by that
//! identifier is in one partition, in the order acknowledged, and is applied in that
//! order. A `/users/track` request naming users of several partitions is queued as
//! one job per partition, in one transaction ([`crate::store::Store::enqueue_parts`]).
//!
//! The hash is part of the stored format: the partition of an operation acknowledged
//! by one version must be the one the next version computes. It is the first eight
//! bytes of SHA-256 over the identifier's index key, modulo the count.

use sha2::{Digest, Sha256};

use std::collections::BTreeMap;

use super::barrier::{Barrier, StubAt};
use super::parse::{AttrUpdate, TrackJob, TrackOp};
use super::record;
use crate::ids::{Identifier, WorkspaceName};
use crate::repo::keys::{profile_key, shared_prefix, unique_key};
use crate::store::{PartJob, Store, StoreError};

/// One text per identifier of a workspace: the identifier index's key (an email's or
/// phone's prefix, which every profile with that address shares). The queue's
/// partitions, the backlog's index and the ledger all key a user by it.
pub fn user_key(ws: &WorkspaceName, ident: &Identifier) -> String {
    match ident {
        Identifier::Service(id) => profile_key(ws, id),
        other => unique_key(ws, other).or_else(|| shared_prefix(ws, other)).unwrap_or_default(),
    }
}

/// The name of the user `ident` names in `ws`, as a store that finds queued jobs by
/// the users they name keeps it ([`crate::store::Store::queued_naming`]): the first
/// eight bytes of SHA-256 over [`user_key`], the hash [`part_of`] takes a partition from.
/// Two users may share a name: a job found by one is read for the other's too.
pub fn name(ws: &WorkspaceName, ident: &Identifier) -> i64 {
    let digest = Sha256::digest(user_key(ws, ident).as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// The names of the users `job`'s operations name, each once, in order.
pub fn names(job: &TrackJob) -> Vec<i64> {
    let mut out: Vec<i64> = job.ops.iter().flat_map(|op| op_names(&job.workspace, op)).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The identifiers an operation names: its target, and the email address and phone
/// number an attribute object gives (later operations may name the user by them).
pub fn named(ws: &WorkspaceName, op: &TrackOp) -> Vec<Identifier> {
    let mut out: Vec<Identifier> = vec![op.target().ident.clone()];
    if let TrackOp::Attributes { updates, .. } = op {
        for u in updates {
            match u {
                AttrUpdate::Email(Some(e)) => out.push(Identifier::Email(e.clone())),
                AttrUpdate::Phone(Some(p)) => out.push(Identifier::Phone(p.clone())),
                _ => {}
            }
        }
    }
    out.sort_by_cached_key(|i| user_key(ws, i));
    out.dedup();
    out
}

/// One partition's share of a job, with the names of the users its operations name
/// (sorted, each once; none for a stub).
pub struct Part {
    pub part: u16,
    pub job: TrackJob,
    pub names: Vec<i64>,
}

/// The names of the users `op` names, its target's first: each identifier hashed
/// once, for both its partition and the name a store finds the job by.
fn op_names(ws: &WorkspaceName, op: &TrackOp) -> Vec<i64> {
    let target = &op.target().ident;
    let idents = named(ws, op);
    let names: Vec<i64> = idents.iter().map(|i| name(ws, i)).collect();
    let first = idents.iter().position(|i| i == target).map_or_else(|| name(ws, target), |at| names[at]);
    let mut out = vec![first];
    out.extend(names.into_iter().filter(|n| *n != first));
    out
}

/// The partition, of `parts` (at least one), of the operations naming `ident` in `ws`.
#[cfg(test)]
pub fn of(ws: &WorkspaceName, ident: &Identifier, parts: u16) -> u16 {
    part_of(name(ws, ident), parts)
}

/// The partition, of `parts` (at least one), of the user named `name`.
fn part_of(name: i64, parts: u16) -> u16 {
    (name as u64 % u64::from(parts)) as u16
}

/// `job` as the jobs of each partition its operations are in, in partition order,
/// each keeping its operations' order. Partitions joined by an operation naming
/// users of several are one job, the main, in the lowest of them, with a stub in
/// each of the others ([`super::barrier`]); the stubs' offsets count on the jobs
/// being numbered in the order returned, one after the other.
pub fn split(job: TrackJob, parts: u16) -> Vec<Part> {
    if parts <= 1 {
        return vec![Part { part: 0, names: names(&job), job }];
    }
    let ws = job.workspace.clone();
    let op_names: Vec<Vec<i64>> = job.ops.iter().map(|op| op_names(&ws, op)).collect();
    // Each operation's partitions, the target's (where it is queued) first.
    let of_op: Vec<Vec<u16>> = op_names
        .iter()
        .map(|ns| {
            let target = part_of(ns[0], parts);
            let mut ps = vec![target];
            ps.extend(ns[1..].iter().map(|n| part_of(*n, parts)).filter(|p| *p != target));
            ps
        })
        .collect();
    // Each partition's group, named by its lowest partition.
    let mut root: BTreeMap<u16, u16> = BTreeMap::new();
    fn find(root: &mut BTreeMap<u16, u16>, p: u16) -> u16 {
        let up = *root.entry(p).or_insert(p);
        if up == p {
            return p;
        }
        let top = find(root, up);
        root.insert(p, top);
        top
    }
    for ps in &of_op {
        for &p in &ps[1..] {
            let (a, b) = (find(&mut root, ps[0]), find(&mut root, p));
            root.insert(a.max(b), a.min(b));
        }
    }
    let empty = |ws: &WorkspaceName| Part {
        part: 0,
        job: TrackJob { workspace: ws.clone(), at: job.at, ops: vec![], barrier: None },
        names: vec![],
    };
    let mut jobs: BTreeMap<u16, Part> = BTreeMap::new();
    for ((op, ps), ns) in job.ops.into_iter().zip(&of_op).zip(op_names) {
        let main = find(&mut root, ps[0]);
        let main_job = jobs.entry(main).or_insert_with(|| Part { part: main, ..empty(&ws) });
        main_job.job.ops.push(op);
        main_job.names.extend(ns);
    }
    for p in root.keys().copied().collect::<Vec<_>>() {
        if find(&mut root, p) != p {
            jobs.insert(p, Part { part: p, ..empty(&ws) });
        }
    }
    let order: Vec<u16> = jobs.keys().copied().collect();
    let index = |p: u16| order.iter().position(|q| *q == p).unwrap_or(0) as i64;
    for &p in &order {
        let main = find(&mut root, p);
        if main != p {
            let offset = index(p) - index(main);
            if let Some(j) = jobs.get_mut(&p) {
                j.job.barrier = Some(Barrier::Stub { main: -offset });
            }
            if let Some(j) = jobs.get_mut(&main) {
                match &mut j.job.barrier {
                    Some(Barrier::Main { stubs }) => stubs.push(StubAt { part: p, offset }),
                    _ => j.job.barrier = Some(Barrier::Main { stubs: vec![StubAt { part: p, offset }] }),
                }
            }
        }
    }
    let mut out: Vec<Part> = jobs.into_values().collect();
    for part in &mut out {
        part.names.sort_unstable();
        part.names.dedup();
    }
    out
}

/// The records of `job` for `store`'s queue: one per partition it names, with the
/// names of its users when the store finds jobs by them.
pub fn encode<S: Store>(store: &S, job: &TrackJob) -> Result<Vec<PartJob>, StoreError> {
    let (parts, by_name) = (store.partitions(), store.finds_by_name());
    if parts <= 1 {
        let names = if by_name { names(job) } else { Vec::new() };
        return Ok(vec![PartJob { part: 0, job: record::encode(store, job)?, names }]);
    }
    split(job.clone(), parts)
        .into_iter()
        .map(|p| {
            let names = if by_name { p.names } else { Vec::new() };
            Ok(PartJob { part: p.part, job: record::encode(store, &p.job)?, names })
        })
        .collect()
}

/// The names of the users a queued record's operations name (none for a record
/// that does not decode).
pub fn record_names(record: &[u8]) -> Vec<i64> {
    record::decode(record).map(|job| names(&job)).unwrap_or_default()
}

/// A queued record as the records of each partition it names (a job queued before
/// the queue had partitions, or by a server that did not split it), with their
/// users' names: a record that does not decode stays whole, in partition 0, where
/// the applier sets it aside.
pub fn split_record(record: Vec<u8>, parts: u16, json: bool) -> Vec<PartJob> {
    let whole = |record| vec![PartJob { part: 0, job: record, names: Vec::new() }];
    let Ok(job) = record::decode(&record) else { return whole(record) };
    let encoded: Result<Vec<_>, StoreError> = split(job, parts)
        .into_iter()
        .map(|p| Ok(PartJob { part: p.part, job: record::encode_as(&p.job, json)?, names: p.names }))
        .collect();
    encoded.unwrap_or_else(|_| whole(record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ExternalId, WorkspaceName};

    #[test]
    fn an_identifier_s_partition_is_fixed_by_its_text_and_spread_over_all() {
        let ws = WorkspaceName::parse("w").unwrap();
        let ident = |s: &str| Identifier::External(ExternalId::parse(s).unwrap());
        // Stored format: these stay what they are.
        assert_eq!(of(&ws, &ident("u1"), 64), of(&ws, &ident("u1"), 64));
        assert_eq!(of(&ws, &ident("u1"), 1), 0);
        let mut seen = std::collections::BTreeSet::new();
        for n in 0..2000 {
            seen.insert(of(&ws, &ident(&format!("u{n}")), 64));
        }
        assert_eq!(seen.len(), 64, "two thousand users reach every partition");
        insta::assert_snapshot!(format!(
            "{} {} {}",
            of(&ws, &ident("u1"), 64),
            of(&ws, &ident("a"), 64),
            of(&WorkspaceName::parse("x").unwrap(), &ident("u1"), 64)
        ), @"36 11 1");
    }
}
