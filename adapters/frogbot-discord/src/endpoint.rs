//! The HTTP interactions endpoint: Ed25519 request verification and the PING handshake.
//!
//! Discord can deliver interactions by POST to an "Interactions Endpoint URL" instead of the
//! gateway. Every request carries `X-Signature-Ed25519` and `X-Signature-Timestamp`; a request
//! whose signature does not verify against the application's public key must be answered 401.
//! The signature covers the timestamp, so a request is also refused (401) when its timestamp is
//! more than [`MAX_SKEW_SECS`] from now: a captured request cannot be replayed later.
//! A PING (type 1) is answered `{"type": 1}` ([`PONG`]); anything else is an interaction to convert
//! with [`convert::interaction`](crate::convert::interaction) and acknowledge in the HTTP response
//! (e.g. `{"type": 6}`, the deferred update) within 3 seconds.

use serenity::interactions_endpoint::Verifier;
use serenity::model::application::Interaction as DiscordInteraction;

use crate::Error;
use crate::convert::parse_interaction_json;

/// The body answering a PING.
pub const PONG: &str = r#"{"type":1}"#;

/// How far `X-Signature-Timestamp` may be from now, in seconds (either way).
pub const MAX_SKEW_SECS: i64 = 5 * 60;

/// Checks that `timestamp` (Unix seconds, the raw header value) is within [`MAX_SKEW_SECS`] of
/// `now_secs`; checked arithmetic, so no timestamp can wrap around into the window.
pub fn check_fresh(timestamp: &str, now_secs: i64) -> Result<(), Error> {
    let ts: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| Error::StaleTimestamp)?;
    let fresh = now_secs
        .checked_sub(ts)
        .and_then(i64::checked_abs)
        .is_some_and(|skew| skew <= MAX_SKEW_SECS);
    if fresh {
        Ok(())
    } else {
        Err(Error::StaleTimestamp)
    }
}

/// What a verified endpoint request is.
#[derive(Debug)]
#[non_exhaustive]
pub enum EndpointRequest {
    /// Discord checks the endpoint: answer [`PONG`].
    Ping,
    /// An interaction.
    Interaction {
        /// In serenity's types (boxed: they are large).
        interaction: Box<DiscordInteraction>,
        /// The interaction object as Discord sent it (what serenity drops, e.g. a modal's Label
        /// components, is still here: see [`convert::modal_submit_json`](crate::convert::modal_submit_json)).
        raw: serde_json::Value,
    },
}

/// Verifies interactions-endpoint requests with the application's public key.
#[derive(Clone)]
pub struct EndpointVerifier {
    verifier: Verifier,
}

impl std::fmt::Debug for EndpointVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointVerifier").finish_non_exhaustive()
    }
}

