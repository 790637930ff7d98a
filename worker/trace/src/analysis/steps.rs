//! Profiler steps: `ProfilerStep#N` annotations, or the step annotations that
//! serving frameworks write when they drive the profiler themselves.

use super::limits::{self, Limit};
use super::links::NO;
use super::{us, Context};
use crate::import::store::{CpuKind, GpuKind, Sym, Tables};
use hashbrown::HashMap;
use kinetoscope_types::{StepKindStats, StepRow, StepsStats};

/// What marks steps, in order of preference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StepMarker {
    /// `ProfilerStep#N` (torch.profiler's schedule).
    ProfilerStep,
    /// SGLang's `step[EXTEND bs=.. toks=..]` / `step[DECODE ...]`.
    ServingStep,
    /// vLLM's `execute_<tokens>_context_<n>(...)_generation_<n>(...)`.
    Execute,
    /// vLLM's graph capture `capture_<batch>_<mode>`.
    Capture,
}

impl StepMarker {
    fn of(name: &str) -> Option<StepMarker> {
        if name.starts_with("ProfilerStep#") {
            return is_profiler_step(name).then_some(StepMarker::ProfilerStep);
        }
        if name.starts_with("step[") && name.ends_with(']') {
            return Some(StepMarker::ServingStep);
        }
        if name.starts_with("execute_") && (name.contains("context") || name.contains("generation"))
        {
            return Some(StepMarker::Execute);
        }
        if let Some(rest) = name.strip_prefix("capture_") {
            return rest
                .starts_with(|c: char| c.is_ascii_digit())
                .then_some(StepMarker::Capture);
        }
        None
    }

    /// The word stored in `steps_stats.source`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepMarker::ProfilerStep => "ProfilerStep",
            StepMarker::ServingStep => "step[...]",
            StepMarker::Execute => "execute_...",
            StepMarker::Capture => "capture_...",
        }
    }
}

pub use kinetoscope_types::StepKind;

/// The kind a step, annotation or frame name speaks of: SGLang's
/// `step[EXTEND ...]` / `step[DECODE ...]` / `step[MIXED ...]` and model
/// runner `forward_extend` / `forward_decode`, vLLM's
/// `execute_<n>_context_<c>(...)_generation_<g>(...)`.
pub fn kind_of(name: &str) -> Option<StepKind> {
    if let Some(rest) = name.strip_prefix("step[") {
        let word = rest.split([' ', ']']).next().unwrap_or("");
        return match word.to_ascii_uppercase().as_str() {
            "EXTEND" | "PREFILL" => Some(StepKind::Prefill),
            "DECODE" | "IDLE_DECODE" => Some(StepKind::Decode),
            "MIXED" => Some(StepKind::Mixed),
            _ => None,
        };
    }
    if name.starts_with("execute_") {
        let count = |key: &str| -> u64 {
            name.split(key)
                .nth(1)
                .map(|r| {
                    r.chars()
                        .take_while(char::is_ascii_digit)
                        .collect::<String>()
                })
                .and_then(|d| d.parse().ok())
                .unwrap_or(0)
        };
        return match (count("_context_"), count("_generation_")) {
            (0, 0) => None,
            (_, 0) => Some(StepKind::Prefill),
            (0, _) => Some(StepKind::Decode),
            _ => Some(StepKind::Mixed),
        };
    }
    if name.ends_with(": forward_decode") {
        return Some(StepKind::Decode);
    }
    if name.ends_with(": forward_extend") {
        return Some(StepKind::Prefill);
    }
    None
}

/// Two kinds seen in one step.
fn join_kinds(a: Option<StepKind>, b: StepKind) -> StepKind {
    match a {
        None => b,
        Some(a) if a == b => a,
        Some(_) => StepKind::Mixed,
    }
}

/// An engine's own Python frame that spans one step, when nothing else
/// marks steps: vLLM's model runner `execute_model`, SGLang's model runner
/// `forward_decode` / `forward_extend`, then SGLang's scheduler `run_batch`.
fn engine_frame_rank(name: &str) -> Option<u8> {
    let func = name.rsplit_once("): ").map(|(_, f)| f)?;
    let file = name.split('(').next().unwrap_or("");
    match func {
        "execute_model" if file.ends_with("model_runner.py") => Some(0),
        "forward_decode" | "forward_extend" | "forward_idle"
            if file.ends_with("model_runner.py") =>
        {
            Some(0)
        }
        "run_batch" if file.ends_with("scheduler.py") => Some(1),
        _ => None,
    }
}

/// One step's span.
#[derive(Clone, Copy, Debug)]
pub struct StepSpan {
    /// Name.
    pub name: Sym,
    /// Start.
    pub ts: i64,
    /// End.
    pub end: i64,
    /// Kind.
    pub kind: Option<StepKind>,
    /// The forward pass it is (1, 2, ...), where the steps are the passes
    /// of a trace without step marks ([`from_passes`]); `name` is then its
    /// first op's.
    pub pass: Option<u32>,
}

impl StepSpan {
    /// What the step tables and the timeline call it: its marker's name,
    /// or `forward pass #N`.
    pub fn label(&self, t: &Tables) -> String {
        match self.pass {
            Some(n) => format!("forward pass #{n}"),
            None => t.name(self.name).to_string(),
        }
    }

    /// Its number: a `ProfilerStep#N`'s, or its pass's.
    pub fn number(&self, t: &Tables) -> Option<i64> {
        match self.pass {
            Some(n) => Some(i64::from(n)),
            None => step_number(t.name(self.name)),
        }
    }
}

/// What marked the steps, as stored in `steps_stats.source`.
pub type StepSource = String;

