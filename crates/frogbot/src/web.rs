//! The web chat at `/`: one server-rendered page with a little JavaScript over the HTTP API.
//!
//! The page (`web/index.html`), its style (`web/style.css`) and script (`web/app.js`) are
//! compiled in and served as one document, so the chat needs no build step and no other route.

use std::sync::LazyLock;

use axum::response::Html;

const PAGE: &str = include_str!("web/index.html");
const STYLE: &str = include_str!("web/style.css");
const SCRIPT: &str = include_str!("web/app.js");

static INDEX: LazyLock<String> = LazyLock::new(|| {
    PAGE.replacen("/*STYLE*/", STYLE, 1)
        .replacen("/*SCRIPT*/", SCRIPT, 1)
});

/// `GET /`.
pub async fn index() -> Html<&'static str> {
    Html(INDEX.as_str())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_inlines_its_style_and_script() {
        let page = super::INDEX.as_str();
        assert!(!page.contains("/*STYLE*/") && !page.contains("/*SCRIPT*/"));
        assert!(page.contains("id=\"composer\"") && page.contains("startEvents"));
        // The script must not end its own <script> element early.
        assert!(!super::SCRIPT.contains("</script"));
    }
}
