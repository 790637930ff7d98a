//! The device table: each GPU's peak memory bandwidth and dense tensor
//! throughput, and the rule that finds a trace's GPU in it from what
//! `deviceProperties` says (`name`, `numSms`, `computeMajor`,
//! `totalGlobalMem`).
//!
//! Pure data and one matching rule. A name the table does not know, or an
//! empty one, is an unknown device: never the nearest guess, since a wrong
//! peak makes every `% of peak` wrong. Where one name covers variants with
//! different peaks (the A100's 40 and 80 GB parts), the properties tell
//! them apart; where they cannot, the device is unknown.
//!
//! Peaks are dense (no structured sparsity), at boost clock, per device as
//! torch sees it (one GCD of a two-die MI250X). Each entry cites the public
//! datasheet its numbers come from.

use kinetoscope_types::{Device, PeakSource};

/// What `deviceProperties` says about one device.
#[derive(Clone, Debug, Default)]
pub struct DeviceQuery<'a> {
    /// `name`, as written.
    pub name: &'a str,
    /// `numSms` (compute units on AMD).
    pub sms: Option<i64>,
    /// `computeMajor`.
    pub compute_major: Option<i64>,
    /// `totalGlobalMem`, bytes.
    pub memory_bytes: Option<i64>,
}

/// One device in the table.
struct Entry {
    /// The name shown to users.
    name: &'static str,
    /// Words (of the normalized name, see [`words`]) that must all appear.
    all_of: &'static [&'static str],
    /// Words that must not appear (another variant's).
    none_of: &'static [&'static str],
    /// `totalGlobalMem` in GiB must lie in this range, when the trace says.
    memory_gib: (f64, f64),
    /// `numSms` must be this, when set and the trace says.
    sms: Option<i64>,
    /// `computeMajor` must be this, when set and the trace says.
    compute_major: Option<i64>,
    /// Peak memory bandwidth, GB/s.
    gbps: f64,
    /// Dense BF16 (or FP16) tensor TFLOP/s.
    bf16: f64,
    /// Dense FP8 tensor TFLOP/s, 0 where there is none.
    fp8: f64,
    /// Dense FP32 TFLOP/s.
    fp32: f64,
}

const ANY_MEMORY: (f64, f64) = (0.0, f64::INFINITY);

/// An entry with no memory, SM or architecture condition.
const fn entry(
    name: &'static str,
    all_of: &'static [&'static str],
    none_of: &'static [&'static str],
    [gbps, bf16, fp8, fp32]: [f64; 4],
) -> Entry {
    Entry {
        name,
        all_of,
        none_of,
        memory_gib: ANY_MEMORY,
        sms: None,
        compute_major: None,
        gbps,
        bf16,
        fp8,
        fp32,
    }
}

/// Like [`entry`], told apart from its siblings by memory size.
const fn by_memory(
    name: &'static str,
    all_of: &'static [&'static str],
    none_of: &'static [&'static str],
    memory_gib: (f64, f64),
    peaks: [f64; 4],
) -> Entry {
    Entry {
        memory_gib,
        ..entry(name, all_of, none_of, peaks)
    }
}

/// Like [`entry`], told apart by its compute units.
const fn by_sms(
    name: &'static str,
    all_of: &'static [&'static str],
    none_of: &'static [&'static str],
    sms: i64,
    peaks: [f64; 4],
) -> Entry {
    Entry {
        sms: Some(sms),
        ..entry(name, all_of, none_of, peaks)
    }
}

