//! `[channels.matrix]`: not built yet.

use super::ServeChannel;
use crate::config::ConfigError;

/// The keys of `[channels.matrix]`.
#[derive(Clone, Debug)]
pub struct MatrixConfig {}

/// Checks the table.
pub(crate) fn parse(_value: &toml::Value) -> Result<MatrixConfig, ConfigError> {
    Err(ConfigError(
        "`channels.matrix`: this build has no adapter for this channel yet".into(),
    ))
}

/// Builds the channel.
pub(crate) async fn open(_config: MatrixConfig) -> Result<Box<dyn ServeChannel>, crate::Error> {
    Err(
        ConfigError("`channels.matrix`: this build has no adapter for this channel yet".into())
            .into(),
    )
}
