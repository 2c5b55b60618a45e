//! `[channels.telegram]`: not built yet.

use super::ServeChannel;
use crate::config::ConfigError;

/// The keys of `[channels.telegram]`.
#[derive(Clone, Debug)]
pub struct TelegramConfig {}

/// Checks the table.
pub(crate) fn parse(_value: &toml::Value) -> Result<TelegramConfig, ConfigError> {
    Err(ConfigError(
        "`channels.telegram`: this build has no adapter for this channel yet".into(),
    ))
}

/// Builds the channel.
pub(crate) async fn open(_config: TelegramConfig) -> Result<Box<dyn ServeChannel>, crate::Error> {
    Err(
        ConfigError("`channels.telegram`: this build has no adapter for this channel yet".into())
            .into(),
    )
}
