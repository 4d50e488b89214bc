//! Internal `tracing` hooks, compiled only with the `tracing` feature.
//!
//! [`vmad_debug!`] forwards to `tracing::debug!` with the feature and expands
//! to nothing without it: not even its arguments are evaluated, so the
//! per-MAD path costs nothing when the feature is off. The engine's hooks
//! live in vmad-core, whose `tracing` feature ours enables.

#[cfg(feature = "tracing")]
macro_rules! vmad_debug {
    ($($t:tt)*) => { ::tracing::debug!($($t)*) };
}
#[cfg(not(feature = "tracing"))]
macro_rules! vmad_debug {
    ($($t:tt)*) => {};
}

#[cfg(all(test, not(feature = "tracing")))]
mod tests {
    #[test]
    fn trace_macro_without_the_feature_evaluates_nothing() {
        let evaluated = std::cell::Cell::new(false);
        vmad_debug!(
            x = {
                evaluated.set(true);
                1
            },
            "never"
        );
        assert!(!evaluated.get());
    }
}
