//! The metrics an adapter records about its platform's API (`frogbot_core::metrics` lists them
//! with the engine's and describes them). Through the [`metrics`] facade only: without an
//! installed recorder each call is a no-op, and so is every call without the `adapter` feature
//! (an adapter's client built for tests or tools, outside a host, counts nothing).

/// Calls of a platform's API (each try of a retried call), `{platform, method, status}`: `method`
/// is the API's own name (`chat.postMessage`, `sendMessage`, `create_message`, `send`); `status`
/// is the HTTP status (`200`, `429`, `503`), or the error kind when there was none (`timeout`,
/// `network`, or the platform's error code).
pub const PLATFORM_API_CALLS: &str = "frogbot_platform_api_calls_total";
/// Waits before trying a platform call again because the platform limited the rate (a 429 or
/// its equivalent), `{platform}`.
pub const PLATFORM_RATE_LIMIT_WAITS: &str = "frogbot_platform_rate_limit_waits_total";

/// A platform API call (one try) of `method` ended with `status` (an HTTP status, or an error
/// kind when there was none): see [`PLATFORM_API_CALLS`]. The adapters' client funnels call this.
pub fn platform_call(platform: &'static str, method: &str, status: &str) {
    #[cfg(not(feature = "adapter"))]
    let _ = (platform, method, status);
    #[cfg(feature = "adapter")]
    metrics::counter!(
        PLATFORM_API_CALLS,
        "platform" => platform,
        "method" => method.to_owned(),
        "status" => status.to_owned()
    )
    .increment(1);
}

/// A platform call waits before its next try because the platform limited the rate.
pub fn platform_rate_limit_wait(platform: &'static str) {
    #[cfg(not(feature = "adapter"))]
    let _ = platform;
    #[cfg(feature = "adapter")]
    metrics::counter!(PLATFORM_RATE_LIMIT_WAITS, "platform" => platform).increment(1);
}
