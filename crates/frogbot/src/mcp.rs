//! `[[mcp]]` in `frogbot serve`: the servers' tools ([`frogbot_mcp::McpHub`]) offered to the
//! agent at every step, per channel the servers its `mcp = […]` names (every server's without).

use std::collections::HashMap;
use std::sync::Arc;

use frogbot_core::agent::{Tool, ToolSource};
use frogbot_mcp::McpHub;

use crate::config::Config;

/// The hub's tools as a [`ToolSource`].
pub(crate) struct McpTools {
    hub: McpHub,
    /// Per platform, the servers its turns get.
    selection: HashMap<String, Vec<String>>,
}

impl McpTools {
    /// Starts every `[[mcp]]` server (in the background: a server that is slow or down offers
    /// no tools until it is up); `None` without any.
    pub(crate) fn start(
        config: &Config,
        stop: tokio_util::sync::CancellationToken,
    ) -> Result<Option<Self>, crate::config::ConfigError> {
        if config.mcp.is_empty() {
            return Ok(None);
        }
        let mut selection = HashMap::new();
        for (name, value) in &config.channels {
            if let Some(ids) = crate::channels::mcp_selection(name, value)? {
                selection.insert(name.clone(), ids);
            }
        }
        let hub = McpHub::start(config.mcp.clone(), stop);
        Ok(Some(Self { hub, selection }))
    }

    /// The hub (to wait for it, or stop it).
    pub(crate) fn hub(&self) -> &McpHub {
        &self.hub
    }
}

impl ToolSource for McpTools {
    fn tools(&self, platform: Option<&str>) -> Vec<Arc<dyn Tool>> {
        let selection = platform.and_then(|p| self.selection.get(p));
        self.hub.tools(selection.map(Vec::as_slice))
    }
}
