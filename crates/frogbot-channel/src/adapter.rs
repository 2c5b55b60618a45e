//! The one shape of a channel adapter's engine glue: what a host (`frogbot serve`, or a program of
//! its own) does with any adapter. Behind the `adapter` feature (it names axum's `Router`).

use std::sync::Arc;

use frogbot_model::{ChannelQuestions, IdentityResolver};
use tokio_util::sync::CancellationToken;

use crate::{AccessCheck, Channel, ChannelOutbox, EngineHandle};

/// A connected channel adapter. Every adapter crate's `channel::connect(config)` returns one
/// (after checking the configuration and learning what it needs from the platform, e.g. the
/// bot's own id); the host then registers [`Adapter::channel`] with the engine, merges
/// [`Adapter::routes`] into its HTTP server, and calls [`Adapter::start`].
///
/// An adapter gives its parts one by one ([`Adapter::questions`], [`Adapter::identity`],
/// [`Adapter::access`], [`Adapter::outbox`]); [`Adapter::channel`] puts them together the same
/// way for every platform.
pub trait Adapter: Send + Sync {
    /// The platform name (as in `ChannelRef::platform`).
    fn platform(&self) -> &'static str;

    /// The question hooks: the platform's own controls for the agent's questions.
    fn questions(&self) -> Arc<dyn ChannelQuestions>;

    /// The identity hook: a platform participant as a FrogBot user.
    fn identity(&self) -> Arc<dyn IdentityResolver>;

    /// The agent's access check.
    fn access(&self) -> Arc<dyn AccessCheck>;

    /// Where the agent's replies are posted.
    fn outbox(&self) -> Arc<dyn ChannelOutbox>;

    /// What the engine needs: the platform's name, its question hooks, identity hook, access
    /// check and outbox, from the methods above. Register it before the engine starts.
    fn channel(&self) -> Channel {
        Channel {
            platform: self.platform().into(),
            questions: Some(self.questions()),
            identity: self.identity(),
            access: self.access(),
            outbox: Some(self.outbox()),
        }
    }

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
