//! The storage boundary. Every backend (memory here, SQLite in host-native, D1 at the
//! edge) implements [`Store`]: narrow reads, one atomic [`ChangeSet`] commit per
//! request with optimistic version checks, and a durable queue for asynchronous
//! `/users/track` jobs.
//!
//! Data is kept as versioned JSON documents in a few tables; the typed view of each
//! table lives in [`crate::repo`]. The trait's `async fn`s carry no `Send` bound on
//! purpose: a native store's futures are `Send`, a D1 store's are not, and the core
//! does not care.

pub mod conformance;
pub mod memory;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// The tables of the document store. The numbers are stored on disk: never reuse one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    /// Workspace name → workspace record.
    Workspace = 1,
    /// Hash of an API key → key record (workspace and permissions).
    ApiKey = 2,
    /// `workspace/service_id` → profile document.
    Profile = 3,
    /// `workspace/kind/value[/service_id]` → service id: the identifier index.
    Ident = 4,
    /// `workspace/group_id` → subscription group.
    Group = 5,
    /// `workspace/email` → state remembered for an email address.
    Address = 6,
    /// Zero-padded queue sequence number → a queued job that could not be decoded,
    /// kept for an operator instead of being dropped.
    SetAside = 7,
    /// `workspace/api_id` → preference center.
    PreferenceCenter = 8,
    /// `workspace/name` → the api id of the preference center with that name (names
    /// are unique per workspace).
    PreferenceCenterName = 9,
    /// Workspace name → the workspace's secret for signing preference-center links.
    /// Never returned by any API.
    LinkSecret = 10,
    /// Hash of a SCIM token → its record (the origin it is for). Company-wide.
    ScimToken = 11,
    /// Resource id → dashboard user (SCIM). Company-wide: not per workspace.
    ScimUser = 12,
    /// Lower-cased `userName` → the id of the dashboard user with it (user names are
    /// unique case-insensitively); and the number of dashboard users.
    ScimUserName = 13,
    /// Integration id → warehouse integration (CDI); the workspace is inside.
    CdiIntegration = 14,
    /// `workspace/integration/seq` (zero-padded) → a sync job.
    CdiJob = 15,
    /// Workspace name → the secret that signs its CDI page cursors.
    CdiSecret = 16,
    /// Integration id → when an on-demand run was asked of the process that runs syncs.
    CdiRequest = 17,
    /// Zero-padded queue sequence number → a queued job applied ahead of the queue
    /// cursor (for a request that needed it); deleted when the cursor passes it.
    QueueEarly = 18,
    /// Profiles stored larger than [`crate::repo::large::LARGE_PROFILE_BYTES`]: each
    /// unique identifier and the profile key of such a profile, and the workspace's
    /// prefix alone once its profiles were all written by a version that keeps this
    /// table (see [`crate::repo::large`]).
    LargeProfile = 19,
    /// SHA-256 of a fixtures file loaded (the test kit's seed) → when: loading it
    /// again changes nothing, until a reset.
    Seed = 20,
    /// Integration id → how many batches its jobs have committed. Only a job's batches
    /// write it, so a batch built on another one as if that had committed cannot
    /// commit unless it did: this document is left at the version it expects by
    /// nothing else (see [`crate::warehouse::Pipeline`]).
    CdiBatches = 21,
    /// SHA-256 of an inspector session's cookie → when it ends (real time). Deleted
    /// at sign-out: a session lives only while this database says so.
    InspectorSession = 22,
    /// `workspace/email` → what the email lists know of the address: when it
    /// unsubscribed, when it was marked a hard bounce (`/email/unsubscribes`,
    /// `/email/hard_bounces`).
    EmailList = 23,
    /// `workspace/+number` → when the number was found invalid
    /// (`/sms/invalid_phone_numbers`; only a fixtures file puts one there).
    PhoneList = 24,
}

impl Table {
    /// The number stored on disk.
    pub fn id(self) -> i64 {
        self as i64
    }

    /// The table of the SQL schema shared by the SQLite and D1 stores (`migrations/`)
    /// that holds this kind's documents.
    pub fn sql_table(self) -> SqlTable {
        match self {
            Table::Ident => SqlTable::Idents,
            _ => SqlTable::Docs,
        }
    }