/// The table: `[GB/s, BF16 TFLOP/s, FP8 TFLOP/s, FP32 TFLOP/s]`, dense.
#[rustfmt::skip]
const TABLE: &[Entry] = &[
    // NVIDIA V100 datasheet (2020): SXM2 900 GB/s, 125 TFLOPS tensor (FP16), 15.7 FP32;
    // PCIe 900 GB/s, 112, 14. V100S PCIe: 1134 GB/s, 130, 16.4. No BF16: FP16 tensor.
    entry("NVIDIA V100 SXM2", &["v100"], &["pcie", "v100s"], [900.0, 125.0, 0.0, 15.7]),
    entry("NVIDIA V100 PCIe", &["v100", "pcie"], &["v100s"], [900.0, 112.0, 0.0, 14.0]),
    entry("NVIDIA V100S PCIe", &["v100s"], &[], [1134.0, 130.0, 0.0, 16.4]),
    // NVIDIA T4 datasheet: 320 GB/s, 65 TFLOPS FP16 tensor, 8.1 FP32.
    entry("NVIDIA T4", &["t4"], &[], [320.0, 65.0, 0.0, 8.1]),
    // Quadro GP100 datasheet: 717 GB/s HBM2, 20.7 TFLOPS FP16 (no tensor cores), 10.3 FP32.
    entry("NVIDIA Quadro GP100", &["gp100"], &[], [717.0, 20.7, 0.0, 10.3]),
    // Turing whitepaper, RTX 2080 Ti reference: 616 GB/s, 53.8 TFLOPS FP16 tensor
    // with FP32 accumulate (what torch uses), 13.4 FP32.
    entry("NVIDIA GeForce RTX 2080 Ti", &["rtx", "2080", "ti"], &[], [616.0, 53.8, 0.0, 13.4]),
    // NVIDIA A100 datasheet (2021): 40 GB 1555 GB/s, 80 GB SXM 2039 GB/s, 80 GB PCIe
    // 1935 GB/s; 312 TFLOPS BF16 dense, 19.5 FP32. A800 is the A100 with less NVLink.
    // Meta's A100-PG509-200 is the 40 GB SXM4 board.
    by_memory("NVIDIA A100 SXM4 40GB", &["a100"], &["pcie", "80gb"], (0.0, 48.0), [1555.0, 312.0, 0.0, 19.5]),
    by_memory("NVIDIA A100 SXM4 80GB", &["a100"], &["pcie", "40gb"], (48.0, 100.0), [2039.0, 312.0, 0.0, 19.5]),
    by_memory("NVIDIA A100 PCIe 40GB", &["a100", "pcie"], &["80gb"], (0.0, 48.0), [1555.0, 312.0, 0.0, 19.5]),
    by_memory("NVIDIA A100 PCIe 80GB", &["a100", "pcie"], &["40gb"], (48.0, 100.0), [1935.0, 312.0, 0.0, 19.5]),
    by_memory("NVIDIA A800 SXM4 80GB", &["a800"], &["pcie"], (48.0, 100.0), [2039.0, 312.0, 0.0, 19.5]),
    // NVIDIA A10 datasheet: 600 GB/s, 125 TFLOPS BF16 dense, 31.2 FP32.
    entry("NVIDIA A10", &["a10"], &[], [600.0, 125.0, 0.0, 31.2]),
    // NVIDIA L4 datasheet: 300 GB/s, 121 BF16 dense (242 sparse), 242.5 FP8 dense, 30.3 FP32.
    entry("NVIDIA L4", &["l4"], &[], [300.0, 121.0, 242.5, 30.3]),
    // NVIDIA L40S datasheet: 864 GB/s, 362 BF16 dense, 733 FP8 dense, 91.6 FP32.
    entry("NVIDIA L40S", &["l40s"], &[], [864.0, 362.05, 733.0, 91.6]),
    // NVIDIA H100 datasheet: SXM 3.35 TB/s, 989 BF16 dense, 1979 FP8 dense, 67 FP32;
    // PCIe 2 TB/s, 756, 1513, 51; NVL 3.9 TB/s, 835, 1671, 60. H800 is the H100 SXM
    // with less NVLink.
    entry("NVIDIA H100 SXM", &["h100"], &["pcie", "nvl"], [3350.0, 989.0, 1979.0, 67.0]),
    entry("NVIDIA H100 PCIe", &["h100", "pcie"], &[], [2000.0, 756.0, 1513.0, 51.0]),
    entry("NVIDIA H100 NVL", &["h100", "nvl"], &[], [3900.0, 835.0, 1671.0, 60.0]),
    entry("NVIDIA H800 SXM", &["h800"], &["pcie", "nvl"], [3350.0, 989.0, 1979.0, 67.0]),
    // NVIDIA H200 datasheet: SXM 4.8 TB/s, 989 BF16 dense, 1979 FP8 dense, 67 FP32;
    // NVL 4.8 TB/s, 835, 1671, 60.
    entry("NVIDIA H200", &["h200"], &["nvl"], [4800.0, 989.0, 1979.0, 67.0]),
    entry("NVIDIA H200 NVL", &["h200", "nvl"], &[], [4800.0, 835.0, 1671.0, 60.0]),
    // NVIDIA GH200 datasheet: 96 GB HBM3 at 4 TB/s or 144 GB HBM3e at 4.9 TB/s;
    // 989 BF16 dense, 1979 FP8 dense, 67 FP32.
    by_memory("NVIDIA GH200 96GB", &["gh200"], &[], (0.0, 120.0), [4000.0, 989.0, 1979.0, 67.0]),
    by_memory("NVIDIA GH200 144GB", &["gh200"], &[], (120.0, 200.0), [4900.0, 989.0, 1979.0, 67.0]),
    // NVIDIA H20 (HGX H20 product brief): 4.0 TB/s, 148 BF16 dense, 296 FP8 dense, 44 FP32.
    entry("NVIDIA H20", &["h20"], &[], [4000.0, 148.0, 296.0, 44.0]),
    // NVIDIA HGX B200 datasheet, per GPU: 8 TB/s, 2.25 PFLOPS BF16 dense (4.5 sparse),
    // 4.5 PFLOPS FP8 dense, 75 FP32.
    entry("NVIDIA B200", &["b200"], &[], [8000.0, 2250.0, 4500.0, 75.0]),
    // NVIDIA GB200 NVL72 datasheet, per GPU: 8 TB/s, 2.5 PFLOPS BF16 dense,
    // 5 PFLOPS FP8 dense, 80 FP32.
    entry("NVIDIA GB200", &["gb200"], &[], [8000.0, 2500.0, 5000.0, 80.0]),
    // NVIDIA HGX B300 datasheet, per GPU: 8 TB/s, 2.25 PFLOPS BF16 dense, 4.5 FP8 dense,
    // 75 FP32.
    entry("NVIDIA B300", &["b300"], &[], [8000.0, 2250.0, 4500.0, 75.0]),
    // NVIDIA GB300 NVL72 datasheet, per GPU: 8 TB/s, 2.5 PFLOPS BF16 dense, 5 FP8 dense,
    // 80 FP32.
    entry("NVIDIA GB300", &["gb300"], &[], [8000.0, 2500.0, 5000.0, 80.0]),
    // Ada whitepaper, RTX 4090: 1008 GB/s, 165.2 TFLOPS BF16 with FP32 accumulate,
    // 330.3 FP8 (FP32 accumulate), 82.6 FP32.
    entry("NVIDIA GeForce RTX 4090", &["rtx", "4090"], &[], [1008.0, 165.2, 330.3, 82.6]),
    // NVIDIA RTX 6000 Ada datasheet: 960 GB/s, 1457 TFLOPS FP8 sparse (728.5 dense),
    // 364.2 BF16 dense, 91.1 FP32.
    entry("NVIDIA RTX 6000 Ada", &["rtx", "6000", "ada"], &[], [960.0, 364.2, 728.5, 91.1]),
    // NVIDIA RTX PRO 6000 Blackwell datasheet: 1792 GB/s, 4 PFLOPS FP4 sparse, so 1 PFLOPS
    // FP8 dense and 504 BF16 dense; 125 FP32.
    entry("NVIDIA RTX PRO 6000 Blackwell", &["rtx", "pro", "6000", "blackwell"], &[], [1792.0, 504.0, 1008.0, 125.0]),
    // AMD Instinct MI210 datasheet: 1.6 TB/s, 181 TFLOPS BF16, 45.3 FP32 matrix.
    entry("AMD Instinct MI210", &["mi210"], &[], [1638.0, 181.0, 0.0, 45.3]),
    // AMD Instinct MI250X and MI250 datasheets, per GCD (torch sees each of the two dies
    // as a device): MI250X 110 CUs, 1.64 TB/s, 191.5 BF16, 47.9 FP32 matrix; MI250
    // 104 CUs, 1.64 TB/s, 181, 45.3. ROCm names both "AMD Instinct MI250X / MI250".
    by_sms("AMD Instinct MI250X (one GCD)", &["mi250x"], &[], 110, [1638.0, 191.5, 0.0, 47.9]),
    by_sms("AMD Instinct MI250 (one GCD)", &["mi250"], &[], 104, [1638.0, 181.0, 0.0, 45.3]),
    // AMD Instinct MI300X datasheet: 5.3 TB/s, 1307.4 BF16 dense, 2614.9 FP8 dense,
    // 163.4 FP32 matrix.
    entry("AMD Instinct MI300X", &["mi300x"], &[], [5300.0, 1307.4, 2614.9, 163.4]),
    // AMD Instinct MI325X datasheet: 6 TB/s, 1307.4 BF16 dense, 2614.9 FP8 dense, 163.4.
    entry("AMD Instinct MI325X", &["mi325x"], &[], [6000.0, 1307.4, 2614.9, 163.4]),
    // AMD Instinct MI350X datasheet: 8 TB/s, 2.3 PFLOPS FP16 dense, 4.6 FP8 dense, 144.2.
    entry("AMD Instinct MI350X", &["mi350x"], &[], [8000.0, 2300.0, 4600.0, 144.2]),
    // AMD Instinct MI355X datasheet: 8 TB/s, 2.5 PFLOPS FP16 dense, 5.0 FP8 dense, 157.3.
    entry("AMD Instinct MI355X", &["mi355x"], &[], [8000.0, 2500.0, 5000.0, 157.3]),
];

