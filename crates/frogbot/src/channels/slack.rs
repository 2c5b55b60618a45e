//! `[channels.slack]`: not built yet.

use super::ServeChannel;
use crate::config::ConfigError;

/// The keys of `[channels.slack]`.
#[derive(Clone, Debug)]
pub struct SlackConfig {}

/// Checks the table.
pub(crate) fn parse(_value: &toml::Value) -> Result<SlackConfig, ConfigError> {
    Err(ConfigError(
        "`channels.slack`: this build has no adapter for this channel yet".into(),
    ))
}

/// Builds the channel.
pub(crate) async fn open(_config: SlackConfig) -> Result<Box<dyn ServeChannel>, crate::Error> {
    Err(
        ConfigError("`channels.slack`: this build has no adapter for this channel yet".into())
            .into(),
    )
}
