//! What every adapter's receive path and platform client share beyond [`crate::engine`]:
//! platform-neutral rules about calls and deliveries, never a platform type.
