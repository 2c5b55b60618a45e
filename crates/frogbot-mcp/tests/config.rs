//! `[[mcp]]` tables as TOML: what parses, what `validate` refuses (naming the key), approvals.

use frogbot_mcp::{Approval, ConfigError, ServerConfig, validate_all};

fn parse(text: &str) -> ServerConfig {
    toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn refused(text: &str) -> ConfigError {
    parse(text).validate().unwrap_err()
}

#[test]
fn a_stdio_server_with_defaults() {
    let c = parse(
        r#"
        id = "files-1"
        command = "npx"
        args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]
        env = { LOG_LEVEL = "warn" }
        "#,
    );
    c.validate().unwrap();
    assert_eq!(c.command.as_deref(), Some("npx"));
    assert_eq!(c.args.len(), 3);
    assert_eq!(c.env["LOG_LEVEL"], "warn");
    assert_eq!(c.timeout_seconds, 60);
    assert_eq!(c.tools, None);
    assert!(c.allows("anything"));
    assert_eq!(c.approval_for("read_file"), Approval::Never);
}

#[test]
fn an_http_server_with_a_bearer_token() {
    // `set_var` is unsafe in edition 2024 (and the workspace denies unsafe code): the token's
    // variable is one every environment has.
    let c = parse(
        r#"
        id = "github"
        url = "https://api.example.com/mcp/"
        bearer_token_env = "PATH"
        timeout_seconds = 5
        tools = ["merge_pull_request", "list_issues"]
        "#,
    );
    c.validate().unwrap();
    assert_eq!(c.timeout().as_secs(), 5);
    assert!(c.allows("list_issues"));
    assert!(!c.allows("delete_repo"));
}

#[test]
fn unknown_keys_are_refused_by_serde() {
    let err = toml::from_str::<ServerConfig>(
        r#"
        id = "x"
        command = "srv"
        timeout = 3
        "#,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("unknown field `timeout`"), "{err}");
}

#[test]
fn validate_names_the_key() {
    let cases: &[(&str, &str, &str)] = &[
        (
            r#"id = "has_underscore"
            command = "srv""#,
            "id",
            "`id` \"has_underscore\" must be letters, digits and `-`",
        ),
        (
            r#"id = ""
            command = "srv""#,
            "id",
            "`id` \"\"",
        ),
        (
            r#"id = "x""#,
            "command",
            "set exactly one of `command` (a stdio server) and `url`",
        ),
        (
            r#"id = "x"
            command = "srv"
            url = "http://localhost/mcp""#,
            "command",
            "set exactly one of `command`",
        ),
        (
            r#"id = "x"
            command = " ""#,
            "command",
            "`command` is empty",
        ),
        (
            r#"id = "x"
            url = "ftp://host/mcp""#,
            "url",
            "`url` \"ftp://host/mcp\" is not an http:// or https:// URL",
        ),
        (
            r#"id = "x"
            url = "http://localhost/mcp"
            args = ["a"]"#,
            "args",
            "`args` only goes with `command`",
        ),
        (
            r#"id = "x"
            url = "http://localhost/mcp"
            env = { A = "b" }"#,
            "env",
            "`env` only goes with `command`",
        ),
        (
            r#"id = "x"
            command = "srv"
            bearer_token_env = "PATH""#,
            "bearer_token_env",
            "`bearer_token_env` only goes with `url`",
        ),
        (
            r#"id = "x"
            url = "http://localhost/mcp"
            bearer_token_env = "FROGBOT_MCP_SURELY_UNSET_VARIABLE""#,
            "bearer_token_env",
            "`bearer_token_env` names FROGBOT_MCP_SURELY_UNSET_VARIABLE, which is not set",
        ),
        (
            r#"id = "x"
            command = "srv"
            timeout_seconds = 0"#,
            "timeout_seconds",
            "`timeout_seconds` must be at least 1",
        ),
        (
            r#"id = "x"
            command = "srv"
            approval = "sometimes""#,
            "approval",
            "`approval` is \"sometimes\"; it must be \"always\" or \"never\"",
        ),
        (
            r#"id = "x"
            command = "srv"
            approval = { merge = "maybe" }"#,
            "approval",
            "`approval.merge` is \"maybe\"",
        ),
        (
            r#"id = "x"
            command = "srv"
            approval = { "y__merge" = "always" }"#,
            "approval",
            "`approval.y__merge` names a tool of another server",
        ),
    ];
    for (text, key, message) in cases {
        let err = refused(text);
        assert_eq!(err.key(), *key, "{text}: {err}");
        assert!(err.to_string().contains(message), "{text}: {err}");
    }
}

#[test]
fn duplicate_ids_are_refused() {
    let a = parse("id = \"a\"\ncommand = \"srv\"");
    let err = validate_all(&[a.clone(), a]).unwrap_err();
    assert_eq!(err.key(), "id");
    assert_eq!(err.to_string(), "mcp: `id` \"a\" is used by two servers");
}

#[test]
fn approvals_per_server_and_per_tool() {
    let all = parse("id = \"gh\"\ncommand = \"srv\"\napproval = \"always\"");
    assert_eq!(all.approval_for("list_issues"), Approval::Always);
    assert_eq!(all.approval_for("gh__list_issues"), Approval::Always);

    let table = parse(
        r#"
        id = "gh"
        command = "srv"
        [approval]
        default = "always"
        list_issues = "never"
        "gh__merge_pull_request" = "always"
        "gh__get_me" = "never"
        get_me = "always"
        "#,
    );
    table.validate().unwrap();
    assert_eq!(table.approval_for("list_issues"), Approval::Never);
    assert_eq!(table.approval_for("gh__list_issues"), Approval::Never);
    assert_eq!(table.approval_for("merge_pull_request"), Approval::Always);
    assert_eq!(table.approval_for("create_issue"), Approval::Always);
    // The prefixed key wins over the bare one.
    assert_eq!(table.approval_for("get_me"), Approval::Never);

    let no_default = parse("id = \"gh\"\ncommand = \"srv\"\napproval = { merge = \"always\" }");
    assert_eq!(no_default.approval_for("merge"), Approval::Always);
    assert_eq!(no_default.approval_for("other"), Approval::Never);
}

#[test]
fn a_list_of_servers_parses_as_mcp_tables() {
    #[derive(serde::Deserialize)]
    struct File {
        mcp: Vec<ServerConfig>,
    }
    let file: File = toml::from_str(
        r#"
        [[mcp]]
        id = "one"
        command = "srv"

        [[mcp]]
        id = "two"
        url = "http://127.0.0.1:9/mcp"
        [mcp.approval]
        "two__merge" = "always"
        "#,
    )
    .unwrap();
    validate_all(&file.mcp).unwrap();
    assert_eq!(file.mcp[1].approval_for("merge"), Approval::Always);
}