/// The steps a trace has, and what marked them.
#[derive(Debug, Default)]
pub struct FoundSteps {
    /// The steps, in time order: the first [`MAX_STEPS`].
    pub spans: Vec<StepSpan>,
    /// What marked them; `None` when there are none.
    pub source: Option<StepSource>,
    /// Steps after the first [`MAX_STEPS`], left out (their ops are in no
    /// step).
    pub past_bound: usize,
}

impl FoundSteps {
    /// The summary's note on the steps left out past [`MAX_STEPS`], where
    /// some were.
    pub fn cut_note(&self) -> Option<String> {
        (self.past_bound > 0).then(|| {
            format!(
                "More than {MAX_STEPS} steps: the {} after the first {MAX_STEPS} were left out (their ops are in no step)",
                self.past_bound
            )
        })
    }
}

/// Most steps a trace has: those after the first ones are left out, and
/// the summary's notes say how many. Each step costs about 250 bytes to the
/// analysis's end (its span, its row with its name, its GPU side), and a
/// step is one event: `shapes.py`'s `manysteps` at 3.3 million events
/// (300,000 steps of 10 CPU ops) peaked at 201 MB against its budget of
/// 154 (BENCHMARKS.md, issue 44 item 3). 16,384 steps hold 4 MB. The most
/// steps of any trace we have is 300 (the generated story at `--scale`);
/// of a real one, 13 (`hta-mtia-inference-rank0`). A trace of more than
/// 10,000 steps has its step names folded already (`ProfilerStep##`,
/// `store::MAX_TEXTS`).
pub const MAX_STEPS: usize = 1 << 14;

/// Finds the steps. A user's marker (an op, annotation or Python frame name,
/// matched as a substring) wins; then `ProfilerStep#N` and the serving
/// frameworks' step annotations, most preferred kind first; then engine
/// frames. Steps nested in another step are dropped; the result is in time
/// order, with each step's kind from its own name or the names inside it.
pub fn find_steps(t: &Tables, user_marker: Option<&str>) -> FoundSteps {
    let (mut steps, source) = match user_marker.filter(|m| !m.is_empty()) {
        Some(m) => {
            let spans = spans_named(t, |name| name.contains(m));
            (spans, Some(format!("marker: {m}")))
        }
        None => match annotated(t) {
            (spans, Some(marker)) => (spans, Some(marker.as_str().to_string())),
            _ => {
                let mut best: Option<u8> = None;
                let mut class: HashMap<Sym, Option<u8>> = HashMap::new();
                for &sym in t.python.name() {
                    let c = *class
                        .entry(sym)
                        .or_insert_with(|| engine_frame_rank(t.name(sym)));
                    if let Some(c) = c {
                        best = Some(best.map_or(c, |b| b.min(c)));
                    }
                }
                match best {
                    None => match repeating_annotation(t) {
                        Some((spans, _)) if spans[0].pass.is_some() => {
                            (spans, Some(FORWARD_PASSES.to_string()))
                        }
                        Some((spans, name)) => (spans, Some(format!("annotation: {name}"))),
                        None => (Vec::new(), None),
                    },
                    Some(rank) => {
                        let spans = spans_named(t, |name| engine_frame_rank(name) == Some(rank));
                        let source = spans
                            .first()
                            .map(|s| format!("frame: {}", frame_function(t.name(s.name))));
                        (spans, source)
                    }
                }
            }
        },
    };
    steps.sort_by_key(|s| (s.ts, std::cmp::Reverse(s.end)));
    let mut kept: Vec<StepSpan> = Vec::with_capacity(steps.len());
    for s in steps {
        match kept.last() {
            Some(prev) if s.ts < prev.end => {} // nested or overlapping: keep the outer
            _ => kept.push(s),
        }
    }
    if kept.is_empty() {
        return FoundSteps::default();
    }
    let past_bound = kept.len().saturating_sub(MAX_STEPS);
    kept.truncate(MAX_STEPS);
    kept.shrink_to_fit();
    with_kinds(t, &mut kept);
    FoundSteps {
        spans: kept,
        source,
        past_bound,
    }
}

/// What `steps_stats.source` says of steps that are a trace's forward
/// passes ([`from_passes`]).
pub const FORWARD_PASSES: &str = "forward passes";

/// The steps of a trace without step marks that runs its forward pass
/// several times (`model.generate()` profiled without a schedule): each
/// pass is a step, (its first op's name, CPU start, CPU end) in time order,
/// its kind from the names and shapes inside it as any step's, but with no
/// fewest tokens for a prefill: a pass that feeds the model many times the
/// tokens of another is a prompt's (`generate()` runs the prompt in a pass
/// of its own, then a token a pass; the unmarked captures' 48-token
/// prompts, `captures::a_forward_pass_run_again_without_step_marks_is_one_pass`).
/// The layer rule tells the passes ([`layers::prologue_passes`](super::layers::prologue_passes) and the others `analysis::passes_as_steps` tries).
pub(crate) fn from_passes(t: &Tables, passes: &[(Sym, i64, i64)]) -> Vec<StepSpan> {
    let mut spans: Vec<StepSpan> = passes
        .iter()
        .zip(1..)
        .map(|(&(name, ts, end), n)| StepSpan {
            name,
            ts,
            end,
            kind: None,
            pass: Some(n),
        })
        .collect();
    with_kinds(t, &mut spans);
    spans
}

/// Each step's kind: from the names inside it, else from its ops' shapes;
/// forward passes need no fewest tokens for a prefill ([`from_passes`]).
fn with_kinds(t: &Tables, steps: &mut [StepSpan]) {
    kinds_from_inside(t, steps);
    let min_tokens = match steps.first().and_then(|s| s.pass) {
        Some(_) => 0.0,
        None => limits::get(Limit::PrefillTokens),
    };
    kinds_from_shapes(t, steps, min_tokens);
}