    /// Every table, for backends that enumerate them.
    pub const ALL: [Table; 24] = [
        Table::Workspace,
        Table::ApiKey,
        Table::Profile,
        Table::Ident,
        Table::Group,
        Table::Address,
        Table::SetAside,
        Table::PreferenceCenter,
        Table::PreferenceCenterName,
        Table::LinkSecret,
        Table::ScimToken,
        Table::ScimUser,
        Table::ScimUserName,
        Table::CdiIntegration,
        Table::CdiJob,
        Table::CdiSecret,
        Table::CdiRequest,
        Table::QueueEarly,
        Table::LargeProfile,
        Table::Seed,
        Table::CdiBatches,
        Table::InspectorSession,
        Table::EmailList,
        Table::PhoneList,
    ];
}

/// A table of the SQL schema shared by the SQLite and D1 stores (`migrations/`). Both
/// have the columns `tbl, key, version, value` and the primary key `(tbl, key)`, so a
/// statement differs between them only by the table's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqlTable {
    /// `docs`: a rowid table, its key in an index of its own. Reading a document by
    /// key descends two B-trees (the index, then the table); documents of any size.
    Docs,
    /// `idents`: the identifier index, `WITHOUT ROWID`. Its rows are small (a key and
    /// a service id), so the row sits in the key's B-tree: one descent per lookup,
    /// where resolving an identifier and reading its profile took four (see
    /// docs/performance.md).
    Idents,
}

impl SqlTable {
    /// The table's name in SQL.
    pub fn name(self) -> &'static str {
        match self {
            SqlTable::Docs => "docs",
            SqlTable::Idents => "idents",
        }
    }
}

/// Separates the parts of a store key; identifiers may not contain control characters.
pub const SEP: char = '\u{1f}';

/// The key of the profile an identifier entry names: the entry's value is the
/// profile's service id, and every entry's key begins with the workspace, up to the
/// first [`SEP`], as the profile's does (`crate::repo::keys` spells both). `None` for
/// what is not such an entry. A store may keep beside an entry where that profile is
/// (see [`Store::get_named`]).
pub fn named_profile_key(ident_key: &str, value: &[u8]) -> Option<String> {
    let ws = &ident_key[..ident_key.find(SEP)?];
    let id = std::str::from_utf8(value).ok().and_then(crate::ids::ServiceId::parse)?;
    Some(format!("{ws}{SEP}{}", id.as_str()))
}

/// The key of the profile entry `e` (of key `key`) names, unless `held` says the
/// caller has it: the profiles [`Store::get_named`] reads.
pub fn named_wanted(key: &str, e: Option<&Entry>, held: impl Fn(&str) -> bool) -> Option<String> {
    let e = e?;
    if std::str::from_utf8(&e.value).is_ok_and(held) {
        return None;
    }
    named_profile_key(key, &e.value)
}

/// A stored document with its version (starting at 1, incremented by every write).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Version of the document.
    pub version: u64,
    /// Serialized document (JSON).
    pub value: Vec<u8>,
}

/// What a write expects to find, checked atomically at commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// No check (blind write).
    Any,
    /// The key must not exist.
    Absent,
    /// The key must exist with exactly this version.
    Version(u64),
}

/// One write of a change set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Insert or replace a document.
    Put {
        /// The table.
        table: Table,
        /// The key.
        key: String,
        /// The new document.
        value: Vec<u8>,
        /// What must be there now.
        expect: Expect,
    },
    /// Remove a document (a missing key is fine unless `expect` says otherwise).
    Delete {
        /// The table.
        table: Table,
        /// The key.
        key: String,
        /// What must be there now.
        expect: Expect,
    },
}

/// Acknowledges queued jobs as applied: removes the oldest `count` jobs of
/// partition `part`, which must be exactly its jobs through `through`. If another
/// applier already removed them, the commit fails with [`CommitError::Conflict`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueAck {
    /// The partition of the queue the jobs are in (0 on a store of one).
    pub part: u16,
    /// Sequence number of the last job applied.
    pub through: u64,
    /// Number of jobs applied (all jobs of the partition with a sequence number
    /// `<= through`).
    pub count: u64,
}

