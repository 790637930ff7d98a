//! `kinetoscope mcp`: a client speaks the Model Context Protocol to it over
//! stdio (`initialize`, `tools/list`, and a call of each tool) against a
//! real server holding the generated baseline and its gather-then-cast
//! patch, and checks the answers.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

fn generated(variant: kinetoscope_generate::Variant) -> Vec<u8> {
    let p = kinetoscope_generate::DecodeParams {
        steps: 4,
        layers: 6,
        variant,
        ..Default::default()
    };
    let mut json = Vec::new();
    kinetoscope_generate::write_decode_trace(&p, &mut json).unwrap();
    zstd::encode_all(&json[..], 3).unwrap()
}

struct Session {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Session {
    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// A request; its response's `result` (or the error, as a panic).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the MCP server closed"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(id) {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// A tool call: its text parsed as JSON, and whether it is an error.
    fn call(&mut self, tool: &str, args: Value) -> (Value, bool) {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let text = r["content"][0]["text"].as_str().unwrap_or("").to_string();
        let err = r["isError"].as_bool().unwrap_or(false);
        (
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
            err,
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_reads_runs_through_mcp() {
    use kinetoscope_generate::Variant;
    let srv = TestServer::start(Opts::default()).await;
    let base = srv.upload(generated(Variant::Baseline), "baseline").await;
    let patch = srv.upload(generated(Variant::GatherCast), "patch").await;
    for id in [&base.id, &patch.id] {
        assert_eq!(
            srv.wait(id, Duration::from_secs(120)).await.status.as_str(),
            "done"
        );
    }
    let url = srv.url.clone();
    let (b, p) = (base.id.clone(), patch.id.clone());
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kinetoscope"))
            .args(["mcp", "--server", &url])
            .env_remove("KINETOSCOPE_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut s = Session {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next: 0,
        };
        let init = s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        );
        assert_eq!(init["serverInfo"]["name"], "kinetoscope", "{init}");
        assert!(init["capabilities"]["tools"].is_object(), "{init}");
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let tools = s.request("tools/list", json!({}));
        let names: Vec<&str> = tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "list_runs", "run_findings", "op_table", "kernel_table",
                "steps_and_layers", "timeline_search", "timeline_event", "diff_runs"
            ]
        );
        for t in tools["tools"].as_array().unwrap() {
            assert!(t["description"].as_str().unwrap().contains("Returns"), "{t}");
            assert_eq!(t["inputSchema"]["type"], "object");
        }

        let (runs, err) = s.call("list_runs", json!({}));
        assert!(!err, "{runs}");
        assert_eq!(runs["total"], 2);
        let (runs, _) = s.call("list_runs", json!({"query": "patch"}));
        assert_eq!(runs["runs"][0]["id"], json!(p));

        let (f, err) = s.call("run_findings", json!({"run": format!("{url}/runs/{b}")}));
        assert!(!err, "{f}");
        let first = f["findings"][0]["text"].as_str().unwrap();
        assert!(first.contains("aten::copy_"), "{first}");
        assert_eq!(f["steps"]["count"], 4);

        let (ops, _) = s.call("op_table", json!({"run": b, "limit": 3}));
        assert_eq!(ops["rows"].as_array().unwrap().len(), 3);
        assert_eq!(ops["rows"][0]["name"], "aten::copy_", "{ops}");
        assert!(ops["rows"][0]["signatures"][0]["shapes"].is_string(), "{ops}");
        let (ops, _) = s.call("op_table", json!({"run": b, "query": "copy", "sort": "calls"}));
        assert!(ops["rows"].as_array().unwrap().iter().all(|r| r["name"].as_str().unwrap().contains("copy")));

        let (k, _) = s.call("kernel_table", json!({"run": b, "limit": 2}));
        assert_eq!(k["rows"].as_array().unwrap().len(), 2);
        assert!(!k["rows"][0]["launched_by"][0]["chain"].as_array().unwrap().is_empty(), "{k}");
        // Long kernel names are shortened, the full name beside them.
        for r in k["rows"].as_array().unwrap() {
            let n = r["name"].as_str().unwrap();
            assert!(n.chars().count() <= 90, "{n}");
            if n.ends_with('…') {
                assert!(r["full_name"].as_str().unwrap().len() > n.len());
            }
        }

        let (sl, _) = s.call("steps_and_layers", json!({"run": b}));
        assert_eq!(sl["steps"]["count"], 4);
        assert_eq!(sl["layers"]["count"], 6, "{sl}");

        let (found, err) = s.call("timeline_search", json!({"run": b, "query": "aten::copy_"}));
        assert!(!err, "{found}");
        assert!(found["matches"].as_u64().unwrap() >= 24, "{found}");
        let event = found["first"]["event"].as_u64().unwrap();
        let (ev, err) = s.call("timeline_event", json!({"run": b, "event": event}));
        assert!(!err, "{ev}");
        assert!(ev["name"].as_str().unwrap().contains("copy_"), "{ev}");

        let (d, err) = s.call("diff_runs", json!({"a": b, "b": p, "fail_above": 5}));
        assert!(!err, "{d}");
        assert_eq!(d["verdict"], "pass", "{d}");
        assert!(d["link"].as_str().unwrap().ends_with(&format!("/diff/{b}/{p}")));
        let (d, _) = s.call("diff_runs", json!({"a": p, "b": b, "fail_above": 5, "fail_ops": ["aten::copy_=10%"]}));
        assert_eq!(d["verdict"], "fail", "{d}");
        assert!(d["step_time"]["p50_change_pct"].as_f64().unwrap() > 5.0, "{d}");

        // A tool that fails says why, and the session goes on.
        let (e, err) = s.call("run_findings", json!({"run": "AAAAAAAAAAAAAAAAAAAAAA"}));
        assert!(err, "{e}");
        assert!(e.as_str().unwrap().contains("404"), "{e}");
        let (_, err) = s.call("list_runs", json!({"limit": 1}));
        assert!(!err);
        drop(s.stdin);
        let status = s.child.wait().unwrap();
        assert!(status.success(), "{status}");
    })
    .await
    .unwrap();
    srv.stop().await;
}
