//! Without a rustls crypto provider, creating the client is an error, not a panic.
//! (Its own test binary: no test here installs a provider.)

use frogbot_openai::{Error, OpenAiCompatible, OpenAiConfig, install_crypto_provider};

#[test]
fn new_requires_a_crypto_provider_and_install_is_idempotent() {
    let config = OpenAiConfig {
        base_url: "http://127.0.0.1:9/v1".into(),
        api_key: None,
        model: "m".into(),
        max_retries: 2,
    };

    let error = OpenAiCompatible::new(config.clone()).unwrap_err();
    assert!(matches!(error, Error::NoCryptoProvider), "{error:?}");

    install_crypto_provider();
    install_crypto_provider();
    let model = OpenAiCompatible::new(config).unwrap();
    assert_eq!(model.model(), "m");
}
