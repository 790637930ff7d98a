//! Against the hardware: the device the trace ran on ([`crate::devices`]),
//! and each op signature's and kernel group's bandwidth and FLOP rate as a
//! share of its peaks, with the time its bytes would take at the peak.
//!
//! A pass over the finished tables (no trace needed): the op and kernel
//! tables carry bytes per call and device time already; this adds the
//! ceilings.

use super::shapes;
use crate::devices::{self, DeviceQuery};
use crate::import::store::DeviceProps;
use kinetoscope_types::{AnalysisOptions, Device, KernelGroup, ShapeGroup, Summary};

/// The device a trace ran on: the first GPU that ran GPU ops, else the
/// first the trace lists; with the user's peaks on top.
pub(crate) fn device(
    devices: &[DeviceProps],
    active: &[i64],
    opts: &AnalysisOptions,
) -> Option<Device> {
    let props = active
        .iter()
        .find_map(|&id| devices.iter().find(|d| d.id == id))
        .or_else(|| devices.first());
    let query = props.map(|d| DeviceQuery {
        name: &d.name,
        sms: d.num_sms,
        compute_major: d.compute_major,
        memory_bytes: d.total_global_mem,
    });
    devices::device(query.as_ref(), opts.peak_gbps, opts.peak_tflops)
}

/// Fills the peaks' shares into the op signatures and kernel groups.
pub(crate) fn apply(s: &mut Summary) {
    let device = s.device.clone();
    for op in &mut s.ops {
        for g in &mut op.input_shapes {
            let gemm = shapes::gemm(&op.name, &g.shapes, &g.dtypes);
            signature(g, gemm.as_ref(), device.as_ref());
        }
    }
    for k in &mut s.kernels {
        for g in &mut k.groups {
            let gemm = match (&g.op, &g.shapes, &g.dtypes) {
                (Some(op), Some(sh), Some(dt)) => shapes::gemm(op, sh, dt),
                _ => None,
            };
            kernel_group(g, gemm.as_ref(), device.as_ref());
        }
    }
}

/// The least time `bytes` take at `gbps`, µs.
pub fn ideal_us(bytes: f64, gbps: f64) -> f64 {
    bytes / gbps / 1e3
}

fn share(achieved: Option<f64>, peak: Option<f64>) -> Option<f64> {
    match (achieved, peak) {
        (Some(a), Some(p)) if p > 0.0 => Some(100.0 * a / p),
        _ => None,
    }
}

fn signature(g: &mut ShapeGroup, gemm: Option<&shapes::Gemm>, device: Option<&Device>) {
    let peak_gbps = device.and_then(|d| d.peak_gbps);
    g.pct_of_peak_bw = share(g.achieved_gbps, peak_gbps);
    g.ideal_us = g.bytes_per_call.zip(peak_gbps).map(|(b, p)| ideal_us(b, p));
    if let Some(gemm) = gemm {
        let flops = gemm.flops();
        g.flops_per_call = Some(flops);
        g.achieved_tflops =
            (g.self_device_us > 0.0).then(|| flops * g.calls as f64 / g.self_device_us / 1e6);
        g.pct_of_peak_flops = share(
            g.achieved_tflops,
            device.and_then(|d| d.peak_tflops_for(&gemm.dtype)),
        );
    }
}

fn kernel_group(g: &mut KernelGroup, gemm: Option<&shapes::Gemm>, device: Option<&Device>) {
    let peak_gbps = device.and_then(|d| d.peak_gbps);
    g.pct_of_peak_bw = share(g.achieved_gbps, peak_gbps);
    g.ideal_us = g.bytes_per_call.zip(peak_gbps).map(|(b, p)| ideal_us(b, p));
    if let Some(gemm) = gemm {
        g.achieved_tflops = (g.avg_us > 0.0).then(|| gemm.flops() / g.avg_us / 1e6);
        g.pct_of_peak_flops = share(
            g.achieved_tflops,
            device.and_then(|d| d.peak_tflops_for(&gemm.dtype)),
        );
    }
}
