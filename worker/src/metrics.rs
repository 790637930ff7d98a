//! Prometheus metrics of this process (uploads, bytes, jobs, durations),
//! exposed by the server at `/metrics`.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::LazyLock;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    kind: String,
    outcome: String,
}

struct Metrics {
    registry: Registry,
    uploads: Counter,
    upload_bytes: Counter,
    rejected_uploads: Counter,
    jobs: Family<JobLabels, Counter>,
    job_seconds: Family<JobLabels, Histogram>,
    analyzed_bytes: Counter,
    analyzed_json_bytes: Counter,
    queue: Family<StateLabels, Gauge>,
    csp_violations: Counter,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut registry = Registry::with_prefix("kinetoscope");
    let uploads = Counter::default();
    let upload_bytes = Counter::default();
    let rejected_uploads = Counter::default();
    let jobs = Family::<JobLabels, Counter>::default();
    let job_seconds = Family::<JobLabels, Histogram>::new_with_constructor(|| {
        Histogram::new(exponential_buckets(0.05, 2.0, 14))
    });
    let analyzed_bytes = Counter::default();
    let analyzed_json_bytes = Counter::default();
    let queue = Family::<StateLabels, Gauge>::default();
    let csp_violations = Counter::default();
    registry.register(
        "csp_violations",
        "Content-Security-Policy violations reported by browsers",
        csp_violations.clone(),
    );
    registry.register(
        "jobs_in_queue",
        "Jobs in the database by state (all workers)",
        queue.clone(),
    );
    registry.register("uploads", "Traces accepted by upload", uploads.clone());
    registry.register(
        "upload_bytes",
        "Bytes of accepted uploads",
        upload_bytes.clone(),
    );
    registry.register(
        "rejected_uploads",
        "Uploads refused (bad input, limits, auth)",
        rejected_uploads.clone(),
    );
    registry.register(
        "jobs",
        "Jobs finished by this process, by kind and outcome",
        jobs.clone(),
    );
    registry.register("job_duration_seconds", "Job durations", job_seconds.clone());
    registry.register(
        "analyzed_bytes",
        "Stored (compressed) trace bytes analyzed",
        analyzed_bytes.clone(),
    );
    registry.register(
        "analyzed_json_bytes",
        "Decompressed JSON bytes analyzed",
        analyzed_json_bytes.clone(),
    );
    Metrics {
        registry,
        uploads,
        upload_bytes,
        rejected_uploads,
        jobs,
        job_seconds,
        analyzed_bytes,
        analyzed_json_bytes,
        queue,
        csp_violations,
    }
});

/// Publishes the database's job counts by state (read at scrape time).
pub fn set_jobs_by_state(counts: &[(kinetoscope_types::JobState, i64)]) {
    for &state in kinetoscope_types::JobState::ALL {
        let n = counts
            .iter()
            .find(|(s, _)| *s == state)
            .map_or(0, |(_, n)| *n);
        METRICS
            .queue
            .get_or_create(&StateLabels {
                state: state.as_str().into(),
            })
            .set(n);
    }
}

/// Counts an accepted upload.
pub fn upload_accepted(bytes: u64) {
    METRICS.uploads.inc();
    METRICS.upload_bytes.inc_by(bytes);
}

/// Counts a refused upload.
pub fn upload_rejected() {
    METRICS.rejected_uploads.inc();
}

/// Counts a Content-Security-Policy violation a browser reported.
pub fn csp_violation() {
    METRICS.csp_violations.inc();
}

/// Records a finished job.
pub fn job_finished(kind: &str, outcome: &str, took: Duration) {
    let labels = JobLabels {
        kind: kind.to_string(),
        outcome: outcome.to_string(),
    };
    METRICS.jobs.get_or_create(&labels).inc();
    METRICS
        .job_seconds
        .get_or_create(&labels)
        .observe(took.as_secs_f64());
}

/// Records an analyzed trace's sizes.
pub fn trace_analyzed(stored_bytes: u64, json_bytes: u64) {
    METRICS.analyzed_bytes.inc_by(stored_bytes);
    METRICS.analyzed_json_bytes.inc_by(json_bytes);
}

/// The metrics in Prometheus text format.
pub fn render() -> String {
    let mut out = String::new();
    let _ = encode(&mut out, &METRICS.registry);
    out
}
