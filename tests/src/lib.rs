//! FrogBot's cross-crate end-to-end suite. The tests live in `tests/tests/`; this library holds
//! what they share. Not published.
