//! `[channels.matrix]` as `frogbot serve` reads it: every key checked, errors name the key, secrets
//! come from the environment variables the keys name. (The Synapse-backed end-to-end tests of the
//! channel itself live in `adapters/frogbot-matrix/tests/synapse.rs`.)

use frogbot::Config;

fn config(table: &str) -> Result<Config, String> {
    let text = format!("[channels.matrix]\n{table}");
    Config::parse(&text)
        .and_then(|c| c.validate().map(|()| c))
        .map_err(|e| e.to_string())
}

// `std::env::set_var` is `unsafe` in edition 2024 (and `unsafe_code` is denied): the tests name
// `PATH` as the secret's variable, which is always set, and an unset name for the error case.
const BASE: &str = r#"homeserver = "http://127.0.0.1:8008"
user_id = "@frogbot:localhost"
store_path = "/tmp/frogbot-matrix-test-store"
"#;

#[test]
fn a_complete_table_is_accepted() {
    let c = config(&format!(
        "{BASE}password_env = \"PATH\"\nauto_join = false\npoll_events = \"unstable\"\nusers = {{ \"@alice:localhost\" = \"alice\" }}\nallow = [\"alice\"]\n"
    ))
    .unwrap();
    assert!(c.channels.contains_key("matrix"));
}

#[test]
fn the_secret_variable_must_be_set() {
    let e = config(&format!(
        "{BASE}password_env = \"FROGBOT_TEST_MATRIX_PW_UNSET\"\n"
    ))
    .unwrap_err();
    assert!(e.contains("`channels.matrix.password_env`"), "{e}");
    assert!(e.contains("FROGBOT_TEST_MATRIX_PW_UNSET"), "{e}");
}

#[test]
fn password_or_access_token_not_both_nor_neither() {
    let e = config(&format!(
        "{BASE}password_env = \"PATH\"\naccess_token_env = \"PATH\"\n"
    ))
    .unwrap_err();
    assert!(e.contains("not both"), "{e}");
    let e = config(BASE).unwrap_err();
    assert!(e.contains("`channels.matrix.password_env`"), "{e}");
}

#[test]
fn bad_values_and_unknown_keys_are_named() {
    let pw = "password_env = \"PATH\"\n";
    let e = config(&format!(
        "{}{pw}",
        BASE.replace("@frogbot:localhost", "frogbot")
    ))
    .unwrap_err();
    assert!(e.contains("`channels.matrix.user_id`"), "{e}");
    let e = config(&format!(
        "{}{pw}",
        BASE.replace("http://127.0.0.1:8008", "127.0.0.1")
    ))
    .unwrap_err();
    assert!(e.contains("`channels.matrix.homeserver`"), "{e}");
    let e = config(&format!("{BASE}{pw}room = \"!x:localhost\"\n")).unwrap_err();
    assert!(e.contains("channels.matrix") && e.contains("room"), "{e}");
    let e = config(&format!("{BASE}{pw}poll_events = \"beta\"\n")).unwrap_err();
    assert!(e.contains("channels.matrix") && e.contains("beta"), "{e}");
}
