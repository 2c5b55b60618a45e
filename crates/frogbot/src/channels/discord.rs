//! `[channels.discord]`: not built yet.

use super::ServeChannel;
use crate::config::ConfigError;

/// The keys of `[channels.discord]`.
#[derive(Clone, Debug)]
pub struct DiscordConfig {}

/// Checks the table.
pub(crate) fn parse(_value: &toml::Value) -> Result<DiscordConfig, ConfigError> {
    Err(ConfigError(
        "`channels.discord`: this build has no adapter for this channel yet".into(),
    ))
}

/// Builds the channel.
pub(crate) async fn open(_config: DiscordConfig) -> Result<Box<dyn ServeChannel>, crate::Error> {
    Err(
        ConfigError("`channels.discord`: this build has no adapter for this channel yet".into())
            .into(),
    )
}