/// How many tokens an op's inputs hold, for the ops that tell a step's
/// tokens: the embedding's indices, the rows of a GEMM's input.
fn tokens_of(name: &str, shapes: &str) -> Option<u64> {
    let (input, all_dims) = token_input(name)?;
    if name == "aten::embedding"
        && input_dims(shapes, 0)
            .and_then(|table| table.first().copied())
            .is_some_and(|rows| (rows as f64) < limits::get(Limit::EmbeddingRows))
    {
        // A small table is no vocabulary (T5's position buckets).
        return None;
    }
    let dims = input_dims(shapes, input)?;
    let keep = if all_dims {
        dims.len()
    } else {
        dims.len().checked_sub(1)?
    };
    let rows: u64 = dims[..keep].iter().product();
    (keep > 0 && rows > 0).then_some(rows)
}

/// Whether an op embeds one token a sequence: an embedding whose indices
/// are `[sequences, 1]` (a decode's; a prefill's are `[1, prompt]`).
fn one_a_sequence(name: &str, shapes: &str) -> bool {
    name == "aten::embedding"
        && input_dims(shapes, 1).is_some_and(|d| d.len() >= 2 && d[d.len() - 1] == 1)
}

/// Which input of an op holds its tokens, and whether all its dims count
/// (the embedding's indices) or all but the last (a GEMM's rows).
fn token_input(name: &str) -> Option<(usize, bool)> {
    match name {
        "aten::embedding" => Some((1, true)),
        "aten::linear" | "aten::mm" | "aten::matmul" => Some((0, false)),
        "aten::addmm" => Some((1, false)),
        _ => None,
    }
}

/// The dims of input `k` in an `Input Dims` text (`[[64, 7168], [7168]]`).
fn input_dims(shapes: &str, k: usize) -> Option<Vec<u64>> {
    let inner = shapes.trim().strip_prefix('[')?;
    let mut depth = 0;
    let mut index = 0;
    let mut start = None;
    for (i, c) in inner.char_indices() {
        match c {
            '[' => {
                if depth == 0 && index == k {
                    start = Some(i + 1);
                }
                depth += 1;
            }
            ']' => {
                if depth == 0 {
                    return None;
                }
                depth -= 1;
                if depth == 0 && index == k {
                    let body = &inner[start?..i];
                    if body.contains('[') {
                        return None;
                    }
                    return body
                        .split(',')
                        .map(|d| d.trim().parse().ok())
                        .collect::<Option<Vec<u64>>>()
                        .filter(|v| !v.is_empty());
                }
            }
            ',' if depth == 0 => index += 1,
            _ => {}
        }
    }
    None
}

/// Steps without a kind from names take one from their ops' shapes: where
/// some steps feed the model many times more tokens than the others (the
/// embedding's indices, or the first GEMM's rows), those are prefills and
/// the rest decodes. Needs no names, so it holds for engines that mark
/// steps with a bare `execute_model` frame.
///
/// `min_tokens` is the fewest tokens the largest step must hold
/// ([`Limit::PrefillTokens`] for marked steps; none for forward passes,
/// see [`from_passes`]).
fn kinds_from_shapes(t: &Tables, steps: &mut [StepSpan], min_tokens: f64) {
    if steps.len() < 2 || steps.iter().any(|s| s.kind.is_some()) {
        return;
    }
    let cpu = &t.cpu;
    // Per step: the first telling op's start, its tokens, and whether it
    // reads one token a sequence.
    let mut first: Vec<Option<(i64, u64, bool)>> = vec![None; steps.len()];
    let mut telling: HashMap<Sym, bool> = HashMap::new();
    let mut cursor = StepCursor::new(steps);
    for i in 0..cpu.len() {
        crate::cancel::point(i);
        if cpu.kind()[i] != CpuKind::Op || cpu.shapes(i) == 0 {
            continue;
        }
        let name = cpu.name()[i];
        if !*telling
            .entry(name)
            .or_insert_with(|| token_input(t.name(name)).is_some())
        {
            continue;
        }
        let ts = cpu.ts().get(i);
        let Some(s) = cursor.at(ts) else { continue };
        if first[s].is_some_and(|(at, _, _)| at <= ts) {
            continue;
        }
        let (name, shapes) = (t.name(name), t.name(cpu.shapes(i)));
        if let Some(n) = tokens_of(name, shapes) {
            first[s] = Some((ts, n, n == 1 || one_a_sequence(name, shapes)));
        }
    }
    let tokens: Vec<u64> = first.iter().flatten().map(|f| f.1).collect();
    let (Some(&lo), Some(&hi)) = (tokens.iter().min(), tokens.iter().max()) else {
        return;
    };
    // Forward passes that each embed one token a sequence, or whose first
    // telling op reads one token, are decodes: an encoder-decoder's
    // generation runs its encoder before the first pass, which decodes the
    // start token (Hugging Face's BART: its passes had no kind; T5's,
    // Whisper's and Blenderbot's passes are cut after the embedding, and
    // their first GEMM reads one row).
    if min_tokens == 0.0 && first.iter().all(|f| f.is_some_and(|f| f.2)) {
        if passes_read_as_they_start(t, steps, &first) {
            steps
                .iter_mut()
                .for_each(|s| s.kind = Some(StepKind::Decode));
        }
        return;
    }
    // Prefills hold many more tokens than a decode's batch.
    if (hi as f64) < limits::get(Limit::PrefillRatio) * lo as f64 || (hi as f64) < min_tokens {
        return;
    }
    let cut = ((hi as f64) * (lo as f64)).sqrt();
    for (s, f) in steps.iter_mut().zip(&first) {
        s.kind = f.map(|(_, n, _)| {
            if n as f64 >= cut {
                StepKind::Prefill
            } else {
                StepKind::Decode
            }
        });
    }
}