/// The name's words: lower case, with the vendor and line prefixes
/// (`NVIDIA`, `AMD`, `Instinct`, `Tesla`, `GeForce`, `Quadro`) and the
/// separators (`-`, `_`, `/`, spaces) gone, and a memory size glued to its
/// unit (`80 GB` -> `80gb`). `NVIDIA A100-SXM4-80GB` -> `a100 sxm4 80gb`.
fn words(name: &str) -> Vec<String> {
    let lower = name.to_ascii_lowercase();
    let mut out: Vec<String> = Vec::new();
    for w in
        lower.split(|c: char| c.is_whitespace() || matches!(c, '-' | '_' | '/' | ',' | '(' | ')'))
    {
        if w.is_empty()
            || matches!(
                w,
                "nvidia" | "amd" | "instinct" | "tesla" | "geforce" | "quadro"
            )
        {
            continue;
        }
        if w == "gb" {
            if let Some(last) = out
                .last_mut()
                .filter(|l| l.chars().all(|c| c.is_ascii_digit()))
            {
                last.push_str("gb");
                continue;
            }
        }
        out.push(w.to_string());
    }
    out
}

impl Entry {
    fn matches(&self, words: &[String], q: &DeviceQuery) -> bool {
        let has = |w: &str| words.iter().any(|x| x == w);
        if !self.all_of.iter().all(|w| has(w)) || self.none_of.iter().any(|w| has(w)) {
            return false;
        }
        if let Some(bytes) = q.memory_bytes.filter(|&b| b > 0) {
            let gib = bytes as f64 / (1u64 << 30) as f64;
            if !(self.memory_gib.0..self.memory_gib.1).contains(&gib) {
                return false;
            }
        }
        if let (Some(want), Some(got)) = (self.sms, q.sms) {
            if want != got {
                return false;
            }
        }
        if let (Some(want), Some(got)) = (self.compute_major, q.compute_major) {
            if want != got {
                return false;
            }
        }
        true
    }

