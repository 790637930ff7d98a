//! Step kinds from shapes, and steps left out: an engine that marks steps
//! with a bare `execute_model` frame (no prefill or decode in any name) runs
//! a 4096-token prefill, then decodes of 32; the prefill is told by its
//! ops' input sizes and is not called slow beside the decodes, and the
//! engine's last frame, which ran no GPU op, is left out of the numbers.

use kinetoscope_trace::import::{read_trace, ReadOptions};
use kinetoscope_trace::{analyze, AnalysisOptions};

fn trace() -> String {
    let mut ev: Vec<String> = Vec::new();
    let mut corr = 0;
    let mut t = 1_000u64;
    // (tokens, step time µs, kernel time µs); the last frame runs nothing.
    let steps = [
        (4096, 5_000, 4_000),
        (32, 1_000, 600),
        (32, 1_020, 600),
        (32, 990, 600),
        (32, 1_010, 600),
        (32, 1_000, 600),
        (0, 120, 0),
    ];
    for (tokens, step_us, kernel_us) in steps {
        ev.push(format!(r#"{{"ph":"X","cat":"python_function","name":"vllm/v1/worker/gpu_model_runner.py(1480): execute_model","pid":1,"tid":1,"ts":{t},"dur":{step_us}}}"#));
        if tokens > 0 {
            corr += 1;
            let op = t + 10;
            ev.push(format!(r#"{{"ph":"X","cat":"cpu_op","name":"aten::embedding","pid":1,"tid":1,"ts":{op},"dur":50,"args":{{"Input Dims":[[151936, 4096], [{tokens}], [], [], []],"Input type":["c10::BFloat16", "long int", "Scalar", "Scalar", "Scalar"]}}}}"#));
            ev.push(format!(r#"{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{},"dur":5,"args":{{"correlation":{corr}}}}}"#, op + 20));
            ev.push(format!(r#"{{"ph":"X","cat":"kernel","name":"indexSelectLargeIndex","pid":0,"tid":7,"ts":{},"dur":{kernel_us},"args":{{"device":0,"stream":7,"correlation":{corr}}}}}"#, op + 30));
        }
        t += step_us + 100;
    }
    format!(r#"{{"traceEvents":[{}]}}"#, ev.join(","))
}

#[test]
fn a_prefill_is_told_by_its_shapes_and_an_idle_last_frame_is_left_out() {
    let json = trace();
    let t = read_trace(json.as_bytes(), &ReadOptions::default()).unwrap();
    let s = analyze(&t, &AnalysisOptions::default());
    let kinds: Vec<&str> = s
        .steps
        .iter()
        .map(|r| r.kind.map_or("-", |k| k.as_str()))
        .collect();
    assert_eq!(
        kinds,
        ["prefill", "decode", "decode", "decode", "decode", "decode", "-"]
    );
    assert!(s.steps[6].left_out);
    assert!(s.steps[..6].iter().all(|r| !r.left_out));
    assert_eq!((s.steps_stats.count, s.steps_stats.left_out), (6, 1));
    // The statistics are the six steps' (the idle frame would pull the
    // minimum down to 120 µs).
    assert_eq!(s.steps_stats.min_us, 990.0);
    let decode = s
        .steps_stats
        .by_kind
        .iter()
        .find(|k| k.kind.as_str() == "decode")
        .unwrap();
    assert_eq!(decode.count, 5);
    assert!(
        s.findings
            .iter()
            .all(|f| f.kind != kinetoscope_types::FindingKind::SlowStep),
        "{:?}",
        s.findings.iter().map(|f| &f.text).collect::<Vec<_>>()
    );
}