fn parse_hex_key(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

impl EndpointVerifier {
    /// From the application's public key (64 hex digits, as the developer portal shows it).
    pub fn new(public_key_hex: &str) -> Result<Self, Error> {
        let key = parse_hex_key(public_key_hex)
            .ok_or_else(|| Error::Malformed("public key must be 64 hex digits".into()))?;
        let verifier =
            Verifier::try_new(key).map_err(|e| Error::Malformed(format!("public key: {e}")))?;
        Ok(EndpointVerifier { verifier })
    }

    /// Checks the `X-Signature-Ed25519` / `X-Signature-Timestamp` headers against the raw body.
    pub fn verify(&self, signature: &str, timestamp: &str, body: &[u8]) -> Result<(), Error> {
        self.verifier
            .verify(signature, timestamp, body)
            .map_err(|()| Error::BadSignature)
    }

    /// Verifies a request (signature, then the timestamp's freshness against the clock) and
    /// parses its body: [`EndpointRequest::Ping`] or an interaction.
    pub fn receive(
        &self,
        signature: &str,
        timestamp: &str,
        body: &[u8],
    ) -> Result<EndpointRequest, Error> {
        let now_secs = frogbot_model::now_millis() / 1000;
        self.receive_at(signature, timestamp, body, now_secs)
    }

    /// [`Self::receive`] at `now_secs` (Unix seconds).
    pub fn receive_at(
        &self,
        signature: &str,
        timestamp: &str,
        body: &[u8],
        now_secs: i64,
    ) -> Result<EndpointRequest, Error> {
        self.verify(signature, timestamp, body)?;
        check_fresh(timestamp, now_secs)?;
        let text = std::str::from_utf8(body).map_err(|e| Error::Malformed(e.to_string()))?;
        match parse_interaction_json(text)? {
            (DiscordInteraction::Ping(_), _) => Ok(EndpointRequest::Ping),
            (other, raw) => Ok(EndpointRequest::Interaction {
                interaction: Box::new(other),
                raw,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};
    use serde_json::json;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn signed(key: &SigningKey, timestamp: &str, body: &str) -> String {
        hex(&key
            .sign(&[timestamp.as_bytes(), body.as_bytes()].concat())
            .to_bytes())
    }

    #[test]
    fn verifies_signatures_and_answers_pings() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let verifier = EndpointVerifier::new(&hex(key.verifying_key().as_bytes())).unwrap();
        let ping = json!({"id": "1", "application_id": "2", "type": 1, "token": "t", "version": 1})
            .to_string();
        let signature = signed(&key, "1700000000", &ping);
        let now = 1_700_000_010;
        assert!(matches!(
            verifier.receive_at(&signature, "1700000000", ping.as_bytes(), now),
            Ok(EndpointRequest::Ping)
        ));
        // Another timestamp, a changed body, a foreign key or garbage: 401.
        assert!(matches!(
            verifier.receive_at(&signature, "1700000001", ping.as_bytes(), now),
            Err(Error::BadSignature)
        ));
        assert!(matches!(
            verifier.verify(&signature, "1700000000", b"{}"),
            Err(Error::BadSignature)
        ));
        let other = SigningKey::from_bytes(&[9; 32]);
        assert!(matches!(
            verifier.verify(&signed(&other, "1", &ping), "1", ping.as_bytes()),
            Err(Error::BadSignature)
        ));
        assert!(matches!(
            verifier.verify("zz", "1", ping.as_bytes()),
            Err(Error::BadSignature)
        ));
        assert!(EndpointVerifier::new("abc").is_err());
        // A signed but malformed body is an error, not a panic.
        let bad = r#"{"type": 3}"#;
        assert!(matches!(
            verifier.receive_at(&signed(&key, "1", bad), "1", bad.as_bytes(), 1),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn old_or_future_timestamps_are_refused_even_when_signed() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let verifier = EndpointVerifier::new(&hex(key.verifying_key().as_bytes())).unwrap();
        let ping = json!({"id": "1", "application_id": "2", "type": 1, "token": "t", "version": 1})
            .to_string();
        let now: i64 = 1_700_000_000;
        let at = |ts: i64| {
            let ts = ts.to_string();
            verifier.receive_at(&signed(&key, &ts, &ping), &ts, ping.as_bytes(), now)
        };
        assert!(matches!(at(now - 300), Ok(EndpointRequest::Ping)));
        assert!(matches!(at(now + 300), Ok(EndpointRequest::Ping)));
        for ts in [now - 301, now + 301, 0, now + i64::MIN, i64::MIN, i64::MAX] {
            assert!(matches!(at(ts), Err(Error::StaleTimestamp)), "{ts}");
        }
        // Not a number (but signed): refused as well.
        assert!(matches!(
            verifier.receive_at(&signed(&key, "soon", &ping), "soon", ping.as_bytes(), now),
            Err(Error::StaleTimestamp)
        ));
        // The clock-reading `receive` refuses the long-past 1700000000.
        let ts = now.to_string();
        assert!(matches!(
            verifier.receive(&signed(&key, &ts, &ping), &ts, ping.as_bytes()),
            Err(Error::StaleTimestamp)
        ));
    }
}