    fn peaks(&self) -> [f64; 4] {
        [self.gbps, self.bf16, self.fp8, self.fp32]
    }
}

/// The table's entry for a device, when exactly one entry (or several with
/// the same peaks) fits what the trace says.
fn lookup(q: &DeviceQuery) -> Option<&'static Entry> {
    let words = words(q.name);
    if words.is_empty() {
        return None;
    }
    let mut found = TABLE.iter().filter(|e| e.matches(&words, q));
    let first = found.next()?;
    // Variants the properties cannot tell apart: a guess, so unknown.
    found.all(|e| e.peaks() == first.peaks()).then_some(first)
}

/// The device a trace ran on, with its peaks: from the table, with the
/// user's overrides on top (`peak_gbps` GB/s, `peak_tflops` dense BF16
/// TFLOP/s). `None` when the trace names no device and nothing was given.
pub fn device(
    q: Option<&DeviceQuery>,
    peak_gbps: Option<f64>,
    peak_tflops: Option<f64>,
) -> Option<Device> {
    let overridden = peak_gbps.is_some() || peak_tflops.is_some();
    if q.is_none() && !overridden {
        return None;
    }
    let entry = q.and_then(lookup);
    let nonzero = |v: f64| (v > 0.0).then_some(v);
    let name = match (entry, q.map(|q| q.name.trim())) {
        (Some(e), _) => e.name.to_string(),
        (None, Some(n)) if !n.is_empty() => n.to_string(),
        _ => "unknown device".to_string(),
    };
    Some(Device {
        name,
        peak_gbps: peak_gbps.or_else(|| entry.map(|e| e.gbps)),
        peak_tflops_bf16: peak_tflops.or_else(|| entry.map(|e| e.bf16)),
        peak_tflops_fp8: entry.and_then(|e| nonzero(e.fp8)),
        peak_tflops_fp32: entry.map(|e| e.fp32),
        sms: q
            .and_then(|q| q.sms)
            .and_then(|s| u32::try_from(s).ok())
            .filter(|&s| s > 0),
        source: if overridden {
            PeakSource::Override
        } else if entry.is_some() {
            PeakSource::Table
        } else {
            PeakSource::Unknown
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, sms: Option<i64>, gib: Option<f64>) -> Option<Device> {
        device(
            Some(&DeviceQuery {
                name,
                sms,
                compute_major: None,
                memory_bytes: gib.map(|g| (g * (1u64 << 30) as f64) as i64),
            }),
            None,
            None,
        )
    }

    fn table_name(name: &str, sms: Option<i64>, gib: Option<f64>) -> String {
        let d = named(name, sms, gib).unwrap();
        match d.source {
            PeakSource::Table => d.name,
            _ => format!("unknown: {}", d.name),
        }
    }

    #[test]
    fn names_as_drivers_write_them() {
        let cases: &[(&str, Option<i64>, Option<f64>, &str)] = &[
            (
                "NVIDIA H100 80GB HBM3",
                Some(132),
                Some(79.2),
                "NVIDIA H100 SXM",
            ),
            (
                "NVIDIA H100 PCIe",
                Some(114),
                Some(79.6),
                "NVIDIA H100 PCIe",
            ),
            ("NVIDIA H100 NVL", Some(132), Some(93.1), "NVIDIA H100 NVL"),
            ("NVIDIA H200", Some(132), Some(139.8), "NVIDIA H200"),
            ("nvidia h200 nvl", None, None, "NVIDIA H200 NVL"),
            ("NVIDIA H20", Some(78), Some(95.0), "NVIDIA H20"),
            ("NVIDIA B200", Some(148), Some(178.0), "NVIDIA B200"),
            ("NVIDIA GB200", None, None, "NVIDIA GB200"),
            ("NVIDIA B300 SXM6 AC", None, None, "NVIDIA B300"),
            ("NVIDIA GB300", None, None, "NVIDIA GB300"),
            (
                "NVIDIA A100-SXM4-80GB",
                Some(108),
                Some(79.2),
                "NVIDIA A100 SXM4 80GB",
            ),
            (
                "NVIDIA A100-SXM4-40GB",
                Some(108),
                Some(39.4),
                "NVIDIA A100 SXM4 40GB",
            ),
            (
                "NVIDIA A100-PCIE-40GB",
                Some(108),
                Some(39.4),
                "NVIDIA A100 PCIe 40GB",
            ),
            (
                "NVIDIA A100 80GB PCIe",
                Some(108),
                Some(79.2),
                "NVIDIA A100 PCIe 80GB",
            ),
            (
                "NVIDIA A100-PG509-200",
                Some(108),
                Some(39.4),
                "NVIDIA A100 SXM4 40GB",
            ),
            ("NVIDIA A10", Some(72), Some(22.0), "NVIDIA A10"),
            ("NVIDIA L4", Some(58), Some(22.0), "NVIDIA L4"),
            ("NVIDIA L40S", Some(142), Some(44.5), "NVIDIA L40S"),
            (
                "Tesla V100-SXM2-32GB",
                Some(80),
                Some(31.7),
                "NVIDIA V100 SXM2",
            ),
            (
                "Tesla V100-SXM2-16GB",
                Some(80),
                Some(15.8),
                "NVIDIA V100 SXM2",
            ),
            (
                "Tesla V100-DGXS-32GB",
                Some(80),
                Some(31.7),
                "NVIDIA V100 SXM2",
            ),
            (
                "Tesla V100-PCIE-16GB",
                Some(80),
                Some(15.8),
                "NVIDIA V100 PCIe",
            ),
            (
                "NVIDIA GeForce RTX 4090",
                Some(128),
                Some(23.6),
                "NVIDIA GeForce RTX 4090",
            ),
            (
                "NVIDIA RTX 6000 Ada Generation",
                Some(142),
                Some(47.5),
                "NVIDIA RTX 6000 Ada",
            ),
            (
                "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                Some(188),
                Some(95.0),
                "NVIDIA RTX PRO 6000 Blackwell",
            ),
            (
                "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                None,
                None,
                "NVIDIA RTX PRO 6000 Blackwell",
            ),
            (
                "NVIDIA GeForce RTX 2080 Ti",
                Some(68),
                Some(10.8),
                "NVIDIA GeForce RTX 2080 Ti",
            ),
            ("Quadro GP100", Some(56), Some(15.9), "NVIDIA Quadro GP100"),
            (
                "AMD Instinct MI210",
                Some(104),
                Some(64.0),
                "AMD Instinct MI210",
            ),
            (
                "AMD Instinct MI250X / MI250",
                Some(110),
                Some(64.0),
                "AMD Instinct MI250X (one GCD)",
            ),
            (
                "AMD Instinct MI250X / MI250",
                Some(104),
                Some(64.0),
                "AMD Instinct MI250 (one GCD)",
            ),
            (
                "AMD Instinct MI300X",
                Some(304),
                Some(192.0),
                "AMD Instinct MI300X",
            ),
            (
                "AMD Instinct MI325X",
                Some(304),
                Some(256.0),
                "AMD Instinct MI325X",
            ),
            (
                "AMD Instinct MI355X",
                Some(256),
                Some(288.0),
                "AMD Instinct MI355X",
            ),
        ];
        for &(name, sms, gib, want) in cases {
            assert_eq!(table_name(name, sms, gib), want, "{name}");
        }
    }

    #[test]
    fn unknown_names_are_never_guessed() {
        for name in [
            "ARTEMIS",
            "AMD Radeon Graphics",
            "NVIDIA A10G",
            "NVIDIA A40",
            "Intel Data Center GPU Max 1550",
        ] {
            let d = named(name, Some(104), Some(64.0)).unwrap();
            assert_eq!(d.source, PeakSource::Unknown, "{name}");
            assert_eq!(d.name, name);
            assert_eq!(d.peak_gbps, None);
        }
        let d = named("", Some(304), Some(192.0)).unwrap();
        assert_eq!(
            (d.name.as_str(), d.source),
            ("unknown device", PeakSource::Unknown)
        );
        // One name, two parts with different peaks, nothing to tell them
        // apart: unknown rather than either.
        assert_eq!(
            named("AMD Instinct MI250X / MI250", None, None)
                .unwrap()
                .source,
            PeakSource::Unknown
        );
        assert_eq!(
            named("NVIDIA A100-SXM4", None, None).unwrap().source,
            PeakSource::Unknown
        );
        assert_eq!(device(None, None, None), None);
    }

    #[test]
    fn overrides_win_and_say_so() {
        let h200 = DeviceQuery {
            name: "NVIDIA H200",
            ..Default::default()
        };
        let d = device(Some(&h200), Some(1800.0), None).unwrap();
        assert_eq!(d.source, PeakSource::Override);
        assert_eq!(d.peak_gbps, Some(1800.0));
        assert_eq!(
            d.peak_tflops_bf16,
            Some(989.0),
            "the table's where not overridden"
        );
        let d = device(None, None, Some(100.0)).unwrap();
        assert_eq!(
            (d.name.as_str(), d.peak_gbps, d.peak_tflops_bf16),
            ("unknown device", None, Some(100.0))
        );
        let d = named("NVIDIA H200", Some(132), None).unwrap();
        assert_eq!(
            (d.peak_gbps, d.peak_tflops_fp8, d.sms, d.source),
            (Some(4800.0), Some(1979.0), Some(132), PeakSource::Table)
        );
        assert_eq!(
            named("NVIDIA A100-SXM4-80GB", None, None)
                .unwrap()
                .peak_tflops_fp8,
            None
        );
    }
}
