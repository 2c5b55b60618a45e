//! The one shape of a channel adapter's engine glue: what a host (`frogbot serve`, or a program of
//! its own) does with any adapter. Behind the `adapter` feature (it names axum's `Router`).

use tokio_util::sync::CancellationToken;

use crate::{Channel, EngineHandle};

/// A connected channel adapter. Every adapter crate's `channel::connect(config)` returns one
/// (after checking the configuration and learning what it needs from the platform, e.g. the
/// bot's own id); the host then registers [`Adapter::channel`] with the engine, merges
/// [`Adapter::routes`] into its HTTP server, and calls [`Adapter::start`].
pub trait Adapter: Send + Sync {
    /// The platform name (as in `ChannelRef::platform`).
    fn platform(&self) -> &'static str;

    /// What the engine needs: the question hooks, the identity hook, the access check and the
    /// outbox. Register it before the engine starts.
    fn channel(&self) -> Channel;

    /// The HTTP routes this adapter receives on (webhooks, interactivity), delivering into
    /// `engine`; `None` when it receives otherwise. Building them has no side effect: nothing is
    /// registered with the platform until [`Adapter::start`].
    fn routes(&self, _engine: &EngineHandle) -> Option<axum::Router> {
        None
    }

    /// Starts receiving in the background (gateway, polling, sync, socket; registering a webhook
    /// with the platform), delivering into `engine`. The task ends soon after `shutdown` is
    /// cancelled.
    fn start(
        &self,
        _engine: EngineHandle,
        _shutdown: CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        None
    }
}
