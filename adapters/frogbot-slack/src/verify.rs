//! Slack request signature verification (`X-Slack-Signature`, `X-Slack-Request-Timestamp`).
//!
//! Slack signs `v0:{timestamp}:{body}` with HMAC-SHA256 under the app's signing secret and sends
//! `v0=<hex>`. Requests more than five minutes old (or ahead) are refused to stop replays.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::Error;

/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-slack-signature";
/// The timestamp header.
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
/// How far a request timestamp may be from now, in seconds.
pub const MAX_SKEW_SECS: i64 = 5 * 60;

fn mac(secret: &str, timestamp: &str, body: &[u8]) -> Result<Hmac<Sha256>, Error> {
    if secret.is_empty() {
        return Err(Error::EmptySecret);
    }
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).map_err(|_| Error::EmptySecret)?;
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    Ok(mac)
}

/// The `X-Slack-Signature` value Slack would send for this body (`v0=<hex>`); for tests and tools.
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> Result<String, Error> {
    let tag = mac(secret, timestamp, body)?.finalize().into_bytes();
    Ok(format!("v0={}", hex::encode(tag)))
}

/// Verifies a Slack request: `timestamp` and `signature` are the raw header values, `body` the raw
/// request body, `now_secs` the current Unix time in seconds. The comparison is constant-time.
pub fn verify(
    secret: &str,
    timestamp: &str,
    signature: &str,
    body: &[u8],
    now_secs: i64,
) -> Result<(), Error> {
    let ts: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| Error::MalformedTimestamp)?;
    // Checked: `now - ts` overflows for timestamps near `i64::MIN` / `i64::MAX` (and `abs` of
    // `i64::MIN` overflows too), which must not wrap into the window.
    let fresh = now_secs
        .checked_sub(ts)
        .and_then(i64::checked_abs)
        .is_some_and(|skew| skew <= MAX_SKEW_SECS);
    if !fresh {
        return Err(Error::StaleTimestamp);
    }
    let hex_sig = signature
        .trim()
        .strip_prefix("v0=")
        .ok_or(Error::MalformedSignature)?;
    let expected = hex::decode(hex_sig).map_err(|_| Error::MalformedSignature)?;
    if expected.len() != 32 {
        return Err(Error::MalformedSignature);
    }
    mac(secret, timestamp.trim(), body)?
        .verify_slice(&expected)
        .map_err(|_| Error::BadSignature)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_slack_documented_example() {
        // The example from Slack's "Verifying requests from Slack" page.
        let secret = "8f742231b10e8888abcd99yyyzzz85a5";
        let ts = "1531420618";
        let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let sig = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(sign(secret, ts, body.as_bytes()).unwrap(), sig);
        verify(secret, ts, sig, body.as_bytes(), 1531420618 + 10).unwrap();
    }
}
