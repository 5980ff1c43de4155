//! Reading any bytes as a manifest returns a manifest or positioned problems; it never panics.
//! Run with `cargo +nightly fuzz run manifest` from the repository root. CI runs the same
//! property through proptest (`policy/tests/manifest_fuzz.rs`).
#![no_main]

use std::path::Path;

use af_policy::manifest::{Manifest, ManifestError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    match Manifest::from_bytes(bytes, Path::new("af.yaml")) {
        Ok(manifest) => {
            assert!(manifest.placement().is_ok(), "an accepted manifest places");
        }
        Err(ManifestError::Invalid { problems, .. }) => {
            assert!(!problems.is_empty());
            assert!(problems.windows(2).all(|w| w[0].location <= w[1].location));
        }
        Err(_) => {}
    }
});