/// Whether each pass's GEMMs read, for the most part, no more rows than
/// its first telling op ([`Limit::DecodeGemmShare`]): a decode reads one
/// token a sequence throughout. A diffusion model's denoising pass starts
/// with its timestep's projection, one row, and then runs its blocks over
/// every image token (FLUX). Attention's `aten::matmul` is not counted: its
/// rows are a decode's heads.
fn passes_read_as_they_start(
    t: &Tables,
    steps: &[StepSpan],
    first: &[Option<(i64, u64, bool)>],
) -> bool {
    let cpu = &t.cpu;
    // Per step: GEMMs that read at most the first op's rows, and all.
    let mut as_first = vec![(0u64, 0u64); steps.len()];
    let mut cursor = StepCursor::new(steps);
    for i in 0..cpu.len() {
        crate::cancel::point(i);
        if cpu.kind()[i] != CpuKind::Op || cpu.shapes(i) == 0 {
            continue;
        }
        let name = t.name(cpu.name()[i]);
        if !matches!(name, "aten::linear" | "aten::addmm" | "aten::mm") {
            continue;
        }
        let Some(s) = cursor.at(cpu.ts().get(i)) else {
            continue;
        };
        let (Some((_, n, _)), Some(rows)) = (first[s], tokens_of(name, t.name(cpu.shapes(i))))
        else {
            continue;
        };
        as_first[s].0 += (rows <= n) as u64;
        as_first[s].1 += 1;
    }
    as_first
        .iter()
        .all(|&(small, all)| small as f64 >= limits::get(Limit::DecodeGemmShare) * all as f64)
}

/// `path/file.py(12): execute_model` -> `execute_model` (with its file).
fn frame_function(name: &str) -> String {
    match name.rsplit_once("): ") {
        Some((head, func)) => {
            let file = head.rsplit('/').next().unwrap_or(head);
            let file = file.split('(').next().unwrap_or(file);
            format!("{file} {func}")
        }
        None => name.to_string(),
    }
}

/// Every op, annotation and Python frame whose name passes `keep`.
fn spans_named(t: &Tables, keep: impl Fn(&str) -> bool) -> Vec<StepSpan> {
    let mut class: HashMap<Sym, bool> = HashMap::new();
    let mut out = Vec::new();
    let mut visit = |name: Sym, ts: i64, dur: i64| {
        if *class.entry(name).or_insert_with(|| keep(t.name(name))) {
            out.push(StepSpan {
                name,
                ts,
                end: ts + dur,
                kind: kind_of(t.name(name)),
                pass: None,
            });
        }
    };
    let cpu = &t.cpu;
    for i in 0..cpu.len() {
        crate::cancel::point(i);
        if cpu.kind()[i].is_op() {
            visit(cpu.name()[i], cpu.ts().get(i), cpu.dur().get(i));
        }
    }
    let py = &t.python;
    for i in 0..py.len() {
        crate::cancel::point(i);
        visit(py.name()[i], py.ts().get(i), py.dur().get(i));
    }
    out
}

/// How many times an outermost annotation must repeat to mark steps: an
/// engine loop's `record_function("execute_model")` runs once per step,
/// and two steps are the fewest a loop shows (the family's engine captures
/// have five, `tests/it/captures.rs`). One alone is a region, not a step.
const MIN_STEP_REPEATS: usize = 2;

