//! Drawing pieces every adapter's `render.rs` shares beyond the Markdown walker: platform-neutral
//! layout rules (which a platform's own module turns into its controls), never a platform type.
