//! `[telemetry]`: the spans of `frogbot serve` (`turn`, `step`, tool calls, each with its
//! `chat_id` / `turn_id`) exported to an OpenTelemetry collector over OTLP/HTTP with protobuf
//! bodies. Built with the cargo feature `otlp` (off by default); a build without it refuses a
//! `[telemetry]` table.
//!
//! ```toml
//! [telemetry]
//! otlp_endpoint = "http://collector:4318"   # the spans go to {otlp_endpoint}/v1/traces
//! service_name = "frogbot"                  # the resource's service.name (default "frogbot")
//! ```
//!
//! The export is a `tracing` layer beside the log output; the same `RUST_LOG` filter decides
//! which spans exist. The SDK batches spans on its own thread; [`TraceExport::shutdown`] sends
//! what is left when `serve` stops. What it must not do: decide what is traced (the spans are the
//! engine's and the server's own), or block a request on the collector.

use serde::Deserialize;

use crate::config_error::ConfigError;

/// The `service.name` when `[telemetry]` names none.
pub const DEFAULT_SERVICE_NAME: &str = "frogbot";

/// The keys of `[telemetry]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`http://collector:4318`); absent: no export.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of the exported resource.
    #[serde(default = "default_service_name")]
    pub service_name: String,
}

fn default_service_name() -> String {
    DEFAULT_SERVICE_NAME.into()
}

/// Where the spans are posted: `{otlp_endpoint}/v1/traces` (the path of the OTLP/HTTP spec).
pub fn traces_url(otlp_endpoint: &str) -> String {
    format!("{}/v1/traces", otlp_endpoint.trim_end_matches('/'))
}

/// Checks `[telemetry]` (`otlp_built`: whether this binary has the `otlp` feature).
pub(crate) fn validate(
    telemetry: Option<&TelemetryConfig>,
    otlp_built: bool,
) -> Result<(), ConfigError> {
    let Some(t) = telemetry else {
        return Ok(());
    };
    if !otlp_built {
        return Err(ConfigError::key(
            "telemetry",
            crate::config_error::not_built("otlp"),
        ));
    }
    if let Some(endpoint) = &t.otlp_endpoint {
        let ok = url::Url::parse(endpoint)
            .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
        if !ok {
            return Err(ConfigError::key(
                "telemetry.otlp_endpoint",
                format!("{endpoint:?} is not an http:// or https:// URL"),
            ));
        }
    }
    if t.service_name.trim().is_empty() {
        return Err(ConfigError::key(
            "telemetry.service_name",
            "must not be empty",
        ));
    }
    Ok(())
}

/// The export layer, for a subscriber built on [`tracing_subscriber::Registry`].
pub type ExportLayer =
    Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync + 'static>;

/// The running export (nothing when `[telemetry]` sets no endpoint): call [`Self::shutdown`]
/// when serving ends so the last spans are sent.
#[derive(Debug, Default)]
pub struct TraceExport {
    #[cfg(feature = "otlp")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl TraceExport {
    /// Sends the spans not sent yet and stops the exporter: blocking, up to the SDK's timeout;
    /// call it outside the async runtime, before that runtime is dropped. A collector that
    /// cannot be reached is reported on stderr, not an error: serving has ended anyway.
    pub fn shutdown(self) {
        #[cfg(feature = "otlp")]
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            eprintln!("frogbot: telemetry: the last spans were not sent: {e}");
        }
    }
}

/// The layer exporting the spans of `telemetry` (none without an endpoint, or without the `otlp`
/// feature, where `validate` has refused the table already), and its handle. The requests to
/// the collector run on `runtime`, which must outlive [`TraceExport::shutdown`].
#[cfg_attr(not(feature = "otlp"), expect(unused_variables))]
pub fn layer(
    telemetry: Option<&TelemetryConfig>,
    runtime: &tokio::runtime::Handle,
) -> Result<(Option<ExportLayer>, TraceExport), ConfigError> {
    match telemetry {
        #[cfg(feature = "otlp")]
        Some(TelemetryConfig {
            otlp_endpoint: Some(endpoint),
            service_name,
        }) => otlp::layer(endpoint, service_name, runtime),
        _ => Ok((None, TraceExport::default())),
    }
}

