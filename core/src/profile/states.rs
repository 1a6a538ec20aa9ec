//! The values of the subscription state machines as stored and sent. A leaf module:
//! the profile document stores them, and `crate::subscriptions::state` moves them.

use serde::{Deserialize, Serialize};

/// Global email (or push) subscription state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GlobalState {
    /// Explicitly opted in.
    OptedIn,
    /// Subscribed (the default once known).
    Subscribed,
    /// Unsubscribed from every message of the channel.
    Unsubscribed,
}

impl GlobalState {
    /// Parses `opted_in`, `subscribed` or `unsubscribed`.
    pub fn parse(text: &str) -> Option<GlobalState> {
        match text {
            "opted_in" => Some(GlobalState::OptedIn),
            "subscribed" => Some(GlobalState::Subscribed),
            "unsubscribed" => Some(GlobalState::Unsubscribed),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            GlobalState::OptedIn => "opted_in",
            GlobalState::Subscribed => "subscribed",
            GlobalState::Unsubscribed => "unsubscribed",
        }
    }
}

/// A stored subscription-group status (what was last set; `Unknown` is "never set").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupState {
    /// Subscribed to the group.
    Subscribed,
    /// Unsubscribed from the group.
    Unsubscribed,
}

impl GroupState {
    /// Parses `subscribed` or `unsubscribed`.
    pub fn parse(text: &str) -> Option<GroupState> {
        match text {
            "subscribed" => Some(GroupState::Subscribed),
            "unsubscribed" => Some(GroupState::Unsubscribed),
            _ => None,
        }
    }
}