/// All writes of one request, committed atomically or not at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeSet {
    /// Document writes, applied in order.
    pub ops: Vec<Op>,
    /// Queue jobs consumed by these writes.
    pub ack: Option<QueueAck>,
}

impl ChangeSet {
    /// True when committing would change nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.ack.is_none()
    }
}

/// A backend failure, already turned into text at the store boundary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError(pub String);

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "storage error: {}", self.0)
    }
}

/// Why a commit did not happen. Nothing of the change set is stored in either case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommitError {
    /// An expectation failed: somebody else wrote first. The caller re-reads and retries.
    Conflict,
    /// The backend failed.
    Store(StoreError),
}

impl From<StoreError> for CommitError {
    fn from(e: StoreError) -> Self {
        CommitError::Store(e)
    }
}

/// A queued asynchronous job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedJob {
    /// Increasing sequence number assigned by the store, one order over all partitions.
    pub seq: u64,
    /// The partition of the queue it is in ([`Store::partitions`]; 0 on a store of one).
    pub part: u16,
    /// The serialized job.
    pub job: Vec<u8>,
}

/// A job for one partition of the queue ([`Store::enqueue_parts`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartJob {
    /// Its partition.
    pub part: u16,
    /// The serialized job.
    pub job: Vec<u8>,
    /// The names of the users its operations name (`track::partition::name`), for a
    /// store that finds queued jobs by them ([`Store::finds_by_name`]); else empty.
    pub names: Vec<i64>,
}

/// The storage trait every backend implements.
#[allow(async_fn_in_trait)]
pub trait Store {
    /// Reads one document.
    async fn get(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError>;

    /// Reads documents whose key starts with `prefix`, in key order, at most `limit`.
    async fn scan(&self, table: Table, prefix: &str, limit: usize) -> Result<Vec<(String, Entry)>, StoreError>;

    /// Reads many documents of one table; the answer is in the order of `keys`.
    /// Backends override it when one round trip is cheaper than many.
    async fn get_many(&self, table: Table, keys: &[String]) -> Result<Vec<Option<Entry>>, StoreError> {
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            out.push(self.get(table, k).await?);
        }
        Ok(out)
    }

    /// Identifier entries ([`Table::Ident`]) and the profiles they name, in the order
    /// of `keys`: for each key its entry, if any, with the profile its value names
    /// ([`named_profile_key`]), if that exists and `held` (given the entry's value, a
    /// service id) does not say the caller has it already (then `None`, unread). A
    /// store that keeps beside an entry where its profile was last written reads the
    /// profile there, one B-tree descent fewer than by the profile's key (see
    /// docs/performance.md).
    async fn get_named(
        &self,
        keys: &[String],
        held: impl Fn(&str) -> bool,
    ) -> Result<Vec<Option<(Entry, Option<Entry>)>>, StoreError> {
        let idents = self.get_many(Table::Ident, keys).await?;
        let wanted: Vec<Option<String>> =
            keys.iter().zip(&idents).map(|(k, e)| named_wanted(k, e.as_ref(), &held)).collect();
        let mut profiles =
            self.get_many(Table::Profile, &wanted.iter().flatten().cloned().collect::<Vec<_>>()).await?.into_iter();
        Ok(idents
            .into_iter()
            .zip(wanted)
            .map(|(e, wanted)| Some((e?, wanted.and_then(|_| profiles.next().flatten()))))
            .collect())
    }

    /// Commits all writes atomically, checking every expectation first.
    async fn commit(&self, changes: ChangeSet) -> Result<(), CommitError>;

    /// True when commits of one kind (all with a queue acknowledgement, or all
    /// without) are carried out in the order they were started (see [`start_commit`]),
    /// even while an earlier one has not returned: one writer taking them in turn.
    /// A warehouse sync and the queue applier then hand a batch over before the one
    /// before it has returned. A store that commits on several connections at once
    /// could let the later one go first (false, the default).
    fn commits_in_order(&self) -> bool {
        false
    }

    /// True when jobs are queued as JSON, not MessagePack ([`crate::track::record`]):
    /// a queue that holds text (D1 binds a blob as an array of numbers), or one that
    /// servers of different versions may share during a rolling upgrade (PostgreSQL),
    /// where a server from before MessagePack records would set them aside.
    fn queues_json(&self) -> bool {
        false
    }