/// When nothing else marks steps: the outermost annotation (a
/// `record_function` range inside no other op or annotation on its
/// thread) that repeats and holds most of its thread's time, as an engine
/// loop's `execute_model` does; or the outermost `nn.Module` frame that
/// does, as a model's own frame does in each forward pass of
/// `model.generate()` profiled with stacks and no schedule
/// (`captures::a_forward_pass_run_again_without_step_marks_is_one_pass`).
/// Its spans, and its name.
fn repeating_annotation(t: &Tables) -> Option<(Vec<StepSpan>, String)> {
    let cpu = &t.cpu;
    // Per thread: ops, annotations and module frames by start, longer first.
    let mut by_track: HashMap<u32, Vec<u32>> = HashMap::new();
    let launching = |k: CpuKind| matches!(k, CpuKind::Runtime | CpuKind::Driver);
    let range = |k: CpuKind| matches!(k, CpuKind::Annotation | CpuKind::Module);
    for i in 0..cpu.len() {
        crate::cancel::point(i);
        let k = cpu.kind()[i];
        if k.is_op() || launching(k) || k == CpuKind::Module {
            by_track
                .entry(cpu.track().get(i))
                .or_default()
                .push(i as u32);
        }
    }
    // Per name: the outermost annotations' spans, and (its time, the time
    // of the outermost slices on the threads it is on).
    let mut outer: HashMap<Sym, Vec<(i64, i64)>> = HashMap::new();
    let mut held: HashMap<Sym, (i64, i64)> = HashMap::new();
    // The names that are module frames.
    let mut modules: hashbrown::HashSet<Sym> = hashbrown::HashSet::new();
    // Names whose outermost ranges make runtime calls (launch GPU work).
    let mut launches: hashbrown::HashSet<Sym> = hashbrown::HashSet::new();
    for slices in by_track.values_mut() {
        crate::import::store::sort_by_start(slices, cpu.ts(), cpu.dur(), |_, _| {
            std::cmp::Ordering::Equal
        });
        let mut open_until = i64::MIN;
        let mut open: Option<Sym> = None;
        let mut thread_ns = 0i64;
        let mut on_thread: HashMap<Sym, i64> = HashMap::new();
        for &i in slices.iter() {
            let i = i as usize;
            let (ts, end) = (cpu.ts().get(i), cpu.ts().get(i) + cpu.dur().get(i));
            if launching(cpu.kind()[i]) {
                if let Some(name) = open.filter(|_| ts < open_until) {
                    launches.insert(name);
                }
                continue;
            }
            if ts < open_until {
                continue;
            }
            open_until = end;
            open = range(cpu.kind()[i]).then_some(cpu.name()[i]);
            thread_ns += end - ts;
            if range(cpu.kind()[i]) {
                if cpu.kind()[i] == CpuKind::Module {
                    modules.insert(cpu.name()[i]);
                }
                outer.entry(cpu.name()[i]).or_default().push((ts, end));
                *on_thread.entry(cpu.name()[i]).or_default() += end - ts;
            }
        }
        for (name, ns) in on_thread {
            let e = held.entry(name).or_default();
            e.0 += ns;
            e.1 += thread_ns;
        }
    }
    let covers = |name: &Sym| {
        held.get(name).is_some_and(|&(ns, all)| {
            all > 0 && ns as f64 >= limits::get(Limit::StepCoverage) * all as f64
        })
    };
    // In a trace with GPU work, a step launches some: a data loader's
    // `enumerate(DataLoader)#...__next__` that waits for its workers
    // (param-resnet-rtx2080ti: 64% of the thread, no launch) is no step.
    let holds_work = |name: &Sym| t.gpu.is_empty() || launches.contains(name);
    // A collective's range (`nccl:all_gather`) is a part of a step, however
    // long it waits: a tensor-parallel decode replayed from a CUDA graph
    // without step marks spends most of its thread in it, outside the
    // replay it belongs to (`architectures::
    // graph_replays_without_step_marks_are_not_stepped_by_their_collective`).
    let collective = |name: &Sym| {
        super::names::category(kinetoscope_types::GpuOpKind::Kernel, t.name(*name))
            == kinetoscope_types::KernelCategory::Communication
    };
    let (name, mut spans) = outer
        .into_iter()
        .filter(|(name, v)| {
            v.len() >= MIN_STEP_REPEATS && covers(name) && holds_work(name) && !collective(name)
        })
        .max_by_key(|(name, v)| {
            (
                v.iter().map(|(a, b)| b - a).sum::<i64>(),
                std::cmp::Reverse(*name),
            )
        })?;
    if modules.contains(&name) {
        // A pass runs until the next begins (what the caller does between
        // passes, a training step's backward and optimizer, is its pass's),
        // the last to the end of the trace's CPU work.
        spans.sort_unstable();
        let cpu_end = (0..cpu.len())
            .map(|i| cpu.ts().get(i) + cpu.dur().get(i))
            .max()
            .unwrap_or(i64::MIN);
        for k in 0..spans.len() {
            let next = spans.get(k + 1).map_or(cpu_end, |n| n.0);
            spans[k].1 = spans[k].1.max(next);
        }
    }
    let steps = spans
        .into_iter()
        .zip(1..)
        .map(|((ts, end), n)| StepSpan {
            name,
            ts,
            end,
            kind: kind_of(t.name(name)),
            // A model's own frame, called again: its forward passes.
            pass: modules.contains(&name).then_some(n),
        })
        .collect();
    Some((steps, t.name(name).to_string()))
}

/// Steps without a kind of their own take it from the annotations and
/// frames inside them (`forward_decode` inside `execute_model`, say).
fn kinds_from_inside(t: &Tables, steps: &mut [StepSpan]) {
    if steps.iter().all(|s| s.kind.is_some()) {
        return;
    }
    let mut class: HashMap<Sym, Option<StepKind>> = HashMap::new();
    let mut hints: Vec<(i64, StepKind)> = Vec::new();
    let mut visit = |name: Sym, ts: i64| {
        if let Some(k) = *class.entry(name).or_insert_with(|| kind_of(t.name(name))) {
            hints.push((ts, k));
        }
    };
    for i in 0..t.cpu.len() {
        crate::cancel::point(i);
        if t.cpu.kind()[i].is_op() {
            visit(t.cpu.name()[i], t.cpu.ts().get(i));
        }
    }
    for i in 0..t.python.len() {
        crate::cancel::point(i);
        visit(t.python.name()[i], t.python.ts().get(i));
    }
    hints.sort_unstable();
    for s in steps.iter_mut().filter(|s| s.kind.is_none()) {
        let from = hints.partition_point(|h| h.0 < s.ts);
        let mut kind = None;
        for h in hints[from..].iter().take_while(|h| h.0 < s.end) {
            kind = Some(join_kinds(kind, h.1));
        }
        s.kind = kind;
    }
}

/// Steps marked by annotations (or ops) of the most preferred marker kind.
fn annotated(t: &Tables) -> (Vec<StepSpan>, Option<StepMarker>) {
    let cpu = &t.cpu;
    // Classify each distinct name once.
    let mut class: Vec<u8> = vec![0; t.names.len()];
    let mut found: Vec<(StepMarker, u32)> = Vec::new();
    for i in 0..cpu.len() {
        crate::cancel::point(i);
        if !matches!(cpu.kind()[i], CpuKind::Annotation | CpuKind::Op) {
            continue;
        }
        let sym = cpu.name()[i] as usize;
        if class[sym] == 0 {
            class[sym] = match StepMarker::of(t.name(sym as Sym)) {
                None => 1,
                Some(m) => 2 + m as u8,
            };
        }
        if class[sym] >= 2 {
            let marker = match class[sym] - 2 {
                0 => StepMarker::ProfilerStep,
                1 => StepMarker::ServingStep,
                2 => StepMarker::Execute,
                _ => StepMarker::Capture,
            };
            found.push((marker, i as u32));
        }
    }
    let Some(best) = found.iter().map(|f| f.0).min() else {
        return (Vec::new(), None);
    };
    let steps: Vec<StepSpan> = found
        .iter()
        .filter(|f| f.0 == best)
        .map(|&(_, i)| {
            let i = i as usize;
            StepSpan {
                name: cpu.name()[i],
                ts: cpu.ts().get(i),
                end: cpu.ts().get(i) + cpu.dur().get(i),
                kind: kind_of(t.name(cpu.name()[i])),
                pass: None,
            }
        })
        .collect();
    (steps, Some(best))
}

