//! Slack request signature verification.

use frogbot_slack::Error;
use frogbot_slack::convert::{sign, verify};

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const BODY: &[u8] = br#"payload=%7B%22type%22%3A%22block_actions%22%7D"#;
const NOW: i64 = 1_700_000_000;

#[test]
fn a_good_signature_is_accepted() {
    let ts = NOW.to_string();
    let sig = sign(SECRET, &ts, BODY).unwrap();
    assert!(sig.starts_with("v0=") && sig.len() == 3 + 64);
    verify(SECRET, &ts, &sig, BODY, NOW).unwrap();
    // A little clock skew either way is fine.
    verify(SECRET, &ts, &sig, BODY, NOW + 299).unwrap();
    verify(SECRET, &ts, &sig, BODY, NOW - 299).unwrap();
}

#[test]
fn a_wrong_signature_is_refused() {
    let ts = NOW.to_string();
    let sig = sign("another secret", &ts, BODY).unwrap();
    assert!(matches!(
        verify(SECRET, &ts, &sig, BODY, NOW),
        Err(Error::BadSignature)
    ));
    // The right signature over another body.
    let sig = sign(SECRET, &ts, BODY).unwrap();
    assert!(matches!(
        verify(SECRET, &ts, &sig, b"payload=tampered", NOW),
        Err(Error::BadSignature)
    ));
    // Signed for another timestamp.
    let other = sign(SECRET, &(NOW - 1).to_string(), BODY).unwrap();
    assert!(matches!(
        verify(SECRET, &ts, &other, BODY, NOW),
        Err(Error::BadSignature)
    ));
}

#[test]
fn stale_or_future_timestamps_are_refused() {
    let old = (NOW - 301).to_string();
    let sig = sign(SECRET, &old, BODY).unwrap();
    assert!(matches!(
        verify(SECRET, &old, &sig, BODY, NOW),
        Err(Error::StaleTimestamp)
    ));
    let future = (NOW + 301).to_string();
    let sig = sign(SECRET, &future, BODY).unwrap();
    assert!(matches!(
        verify(SECRET, &future, &sig, BODY, NOW),
        Err(Error::StaleTimestamp)
    ));
}

#[test]
fn timestamps_that_overflow_the_skew_are_refused() {
    // `now - ts` overflows for these (in a release build it wrapped to a negative skew, which
    // passed the window; in a debug build it panicked).
    for ts in [
        NOW + i64::MIN, // now − 2^63
        i64::MIN,
        i64::MAX,
        i64::MIN + 1,
    ] {
        let ts = ts.to_string();
        let sig = sign(SECRET, &ts, BODY).unwrap();
        assert!(
            matches!(
                verify(SECRET, &ts, &sig, BODY, NOW),
                Err(Error::StaleTimestamp)
            ),
            "{ts}"
        );
    }
    // The same at the extremes of `now`.
    let ts = i64::MAX.to_string();
    let sig = sign(SECRET, &ts, BODY).unwrap();
    assert!(matches!(
        verify(SECRET, &ts, &sig, BODY, i64::MIN),
        Err(Error::StaleTimestamp)
    ));
}

#[test]
fn malformed_headers_are_refused() {
    let ts = NOW.to_string();
    let sig = sign(SECRET, &ts, BODY).unwrap();
    for bad in [
        "",
        "v1=abcd",
        "abcdef",
        "v0=zz",
        "v0=abcd",
        &sig[3..],
        &format!("v0={}", "0".repeat(62)),
    ] {
        assert!(
            matches!(
                verify(SECRET, &ts, bad, BODY, NOW),
                Err(Error::MalformedSignature)
            ),
            "{bad:?}"
        );
    }
    for bad in ["", "yesterday", "17e8"] {
        assert!(
            matches!(
                verify(SECRET, bad, &sig, BODY, NOW),
                Err(Error::MalformedTimestamp)
            ),
            "{bad:?}"
        );
    }
    assert!(matches!(
        verify("", &ts, &sig, BODY, NOW),
        Err(Error::EmptySecret)
    ));
}
