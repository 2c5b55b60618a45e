//! `[[mcp]]` in `frogbot serve`: the servers' tools ([`frogbot_mcp::McpHub`]) offered to the
//! agent at every step, per channel the servers its `mcp = […]` names (every server's without).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use frogbot_core::agent::{Engine, Tool, ToolSource};
use frogbot_mcp::McpHub;
use tokio_util::sync::CancellationToken;

use crate::config::Config;

/// How long `frogbot serve` waits for the servers before it serves.
const READY_WAIT: Duration = Duration::from_secs(10);

/// The hub's tools as a [`ToolSource`].
pub(crate) struct McpTools {
    hub: McpHub,
    /// Per platform, the servers its turns get.
    selection: HashMap<String, Vec<String>>,
    /// Stops the hub's connection tasks ([`Self::shutdown`]).
    stop: CancellationToken,
}

impl McpTools {
    /// Starts every `[[mcp]]` server and gives `engine` their tools (none without any server).
    /// Serving starts at once: after up to [`READY_WAIT`], a server still starting offers its
    /// tools when it is up.
    pub(crate) async fn attach(
        config: &Config,
        engine: Engine,
    ) -> Result<(Engine, Option<Arc<Self>>), crate::config::ConfigError> {
        if config.mcp.is_empty() {
            return Ok((engine, None));
        }
        let mut selection = HashMap::new();
        for (name, value) in &config.channels {
            if let Some(ids) = crate::channels::mcp_selection(name, value)? {
                selection.insert(name.clone(), ids);
            }
        }
        let stop = CancellationToken::new();
        let hub = McpHub::start(config.mcp.clone(), stop.clone());
        let tools = Arc::new(Self {
            hub,
            selection,
            stop,
        });
        if let Err(e) = tools.hub.wait_ready(READY_WAIT).await {
            tracing::warn!(servers = ?e.0, "mcp servers not connected yet; their tools come when they are");
        }
        Ok((engine.with_tool_source(tools.clone()), Some(tools)))
    }

    /// Stops every server.
    pub(crate) async fn shutdown(&self) {
        self.hub.shutdown().await;
        self.stop.cancel();
    }
}

impl ToolSource for McpTools {
    fn tools(&self, platform: Option<&str>) -> Vec<Arc<dyn Tool>> {
        let selection = platform.and_then(|p| self.selection.get(p));
        self.hub.tools(selection.map(Vec::as_slice))
    }
}