/// Index of the step whose span holds `ts`, if any (steps sorted, disjoint).
pub fn step_at(steps: &[StepSpan], ts: i64) -> Option<usize> {
    let k = steps.partition_point(|s| s.ts <= ts);
    if k == 0 {
        return None;
    }
    let s = &steps[k - 1];
    (ts < s.end || (ts == s.ts)).then_some(k - 1)
}

/// [`step_at`] for times that mostly come in order (a table's rows): the
/// last step found is tried first.
pub struct StepCursor<'a> {
    steps: &'a [StepSpan],
    last: usize,
}

impl<'a> StepCursor<'a> {
    /// A cursor over `steps` (sorted by start).
    pub fn new(steps: &'a [StepSpan]) -> Self {
        StepCursor { steps, last: 0 }
    }

    /// The same answer as [`step_at`].
    pub fn at(&mut self, ts: i64) -> Option<usize> {
        let k = self.last;
        if let Some(s) = self.steps.get(k) {
            // The last step starting at or before `ts` is still step k.
            if s.ts <= ts && self.steps.get(k + 1).is_none_or(|n| n.ts > ts) {
                return (ts < s.end || ts == s.ts).then_some(k);
            }
        }
        let found = step_at(self.steps, ts);
        if let Some(k) = found {
            self.last = k;
        }
        found
    }
}

/// Whether a name is torch.profiler's step range: `ProfilerStep#12`, or
/// `ProfilerStep##`, the same past the trace's bound on distinct names
/// (`store::fold_text`: a trace of more than 10,000 steps kept only its
/// first 9,990 steps before, the rest folded out of sight).
pub fn is_profiler_step(name: &str) -> bool {
    name.strip_prefix("ProfilerStep#")
        .is_some_and(|n| n == "#" || n.parse::<i64>().is_ok())
}

/// The step number in a marker name (`ProfilerStep#12` -> 12).
pub fn step_number(name: &str) -> Option<i64> {
    name.strip_prefix("ProfilerStep#")
        .and_then(|n| n.parse().ok())
}

pub use kinetoscope_types::steps::percentile;

/// The step table: one row per step, and the statistics over them.
pub(crate) struct StepTable {
    /// One row per step, in time order.
    pub rows: Vec<StepRow>,
    /// Count, mean, percentiles, per kind.
    pub stats: StepsStats,
}

/// Builds the step table from the steps and where each GPU op's launch fell.
pub(crate) fn table(cx: &Context, source: Option<StepSource>) -> StepTable {
    let t = cx.t;
    let gpu = &t.gpu;
    let (lo, _) = super::trace_info::window(t).unwrap_or((0, 0));
    let mut rows: Vec<StepRow> = cx
        .steps
        .iter()
        .map(|s| StepRow {
            name: s.label(t),
            number: s.number(t),
            start_us: us(s.ts - lo),
            cpu_us: us(s.end - s.ts),
            kind: s.kind,
            ..Default::default()
        })
        .collect();
    let mut span: Vec<(i64, i64)> = vec![(i64::MAX, i64::MIN); rows.len()];
    for g in 0..gpu.len() {
        crate::cancel::point(g);
        let s = cx.gpu_step.get(g);
        if s == NO {
            continue;
        }
        let s = s as usize;
        rows[s].device_us += us(gpu.dur().get(g));
        rows[s].kernels += 1;
        span[s].0 = span[s].0.min(gpu.ts().get(g));
        span[s].1 = span[s].1.max(gpu.ts().get(g) + gpu.dur().get(g));
    }
    compile_time(cx, &mut rows);
    let annotated = gpu_annotations(cx);
    // Each step ends when both its CPU range and its GPU work have (its
    // completion). A step's time is the time from the previous step's
    // completion, or from its own CPU start when that is later (an idle
    // gap between steps is no step's), to its own completion: the step's
    // period when the CPU runs ahead of the GPU (graph replays, a loop
    // without a sync per step), its own CPU-start-to-GPU-end otherwise, and
    // the steps' times never add up to more than the time they span. The
    // first step has no previous completion: the longer of its CPU range
    // and its GPU side (work queued before the window opened is no step's).
    let mut previous: Option<i64> = None;
    for (k, (row, (a, b))) in rows.iter_mut().zip(span).enumerate() {
        if a <= b {
            row.gpu_span_us = us(b - a);
        }
        // The GPU side: the step's own GPU annotation, else its ops' span.
        let side = annotated[k].or((a <= b).then_some((a, b)));
        let (ts, end) = (cx.steps[k].ts, cx.steps[k].end);
        let done = side.map_or(end, |(_, gb)| end.max(gb));
        if let Some((ga, gb)) = side {
            row.gpu_start_us = Some(us(ga - lo));
            row.gpu_end_us = Some(us(gb - lo));
        }
        let time = match previous {
            None => side.map_or(end - ts, |(ga, gb)| (end - ts).max(gb - ga)),
            Some(p) => match done - ts.max(p) {
                t if t > 0 => t,
                // Done before the step before it was (work on another
                // stream): its CPU range.
                _ => end - ts,
            },
        };
        row.time_us = us(time);
        row.wall_us = us(done - ts);
        previous = Some(previous.map_or(done, |p| p.max(done)));
    }
    // A trailing step that ran no GPU op in a trace that has GPU ops (the
    // engine's frame after its last batch) is no step of the model's.
    let mut left_out: u64 = 0;
    if cx.gpu_op_ns > 0 {
        for row in rows.iter_mut().rev() {
            if row.kernels > 0 || left_out as usize + 1 >= cx.steps.len() {
                break;
            }
            row.left_out = true;
            left_out += 1;
        }
    }
    if rows.is_empty() {
        return StepTable {
            rows,
            stats: StepsStats::default(),
        };
    }
    let all: Vec<&StepRow> = rows.iter().filter(|r| !r.left_out).collect();
    let whole = Durations::of(&all);
    let mut by_kind = Vec::new();
    for kind in [StepKind::Prefill, StepKind::Decode, StepKind::Mixed] {
        let of: Vec<&StepRow> = all
            .iter()
            .copied()
            .filter(|r| r.kind == Some(kind))
            .collect();
        if !of.is_empty() {
            let d = Durations::of(&of);
            by_kind.push(StepKindStats {
                kind,
                count: d.count,
                mean_us: d.mean_us,
                p50_us: d.p50_us,
                mean_device_us: d.mean_device_us,
            });
        }
    }
    let stats = StepsStats {
        count: whole.count,
        left_out,
        source: source.unwrap_or_default(),
        mean_us: whole.mean_us,
        p50_us: whole.p50_us,
        p90_us: whole.p90_us,
        min_us: whole.min_us,
        max_us: whole.max_us,
        mean_device_us: whole.mean_device_us,
        by_kind,
    };
    StepTable { rows, stats }
}

