//! Per-layer attribution (filled in by the layers work).

use super::{AnalysisOptions, Context};
use kinetoscope_types::{KernelRow, Layers};

/// Attributes device time to layers.
pub(crate) fn attribute(_cx: &Context, _kernels: &[KernelRow], _opts: &AnalysisOptions) -> Layers {
    Layers {
        method: "none".into(),
        detail: "layer attribution is not computed yet".into(),
        ..Default::default()
    }
}
