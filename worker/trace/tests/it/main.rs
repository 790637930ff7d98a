//! The integration tests of `kinetoscope-trace`, one test binary (one link
//! of the crate and its dependencies, not one per file). Each module is one
//! subject; `cargo test -p kinetoscope-trace --test it MODULE` runs one.

mod architectures;
mod captures;
mod diff_layers;
mod expected;
mod generated;
mod host;
mod memory;
mod real_captures;
mod robustness;
mod shared_traces;
mod small_functions;
mod steps;
mod timeline;