/// Whether an op or annotation name is `torch.compile` compiling (not
/// running what it compiled): dynamo's and Inductor's timed ranges (`…
/// (dynamo_timed)`, torch 2.x's `record_function` of each phase) and the
/// phases they are named after. `Torch-Compiled Region`, `TorchDynamo
/// Cache Lookup` and `## Call CompiledFxGraph ##` run compiled code and are
/// not compiling.
pub fn is_compiling(name: &str) -> bool {
    name.ends_with("(dynamo_timed)")
        || [
            "_compile.compile_inner",
            "compile_fx",
            "GraphLowering.run",
            "GraphLowering.compile_to_module",
            "Scheduler.codegen",
            "Scheduler.__init__",
            "OutputGraph.call_user_compiler",
            "create_aot_dispatcher_function",
            "PythonDispatchMode",
            "async_compile.wait",
        ]
        .iter()
        .any(|k| name.starts_with(k))
}

/// How Inductor names the range of a call of a graph it compiled:
/// `## Call CompiledFxGraph <hash> ##`, one hash a graph.
pub const COMPILED_GRAPH_CALL: &str = "## Call CompiledFxGraph";

/// Whether an op or annotation name is a range around compiled code that
/// runs it (not an op of the model): `Torch-Compiled Region`, the
/// AOT runtime wrapper's `CompiledFunction`, Inductor's `## Call
/// CompiledFxGraph … ##`, and the compiled backward autograd runs
/// (`CompiledFunctionBackward`, in its `autograd::engine::evaluate_function:`
/// range). The ops the compiled code still calls (extern GEMMs, attention
/// and its backward, custom ops) run inside them.
pub fn is_compiled_region(name: &str) -> bool {
    name.starts_with("Torch-Compiled Region")
        || name.starts_with(COMPILED_GRAPH_CALL)
        || name == "CompiledFunction"
        || name
            .strip_prefix("autograd::engine::evaluate_function: ")
            .unwrap_or(name)
            == "CompiledFunctionBackward"
}

/// Each step's CPU time in compilation ranges (the outermost of them, so a
/// phase inside a phase counts once).
fn compile_time(cx: &Context, rows: &mut [StepRow]) {
    let t = cx.t;
    let cpu = &t.cpu;
    let mut class: HashMap<Sym, bool> = HashMap::new();
    let mut compiling = |i: usize| {
        cpu.kind()[i].is_op()
            && *class
                .entry(cpu.name()[i])
                .or_insert_with(|| is_compiling(t.name(cpu.name()[i])))
    };
    let mut cursor = StepCursor::new(&cx.steps);
    for i in 0..cpu.len() {
        crate::cancel::point(i);
        if !compiling(i) {
            continue;
        }
        // Only the outermost: no compiling range above it (the walk is
        // bounded by the op tree's depth).
        let mut p = cx.links.parent.get(i);
        let mut inside = false;
        while p != NO {
            if compiling(p as usize) {
                inside = true;
                break;
            }
            p = cx.links.parent.get(p as usize);
        }
        if inside {
            continue;
        }
        if let Some(k) = cursor.at(cpu.ts().get(i)) {
            rows[k].compile_us += us(cpu.dur().get(i));
        }
    }
}

