//! The error of a configuration that cannot start the server ([`ConfigError`]), shared by
//! `config` and the sections it hands to their own modules (`channels`, `telemetry`), which
//! therefore do not depend on `config` itself.

use std::path::PathBuf;

/// A configuration that cannot start the server: one line naming where (the file and line, or the
/// environment variable), the key, and what is wrong, e.g.
/// ``frogbot.toml line 3: `max_steps`: invalid type: string "x", expected u32``.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub struct ConfigError {
    /// The key as a path, e.g. `channels.slack.mode` or `models[0].provider`.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// The configuration file.
    pub file: Option<PathBuf>,
    /// The line in the file (from 1).
    pub line: Option<usize>,
    /// The environment variable the value came from.
    pub env: Option<&'static str>,
}

impl ConfigError {
    /// An error about the configuration as a whole.
    pub fn new(message: impl std::fmt::Display) -> Self {
        Self {
            key: None,
            message: message.to_string(),
            file: None,
            line: None,
            env: None,
        }
    }

    /// An error about `key` (a path like `channels.slack.mode`).
    pub fn key(key: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Self {
            key: Some(key.into()),
            ..Self::new(message)
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.file, self.line, self.env) {
            (_, _, Some(var)) => write!(f, "{var}: ")?,
            (Some(file), Some(line), None) => write!(f, "{} line {line}: ", file.display())?,
            (Some(file), None, None) => write!(f, "{}: ", file.display())?,
            (None, Some(line), None) => write!(f, "line {line}: ")?,
            (None, None, None) => f.write_str("configuration: ")?,
        }
        if let Some(key) = &self.key {
            write!(f, "`{key}`: ")?;
        }
        // One line, whatever the message.
        let mut lines = self
            .message
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty());
        if let Some(first) = lines.next() {
            f.write_str(first)?;
        }
        for l in lines {
            write!(f, " {l}")?;
        }
        Ok(())
    }
}

/// What a configuration needing a cargo feature this binary was built without is told.
pub(crate) fn not_built(feature: &str) -> String {
    format!(
        "this frogbot was built without the `{feature}` feature (rebuild with --features {feature})"
    )
}
