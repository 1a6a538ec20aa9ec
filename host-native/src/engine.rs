//! The engine a server's connections and background threads share.

use std::sync::Arc;

use engage_core::Engine;

use crate::store::NativeStore;

/// The engine shared by all connections.
pub type SharedEngine = Arc<Engine<NativeStore>>;
