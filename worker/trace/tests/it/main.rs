//! The integration tests of `kinetoscope-trace`, one test binary (one link
//! of the crate and its dependencies, not one per file). Each module is one
//! subject; `cargo test -p kinetoscope-trace --test it MODULE` runs one.

mod architectures;
mod captures;
mod diff_layers;
mod expected;
#[path = "../common/family.rs"]
mod family;
mod generated;
mod host;
mod memory;
mod real_captures;
mod robustness;
mod shared_traces;
mod small_functions;
mod steps;
mod timeline;

/// The op finding of the first root cause: the first finding, or, where
/// that cause is led by its fix (`whole_tensor`), the `top_op` finding
/// among its evidence, which carries the op's numbers.
pub fn first_cause_op(s: &kinetoscope_types::Summary) -> &kinetoscope_types::Finding {
    s.findings
        .iter()
        .enumerate()
        .take_while(|(i, f)| *i == 0 || f.cause == Some(0))
        .map(|(_, f)| f)
        .find(|f| f.kind == kinetoscope_types::FindingKind::TopOp)
        .unwrap_or(&s.findings[0])
}