    /// Appends a job to the durable queue; once this returns `Ok` the job survives a crash.
    /// Sequence numbers are given in the order jobs are committed: once a job is
    /// read as queued, no job with a lower number is queued after it.
    async fn enqueue(&self, job: Vec<u8>) -> Result<u64, StoreError>;

    /// How many partitions the queue has, fixed when the store was created: each
    /// partition is applied in order, apart from the others (see
    /// [`crate::track::partition`]). A store of one (the default) keeps one order.
    fn partitions(&self) -> u16 {
        1
    }

    /// Appends jobs, each to its partition, in one transaction: all are durable or
    /// none. Their sequence numbers follow each other in the order given. Only a
    /// store of several partitions is given more than one job (the default takes one).
    async fn enqueue_parts(&self, jobs: Vec<PartJob>) -> Result<Vec<u64>, StoreError> {
        let mut jobs = jobs.into_iter();
        match (jobs.next(), jobs.next()) {
            (Some(PartJob { part: 0, job, .. }), None) => Ok(vec![self.enqueue(job).await?]),
            _ => Err(StoreError("this store's queue has one partition".into())),
        }
    }

    /// True for a store that keeps the names of the users each queued job names and
    /// finds jobs by them ([`Store::queued_naming`]): the engine indexing the whole
    /// queue in memory instead costs the decoding of every job and memory in step
    /// with the backlog (on each server, for a store several servers share). The
    /// default: the engine indexes the queue itself.
    fn finds_by_name(&self) -> bool {
        false
    }

    /// For a store that [`Store::finds_by_name`]: the queued jobs whose names include
    /// one of `names`, and those queued without names (by a server of an earlier
    /// version: they may name anyone), in sequence order. A name is a hash: a job
    /// found may name none of those users.
    async fn queued_naming(&self, names: &[i64]) -> Result<Vec<QueuedJob>, StoreError> {
        let _ = names;
        Err(StoreError("this store does not find queued jobs by name".into()))
    }

