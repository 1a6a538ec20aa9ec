//! A queued job's bytes: the record [`crate::store::Store::enqueue`] keeps until the
//! job is applied. Its first byte says its format, so that a queue written by one
//! version of Engage is applied by the next, whatever is still in it at an upgrade:
//!
//! - `{`: the job as JSON, what every version before this format wrote (version 0);
//!   still written where the store asks for it ([`Store::queues_json`]: D1, whose
//!   queue holds text, and PostgreSQL, which servers of two versions may share);
//! - [`MSGPACK`]: the job as MessagePack with field names (`rmp-serde`'s named
//!   form, so a field added later with a default still reads old records).
//!
//! Encoding the job as JSON was a sixth of an acknowledgement's instructions
//! (string escaping, number formatting); MessagePack writes strings as their
//! bytes, and reads back faster when the job is applied.

use serde::{Deserialize, Serialize};

use super::barrier::Barrier;
use super::parse::TrackJob;
use crate::repo::codec;
use crate::store::{Store, StoreError};

/// The first byte of a MessagePack record. A JSON record starts with `{`.
pub const MSGPACK: u8 = 1;

/// The record of `job` for `store`'s queue.
pub fn encode<S: Store>(store: &S, job: &TrackJob) -> Result<Vec<u8>, StoreError> {
    encode_as(job, store.queues_json())
}

/// The record of `job`: JSON when `json`, else MessagePack.
pub fn encode_as(job: &TrackJob, json: bool) -> Result<Vec<u8>, StoreError> {
    if json {
        return codec::encode(job);
    }
    let mut out = Vec::with_capacity(64 * job.ops.len());
    out.push(MSGPACK);
    job.serialize(&mut rmp_serde::Serializer::new(&mut out).with_struct_map())
        .map_err(|e| StoreError(format!("cannot encode a job: {e}")))?;
    Ok(out)
}

/// The job of a record in any format written so far; an unknown or corrupt record
/// is a storage error (the applier sets it aside), never a panic.
pub fn decode(record: &[u8]) -> Result<TrackJob, StoreError> {
    decode_as(record)
}

/// A record in any format written so far, read as `T` (the job, or a part of it).
fn decode_as<T: serde::de::DeserializeOwned>(record: &[u8]) -> Result<T, StoreError> {
    match record.first() {
        Some(&MSGPACK) => {
            rmp_serde::from_slice(&record[1..]).map_err(|e| StoreError(format!("corrupt job record: {e}")))
        }
        Some(b'{') => codec::decode(record),
        Some(other) => Err(StoreError(format!("job record of unknown format (first byte {other:#04x})"))),
        None => Err(StoreError("empty job record".into())),
    }
}

/// Only a record's barrier ([`super::barrier`]), in any format written so far: its
/// operations are skimmed past, not built (the applier builds them once, when it
/// applies the job). Errors as [`decode`] does.
pub fn barrier(record: &[u8]) -> Result<Option<Barrier>, StoreError> {
    /// A job's record read for its barrier alone; every other field is skipped.
    #[derive(Deserialize)]
    struct BarrierOf {
        #[serde(default)]
        barrier: Option<Barrier>,
    }
    Ok(decode_as::<BarrierOf>(record)?.barrier)
}

