//! Downloads of the files people post: one lazily built guarded client per channel
//! ([`frogbot_net::GuardedClient`], public addresses only unless the policy says otherwise), a
//! GET with the platform's own authentication (kept to the first URL's origin), and the body as
//! a [`FileStream`]. Every adapter's `ChannelOutbox::open_file` goes through it.

use std::sync::OnceLock;

use futures::StreamExt;

use frogbot_model::BoxError;
use frogbot_net::GuardedClient;

use crate::FileStream;

pub use frogbot_net::FetchPolicy;

/// A channel's downloads ([`Downloads::open`]).
#[derive(Debug)]
pub struct Downloads {
    policy: FetchPolicy,
    client: OnceLock<Result<GuardedClient, String>>,
}

impl Downloads {
    /// Downloads under `policy` ([`FetchPolicy::for_files`] for a platform's CDN).
    pub fn new(policy: FetchPolicy) -> Self {
        Self {
            policy,
            client: OnceLock::new(),
        }
    }

    /// The bytes at `url`, fetched with `headers` (e.g. `Authorization`), as they arrive: a
    /// status other than 2xx, a refused address, a body past the policy's size or time is an
    /// error.
    pub async fn open(&self, url: &str, headers: &[(&str, &str)]) -> Result<FileStream, BoxError> {
        self.open_expecting(url, headers, None).await
    }

    /// [`Downloads::open`] of a file of `media_type`: a web page answered in its place (Slack
    /// answers a sign-in page, `200 text/html`, to a request its token may not make) is an
    /// error, not the file.
    pub async fn open_expecting(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        media_type: Option<&str>,
    ) -> Result<FileStream, BoxError> {
        let client = self
            .client
            .get_or_init(|| GuardedClient::new(self.policy.clone()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| BoxError::from(e.clone()))?;
        let response = client
            .get_with_headers(url, headers)
            .await?
            .error_for_status()?;
        let page = response.content_type().starts_with("text/html");
        if page && media_type.is_some_and(|m| !m.starts_with("text/html")) {
            return Err(format!(
                "{url} answered with a web page instead of the file (is the token allowed to read files?)"
            )
            .into());
        }
        Ok(response
            .into_stream()
            .map(|r| r.map_err(BoxError::from))
            .boxed())
    }
}

/// A file already read whole (a client that reads media whole, as matrix-sdk does), handed on
/// in 64 KiB pieces as any download.
pub fn from_bytes(bytes: Vec<u8>) -> FileStream {
    let pieces: Vec<Result<Vec<u8>, BoxError>> =
        bytes.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
    futures::stream::iter(pieces).boxed()
}

impl Default for Downloads {
    fn default() -> Self {
        Self::new(FetchPolicy::for_files())
    }
}
