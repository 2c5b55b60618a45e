//! Engine glue (to do).