#[cfg(feature = "otlp")]
mod otlp {
    use std::time::Duration;

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
    use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::SdkTracerProvider;

    use super::{ExportLayer, TraceExport, traces_url};
    use crate::config_error::ConfigError;

    /// How long one export request may take.
    const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

    /// reqwest's async client, its requests run on serve's runtime: the SDK exports from a
    /// thread of its own, where the client would find no Tokio reactor.
    #[derive(Debug)]
    struct OnRuntime {
        client: reqwest::Client,
        runtime: tokio::runtime::Handle,
    }

    #[async_trait::async_trait]
    impl HttpClient for OnRuntime {
        async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
            let request = reqwest::Request::try_from(request)?;
            let client = self.client.clone();
            let sent = self.runtime.spawn(async move {
                let response = client.execute(request).await?;
                let status = response.status();
                let headers = response.headers().clone();
                let body = response.bytes().await?;
                let mut out = Response::builder().status(status).body(body)?;
                *out.headers_mut() = headers;
                Ok::<_, HttpError>(out)
            });
            sent.await?
        }
    }

    pub(super) fn layer(
        endpoint: &str,
        service_name: &str,
        runtime: &tokio::runtime::Handle,
    ) -> Result<(Option<ExportLayer>, TraceExport), ConfigError> {
        let failed = |e: &dyn std::fmt::Display| ConfigError::key("telemetry.otlp_endpoint", e);
        // rustls needs the provider before a client is built.
        frogbot_openai::install_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| failed(&e))?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(OnRuntime {
                client,
                runtime: runtime.clone(),
            })
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(traces_url(endpoint))
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| failed(&e))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                Resource::builder()
                    .with_service_name(service_name.to_string())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("frogbot");
        let layer: ExportLayer = Box::new(tracing_opentelemetry::layer().with_tracer(tracer));
        Ok((
            Some(layer),
            TraceExport {
                provider: Some(provider),
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{TelemetryConfig, traces_url, validate};

    fn table(text: &str) -> TelemetryConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_telemetry_table_needs_the_otlp_feature() {
        let t = table("otlp_endpoint = \"http://collector:4318\"");
        let e = validate(Some(&t), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "configuration: `telemetry`: this frogbot was built without the `otlp` feature \
             (rebuild with --features otlp)"
        );
        assert!(validate(Some(&t), true).is_ok());
        assert!(validate(None, false).is_ok());
    }

    #[test]
    fn the_endpoint_is_an_http_url_and_the_service_has_a_name() {
        assert_eq!(table("").service_name, "frogbot");
        for bad in ["collector:4318", "ftp://collector", "http://", ""] {
            let t = table(&format!("otlp_endpoint = {bad:?}"));
            let e = validate(Some(&t), true).unwrap_err();
            assert_eq!(
                e.key.as_deref(),
                Some("telemetry.otlp_endpoint"),
                "{bad}: {e}"
            );
        }
        let e = validate(Some(&table("service_name = \" \"")), true).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("telemetry.service_name"));
        assert!(toml::from_str::<TelemetryConfig>("endpoint = \"x\"").is_err());
        assert_eq!(
            traces_url("http://collector:4318/"),
            "http://collector:4318/v1/traces"
        );
    }

    /// The refusal as `serve` and `frogbot config check --offline` meet it, in this build.
    #[cfg(not(feature = "otlp"))]
    #[test]
    fn a_config_with_telemetry_is_refused_without_otlp() {
        let c = crate::Config::parse("[telemetry]\notlp_endpoint = \"http://c:4318\"\n").unwrap();
        let e = c.validate().unwrap_err();
        assert!(e.to_string().contains("--features otlp"), "{e}");
    }
}
