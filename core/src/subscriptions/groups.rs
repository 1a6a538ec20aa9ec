//! Subscription groups as data: id, name and channel. Groups are created by the
//! operator (`engage groups create`), since the API has no endpoint for it.

use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::ids::IdGen;
use crate::ids::WorkspaceName;
use crate::repo::codec::{decode, encode};
use crate::repo::keys::{group_key, workspace_prefix};
use crate::store::{ChangeSet, Expect, Op, Store, StoreError, Table, MAX_SCAN};
use crate::time::Timestamp;

/// The channel a group belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// Email.
    Email,
    /// SMS.
    Sms,
    /// WhatsApp.
    Whatsapp,
    /// RCS.
    Rcs,
    /// LINE.
    Line,
}

impl Channel {
    /// Parses a channel name.
    pub fn parse(text: &str) -> Option<Channel> {
        match text.to_ascii_lowercase().as_str() {
            "email" => Some(Channel::Email),
            "sms" => Some(Channel::Sms),
            "whatsapp" => Some(Channel::Whatsapp),
            "rcs" => Some(Channel::Rcs),
            "line" => Some(Channel::Line),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Email => "email",
            Channel::Sms => "sms",
            Channel::Whatsapp => "whatsapp",
            Channel::Rcs => "rcs",
            Channel::Line => "line",
        }
    }

    /// True for channels addressed by phone number.
    pub fn is_phone(self) -> bool {
        !matches!(self, Channel::Email)
    }
}

/// A subscription group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// Group id (a UUID).
    pub id: String,
    /// Display name.
    pub name: String,
    /// Channel.
    pub channel: Channel,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Reads a group.
pub async fn get<S: Store>(store: &S, ws: &WorkspaceName, id: &str) -> Result<Option<Group>, StoreError> {
    if id.is_empty() || id.chars().any(char::is_control) {
        return Ok(None);
    }
    match store.get(Table::Group, &group_key(ws, id)).await? {
        Some(e) => Ok(Some(decode(&e.value)?)),
        None => Ok(None),
    }
}

/// Every group of a workspace, ordered by id.
pub async fn list<S: Store>(store: &S, ws: &WorkspaceName) -> Result<Vec<Group>, StoreError> {
    store.scan(Table::Group, &workspace_prefix(ws), MAX_SCAN).await?.iter().map(|(_, e)| decode(&e.value)).collect()
}

/// Creates a group and returns it.
pub async fn create<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    name: &str,
    channel: Channel,
    now: Timestamp,
    ids: &mut IdGen,
) -> Result<Group, ApiError> {
    let group = Group { id: ids.uuid(), name: checked_name(name)?, channel, created_at: now };
    let op =
        Op::Put { table: Table::Group, key: group_key(ws, &group.id), value: encode(&group)?, expect: Expect::Absent };
    store.commit(ChangeSet { ops: vec![op], ack: None }).await?;
    Ok(group)
}

fn checked_name(name: &str) -> Result<String, ApiError> {
    let name = name.trim();
    if name.is_empty() || name.len() > 255 {
        return Err(ApiError::bad("a group name must be 1 to 255 characters"));
    }
    Ok(name.to_string())
}

/// Makes a group with a fixed id (a fixtures file's): created when new, given this
/// name and channel when it exists (a group keeps its creation time).
pub async fn create_with_id<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    id: &str,
    name: &str,
    channel: Channel,
    now: Timestamp,
) -> Result<Group, ApiError> {
    let key = group_key(ws, id);
    let mut group = Group { id: id.to_string(), name: checked_name(name)?, channel, created_at: now };
    let expect = match store.get(Table::Group, &key).await? {
        None => Expect::Absent,
        Some(entry) => {
            let old: Group = decode(&entry.value)?;
            group.created_at = old.created_at;
            if old == group {
                return Ok(group);
            }
            Expect::Version(entry.version)
        }
    };
    let op = Op::Put { table: Table::Group, key, value: encode(&group)?, expect };
    store.commit(ChangeSet { ops: vec![op], ack: None }).await?;
    Ok(group)
}