/// The record as text for an operator (a job set aside): JSON for any record that
/// decodes, else its own bytes as UTF-8 text when they are, else `None`.
pub fn text(record: &[u8]) -> Option<String> {
    match decode(record) {
        Ok(job) => codec::encode(&job).ok().and_then(|b| String::from_utf8(b).ok()),
        Err(_) => std::str::from_utf8(record).ok().map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, UserAlias, WorkspaceName};
    use crate::profile::custom::CustomOp;
    use crate::profile::states::{GlobalState, GroupState};
    use crate::store::memory::MemoryStore;
    use crate::subscriptions::groups::Channel;
    use crate::time::Timestamp;
    use crate::track::parse::{AttrUpdate, Target, TrackOp};

    /// A job with every kind of operation, update and value a request can queue.
    fn every_kind() -> TrackJob {
        let target = |ident| Target { ident, create: true };
        let custom = |k: &str, op| AttrUpdate::Custom(k.into(), op);
        let updates = vec![
            AttrUpdate::Email(Some(Email::parse("ann@example.com").unwrap())),
            AttrUpdate::Email(None),
            AttrUpdate::Phone(Some(Phone::parse("+15555550100").unwrap())),
            AttrUpdate::Standard("first_name".into(), json!("Ann \"Quote\" \\ é 😀 \u{7}")),
            AttrUpdate::Standard("dob".into(), json!(null)),
            AttrUpdate::EmailSubscribe(GlobalState::OptedIn),
            AttrUpdate::PushSubscribe(GlobalState::Unsubscribed),
            AttrUpdate::Group { id: "g-1".into(), channel: Channel::Sms, state: GroupState::Subscribed },
            custom("s", CustomOp::Set(json!([u64::MAX, i64::MIN, -1, 0, 9.99, 1e300, -0.5, true, "x"]))),
            custom("r", CustomOp::Remove),
            custom("n", CustomOp::Inc(-7)),
            custom("a", CustomOp::Array { add: vec![json!("b"), json!(2)], remove: vec![json!(null)] }),
            custom("o", CustomOp::Object(json!({"deep": {"list": [1, {"k": "v"}], "empty": {}}}))),
            custom("os", CustomOp::Objects(vec![json!({"id": 1}), json!({})])),
            custom("oa", CustomOp::ObjectsAdd(vec![json!({"id": 2})])),
            custom("or", CustomOp::ObjectsRemove(vec![("id".into(), json!(1))])),
            custom("ou", CustomOp::ObjectsUpdate(vec![("id".into(), json!(2), json!({"n": 3}))])),
        ];
        let alias = UserAlias { alias_name: "a 1".into(), alias_label: "crm".into() };
        TrackJob {
            workspace: WorkspaceName::parse("w").unwrap(),
            at: Timestamp(1_700_000_000_123),
            ops: vec![
                TrackOp::Attributes {
                    target: target(Identifier::External(ExternalId::parse("u1").unwrap())),
                    merge_objects: true,
                    updates,
                },
                TrackOp::Attributes {
                    target: Target { ident: Identifier::Alias(alias), create: false },
                    merge_objects: false,
                    updates: vec![],
                },
                TrackOp::Event {
                    target: target(Identifier::Email(Email::parse("b@example.com").unwrap())),
                    name: "played".into(),
                    time: Timestamp(-1),
                },
                TrackOp::Purchase {
                    target: target(Identifier::Service(ServiceId::parse("0123456789abcdef01234567").unwrap())),
                    product_id: "sku-1".into(),
                    price: 0.1 + 0.2,
                    quantity: u64::MAX,
                    time: Timestamp(i64::MAX),
                },
                TrackOp::Event {
                    target: target(Identifier::Phone(Phone::parse("+15555550101").unwrap())),
                    name: String::new(),
                    time: Timestamp(0),
                },
            ],
            barrier: Some(Barrier::Main { stubs: vec![crate::track::barrier::StubAt { part: 3, offset: 2 }] }),
        }
    }

    #[test]
    fn a_job_reads_back_the_same_from_messagepack_and_from_json() {
        let job = every_kind();
        let packed = encode(&MemoryStore::new(), &job).unwrap();
        assert_eq!(packed[0], MSGPACK);
        assert_eq!(decode(&packed).unwrap(), job);
        // What versions before MessagePack records queued, and what text-only queues hold.
        let json = serde_json::to_vec(&job).unwrap();
        assert_eq!(json[0], b'{');
        assert_eq!(decode(&json).unwrap(), job);
        assert!(packed.len() < json.len(), "{} bytes packed, {} as JSON", packed.len(), json.len());
    }

    #[test]
    fn a_record_s_barrier_reads_alone_as_the_whole_job_has_it() {
        let mut job = every_kind();
        for barrier in [job.barrier.clone(), Some(Barrier::Stub { main: -4 }), None] {
            job.barrier = barrier.clone();
            for json in [false, true] {
                let record = encode_as(&job, json).unwrap();
                assert_eq!(super::barrier(&record).unwrap(), barrier, "json: {json}");
                assert_eq!(decode(&record).unwrap().barrier, barrier);
            }
        }
        let packed = encode_as(&job, false).unwrap();
        for cut in [&packed[..1], &packed[..packed.len() / 2], b"{", &[7, 1], &[]] {
            assert!(barrier(cut).is_err(), "{cut:?}");
        }
    }

    #[test]
    fn a_record_is_shown_to_an_operator_as_the_jobs_json() {
        let job = every_kind();
        let shown = text(&encode(&MemoryStore::new(), &job).unwrap()).unwrap();
        assert_eq!(serde_json::from_str::<TrackJob>(&shown).unwrap(), job);
        assert_eq!(text(b"{\"not\": \"a job\"}").as_deref(), Some("{\"not\": \"a job\"}"));
        assert_eq!(text(&[MSGPACK, 0xc1]), None, "not UTF-8 and not a job: shown as hex by the caller");
    }

    #[test]
    fn a_record_that_is_not_a_job_is_an_error_not_a_panic() {
        let packed = encode(&MemoryStore::new(), &every_kind()).unwrap();
        let not_jobs: Vec<Vec<u8>> =
            vec![vec![], vec![MSGPACK], vec![0], vec![2, 0x80], b"[1]".to_vec(), b"{".to_vec()];
        for r in &not_jobs {
            assert!(decode(r).is_err(), "{r:?}");
        }
        // Every truncation of a real record (MessagePack says its lengths first).
        for n in 1..packed.len() {
            assert!(decode(&packed[..n]).is_err(), "cut at {n}");
        }
        // Every byte flipped in turn: a flip inside a string or number can still
        // give a job; none may panic.
        for i in 1..packed.len() {
            let mut r = packed.clone();
            r[i] ^= 0xff;
            let _ = decode(&r);
        }
        assert!(decode(&[7, 1, 2]).unwrap_err().0.contains("unknown format (first byte 0x07)"));
    }
}