    /// The oldest jobs not yet applied whose sequence number is above `after` (0: from
    /// the oldest), at most `limit`, in sequence order, of every partition. An applier
    /// passes the last job of a batch it is still committing, to prepare the next
    /// batch meanwhile.
    async fn queued(&self, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError>;

    /// True when no job is queued: every job acknowledged so far is applied. A read
    /// asks this before it looks for its users' jobs, so it must be cheap: the
    /// default reads the oldest job whole ([`Store::queued`]); a store answers
    /// without reading any job's record (during a backlog, about 25 KB each, over
    /// the network on PostgreSQL). It may say false when unsure, never true.
    async fn nothing_queued(&self) -> Result<bool, StoreError> {
        Ok(self.queued(0, 1).await?.is_empty())
    }

    /// Those of the jobs numbered `seqs` (ascending) still queued, in sequence order:
    /// a read that applies its users' jobs early checks they are still there. The
    /// default asks [`Store::queued`] for each; a store across a network answers in
    /// one round trip.
    async fn queued_at(&self, seqs: &[u64]) -> Result<Vec<QueuedJob>, StoreError> {
        let mut out = Vec::new();
        for &seq in seqs {
            if let Some(job) = self.queued(seq.saturating_sub(1), 1).await?.pop().filter(|j| j.seq == seq) {
                out.push(job);
            }
        }
        Ok(out)
    }

    /// As [`Store::queued`], the jobs of partition `part` only.
    async fn queued_in(&self, part: u16, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        let mut jobs = self.queued(after, limit).await?;
        jobs.retain(|j| j.part == part);
        Ok(jobs)
    }

    /// Of the partitions `among` (in order), those that have a job queued, in order:
    /// so that an applier looks into each of those only, not into every one it
    /// holds (an idle server on PostgreSQL queried 64 partitions each pass). The
    /// default answers all of them: the applier then looks into each.
    async fn busy_partitions(&self, among: &[u16]) -> Result<Vec<u16>, StoreError> {
        Ok(among.to_vec())
    }

    /// The partitions this process's applier applies now. A store several servers
    /// share hands each a share of them, on a lease it renews at each call (at most
    /// every second or so) and that another server takes over once it runs out;
    /// other stores answer every partition.
    async fn lease_partitions(&self) -> Result<Vec<u16>, StoreError> {
        Ok((0..self.partitions()).collect())
    }

    /// Gives up this process's leases of partitions (when it stops applying), so
    /// that other servers take them at once.
    async fn release_partitions(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// For a store several servers share: per partition, the sequence number its
    /// appliers have applied through (every job of it at or below is applied). `None`
    /// (the default): only this process applies, and knows.
    async fn applied_cursors(&self) -> Result<Option<Vec<u64>>, StoreError> {
        Ok(None)
    }

    /// The highest sequence number ever assigned (0 before the first job).
    async fn queue_tail(&self) -> Result<u64, StoreError>;

    /// How many jobs are queued, for a store whose sequence numbers have gaps between
    /// the oldest job and the tail (a partitioned queue: each partition's jobs go as
    /// its own cursor moves). `None`, the default: that span is the count.
    async fn queued_count(&self) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    /// Called before a unit of work runs again because its commit found that another
    /// one wrote first (`attempt` counts from 1). A store shared by several
    /// processes waits here a little (growing, at random), so that writers of one
    /// document take turns instead of colliding until they give up; a store with
    /// one writer in-process need not.
    async fn contended(&self, _attempt: u32) {}

    /// Adds one to the shared counter `key` of the rate-limit window starting at
    /// `start` (seconds) and returns its new value, for a store several processes
    /// share, so that they count one limit together; the counter may be forgotten
    /// after `expires` (seconds). `None`: the store keeps no shared counters, and each
    /// process counts in memory (the default).
    async fn count_in_window(&self, _key: &str, _start: i64, _expires: i64) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }
}

/// Most documents one scan returns, whatever the caller asks: a bound every backend
/// applies the same way (SQLite and D1 bind it as a 64-bit integer).
pub const MAX_SCAN: usize = 1 << 31;

/// The key range of a prefix scan, computed once for every backend: keys are text,
/// and `[prefix, prefix + U+10FFFF)` holds exactly the keys that start with the prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    /// First key (inclusive).
    pub start: String,
    /// Bound (exclusive).
    pub end: String,
    /// Most keys to return.
    pub limit: u64,
}

impl KeyRange {
    /// The range of the keys starting with `prefix`, at most `limit` (bounded by [`MAX_SCAN`]).
    pub fn prefix(prefix: &str, limit: usize) -> KeyRange {
        KeyRange { start: prefix.to_string(), end: format!("{prefix}\u{10FFFF}"), limit: limit.min(MAX_SCAN) as u64 }
    }

    /// True when `key` lies in the range (a check for backends whose comparison of
    /// text might differ from Rust's byte order).
    pub fn contains(&self, key: &str) -> bool {
        key.starts_with(&self.start)
    }
}

/// Store-agnostic rules for checking one expectation against the current version.
pub fn expectation_holds(expect: Expect, current: Option<u64>) -> bool {
    match (expect, current) {
        (Expect::Any, _) => true,
        (Expect::Absent, None) => true,
        (Expect::Absent, Some(_)) => false,
        (Expect::Version(v), Some(c)) => v == c,
        (Expect::Version(_), None) => false,
    }
}

/// The version a write produces.
pub fn next_version(current: Option<u64>) -> u64 {
    current.map_or(1, |v| v + 1)
}

/// A commit started and not yet waited for.
pub type StartedCommit<'s> = Pin<Box<dyn Future<Output = Result<(), CommitError>> + 's>>;

/// Starts committing `changes`: the commit is polled once, which hands it to the store
/// (a writer thread's queue, a database connection) without waiting for it; awaiting
/// what this returns gives its outcome.
pub async fn start_commit<'s, S: Store>(store: &'s S, changes: ChangeSet) -> StartedCommit<'s> {
    let mut commit: StartedCommit<'s> = Box::pin(store.commit(changes));
    match std::future::poll_fn(|cx| Poll::Ready(commit.as_mut().poll(cx))).await {
        Poll::Ready(done) => Box::pin(std::future::ready(done)),
        Poll::Pending => commit,
    }
}