/// Per step: the span of its GPU-side annotation (torch writes each
/// `ProfilerStep#N`, and each `record_function` range, once on the CPU and
/// once as a `gpu_user_annotation` around that range's GPU work), when the
/// trace has one of the step's name: the first start to the last end over
/// the streams it is on. A name that marks several steps (an engine's
/// `execute_model`) is matched in order: the k-th GPU annotation of a name
/// to the k-th step of that name.
fn gpu_annotations(cx: &Context) -> Vec<Option<(i64, i64)>> {
    let t = cx.t;
    let gpu = &t.gpu;
    let mut out = vec![None; cx.steps.len()];
    let mut by_name: hashbrown::HashMap<Sym, Vec<usize>> = hashbrown::HashMap::new();
    for (k, s) in cx
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.pass.is_none())
    {
        by_name.entry(s.name).or_default().push(k);
    }
    // Per name, the GPU annotations in start order, merged across streams
    // where they overlap (one range on two streams).
    let mut spans: hashbrown::HashMap<Sym, Vec<(i64, i64)>> = hashbrown::HashMap::new();
    for g in 0..gpu.len() {
        crate::cancel::point(g);
        if gpu.kind()[g] != GpuKind::Annotation || !by_name.contains_key(&gpu.name()[g]) {
            continue;
        }
        let ts = gpu.ts().get(g);
        spans
            .entry(gpu.name()[g])
            .or_default()
            .push((ts, ts + gpu.dur().get(g)));
    }
    for (name, mut v) in spans {
        v.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::new();
        for (a, b) in v {
            match merged.last_mut() {
                Some(m) if a < m.1 => m.1 = m.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let steps = &by_name[&name];
        // Only a one-to-one match says which GPU span is which step's.
        if merged.len() == steps.len() {
            for (&k, span) in steps.iter().zip(merged) {
                out[k] = Some(span);
            }
        }
    }
    out
}

/// The statistics of some steps' durations.
struct Durations {
    count: u64,
    mean_us: f64,
    p50_us: f64,
    p90_us: f64,
    min_us: f64,
    max_us: f64,
    mean_device_us: f64,
}

impl Durations {
    /// Over at least one step.
    fn of(rows: &[&StepRow]) -> Durations {
        let mut durs: Vec<f64> = rows.iter().map(|r| r.time()).collect();
        durs.sort_by(f64::total_cmp);
        let n = durs.len();
        Durations {
            count: n as u64,
            mean_us: durs.iter().sum::<f64>() / n as f64,
            p50_us: percentile(&durs, 50.0),
            p90_us: percentile(&durs, 90.0),
            min_us: durs[0],
            max_us: durs[n - 1],
            mean_device_us: rows.iter().map(|r| r.device_us).sum::<f64>() / n as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_cursor_answers_as_step_at_in_any_order() {
        // Steps with gaps, one of zero length, one overlapping the next.
        let span = |ts, end| StepSpan {
            name: 0,
            ts,
            end,
            kind: None,
            pass: None,
        };
        let steps = [
            span(10, 20),
            span(20, 30),
            span(35, 35),
            span(40, 60),
            span(50, 70),
        ];
        let mut cursor = StepCursor::new(&steps);
        let mut times: Vec<i64> = (0..80).collect();
        times.extend((0..80).rev());
        times.extend((0..400).map(|k| (k * 37) % 80));
        for ts in times {
            assert_eq!(cursor.at(ts), step_at(&steps, ts), "at {ts}");
        }
        assert_eq!(StepCursor::new(&[]).at(5), None);
    }

    #[test]
    fn markers() {
        assert_eq!(
            StepMarker::of("ProfilerStep#5"),
            Some(StepMarker::ProfilerStep)
        );
        assert_eq!(StepMarker::of("ProfilerStep#x"), None);
        assert_eq!(
            StepMarker::of("step[EXTEND bs=15 toks=15360]"),
            Some(StepMarker::ServingStep)
        );
        assert_eq!(StepMarker::of("capture_32_FULL"), Some(StepMarker::Capture));
        assert_eq!(StepMarker::of("aten::mm"), None);
    }

    #[test]
    fn tokens_from_shapes() {
        assert_eq!(
            input_dims("[[64, 7168], [7168, 4608]]", 0),
            Some(vec![64, 7168])
        );
        assert_eq!(
            input_dims("[[16160, 7168], [64], [], []]", 1),
            Some(vec![64])
        );
        assert_eq!(input_dims("[[], [3]]", 0), None);
        assert_eq!(input_dims("[[[1, 2]], [3]]", 0), None);
        assert_eq!(
            tokens_of("aten::embedding", "[[16160, 7168], [4096], [], [], []]"),
            Some(4096)
        );
        assert_eq!(
            tokens_of("aten::linear", "[[2, 2048, 4096], [4096, 4096], []]"),
            Some(4096)
        );
        assert_eq!(
            tokens_of("aten::addmm", "[[4096], [32, 4096], [4096, 4096]]"),
            Some(32)
        );
        assert_eq!(tokens_of("aten::add", "[[32, 4096]]"), None);
        // T5's relative position biases: 32 buckets, a [queries, keys] index.
        assert_eq!(
            tokens_of("aten::embedding", "[[32, 4], [1, 3], [], [], []]"),
            None
        );
    }

    #[test]
    fn kinds_and_engine_frames() {
        assert_eq!(kind_of("step[DECODE bs=32]"), Some(StepKind::Decode));
        assert_eq!(
            kind_of("step[EXTEND bs=15 toks=15360]"),
            Some(StepKind::Prefill)
        );
        assert_eq!(
            kind_of("execute_8192_context_9(sq8155)_generation_37(sq37)"),
            Some(StepKind::Mixed)
        );
        assert_eq!(
            kind_of("execute_64_generation_64(sq1)"),
            Some(StepKind::Decode)
        );
        assert_eq!(
            kind_of("sglang/srt/model_executor/model_runner.py(1760): forward_decode"),
            Some(StepKind::Decode)
        );
        assert_eq!(
            engine_frame_rank("vllm/v1/worker/gpu_model_runner.py(1002): execute_model"),
            Some(0)
        );
        assert_eq!(
            engine_frame_rank("sglang/srt/managers/scheduler.py(1700): run_batch"),
            Some(1)
        );
        assert_eq!(
            engine_frame_rank("vllm/compilation/backends.py(608): __call__"),
            None
        );
        assert_eq!(
            frame_function("vllm/v1/worker/gpu_model_runner.py(1002): execute_model"),
            "gpu_model_runner.py execute_model"
        );
    }
}
