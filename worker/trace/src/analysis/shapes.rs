//! Bytes moved by copy/cast-like ops, from `Input Dims` and `Input type`.

/// Size in bytes of one element of a torch dtype as profiler writes it
/// (`c10::BFloat16`, `float`, `long int`, ...). `None` for non-tensors
/// (`Scalar`, `TensorList`, `""`) and unknown names.
pub fn dtype_size(t: &str) -> Option<u64> {
    let t = t.strip_prefix("c10::").unwrap_or(t);
    Some(match t {
        "Float8_e4m3fn" | "Float8_e5m2" | "Float8_e4m3fnuz" | "Float8_e5m2fnuz"
        | "Float8_e8m0fnu" | "Float4_e2m1fn_x2" | "signed char" | "unsigned char" | "bool"
        | "qint8" | "quint8" | "int8_t" | "uint8_t" | "char" => 1,
        "BFloat16" | "Half" | "short int" | "short" | "int16_t" | "unsigned short" | "uint16_t" => {
            2
        }
        "float" | "int" | "unsigned int" | "qint32" | "int32_t" | "uint32_t"
        | "complex<c10::Half>" => 4,
        "double" | "long int" | "long" | "long long" | "int64_t" | "unsigned long" | "uint64_t"
        | "complex<float>" => 8,
        "complex<double>" => 16,
        _ => return None,
    })
}

/// The readable dtype name: `c10::Float8_e4m3fn` -> `Float8_e4m3fn`.
pub fn dtype_label(t: &str) -> &str {
    t.strip_prefix("c10::").unwrap_or(t)
}

/// One input as read from `Input Dims` / `Input type`.
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    /// Element count (product of dims), `None` if not a plain tensor shape.
    pub numel: Option<u64>,
    /// Dtype.
    pub dtype: String,
}

/// Each input's dims from `Input Dims` (empty for a non-tensor input).
pub fn dims(shapes: &str) -> Vec<Vec<u64>> {
    serde_json::from_str::<Vec<serde_json::Value>>(shapes)
        .unwrap_or_default()
        .iter()
        .map(|d| {
            d.as_array()
                .map(|a| a.iter().filter_map(|v| v.as_u64()).collect())
                .unwrap_or_default()
        })
        .collect()
}

/// Parses the (canonical) `Input Dims` and `Input type` texts.
pub fn inputs(shapes: &str, dtypes: &str) -> Vec<Input> {
    let dims: Vec<serde_json::Value> = serde_json::from_str(shapes).unwrap_or_default();
    let types: Vec<serde_json::Value> = serde_json::from_str(dtypes).unwrap_or_default();
    let n = dims.len().max(types.len());
    (0..n)
        .map(|k| {
            let numel = dims.get(k).and_then(|d| {
                let list = d.as_array()?;
                let mut p: u64 = 1;
                for v in list {
                    p = p.checked_mul(v.as_u64()?)?;
                }
                Some(p)
            });
            let dtype = types
                .get(k)
                .and_then(|t| t.as_str())
                .unwrap_or("")
                .to_string();
            Input { numel, dtype }
        })
        .collect()
}

/// Whether an op only moves or converts data (so bytes over time is its
/// figure of merit).
pub fn is_copy_like(op: &str) -> bool {
    matches!(
        op,
        "aten::copy_"
            | "aten::clone"
            | "aten::contiguous"
            | "aten::_copy_from"
            | "aten::_to_copy"
            | "aten::to"
            | "aten::copy"
    )
}

/// Bytes read plus written by one call of a copy/cast-like op, when the
/// shapes and dtypes tell. `aten::copy_(self, src)` writes `self` and reads
/// `src`; `clone`/`contiguous` read and write their input; `to`/`_to_copy`
/// qualify only when they carry the destination (their output dtype is not
/// recorded, so they are left to their `copy_` child).
pub fn copy_bytes(op: &str, shapes: &str, dtypes: &str) -> Option<u64> {
    if !is_copy_like(op) {
        return None;
    }
    let ins = inputs(shapes, dtypes);
    match op {
        "aten::copy_" | "aten::_copy_from" | "aten::copy" => {
            let (dst, src) = (ins.first()?, ins.get(1)?);
            let dst_bytes = dst.numel? * dtype_size(&dst.dtype)?;
            let src_bytes = src.numel? * dtype_size(&src.dtype)?;
            Some(dst_bytes + src_bytes)
        }
        "aten::clone" | "aten::contiguous" => {
            let x = ins.first()?;
            Some(2 * x.numel? * dtype_size(&x.dtype)?)
        }
        _ => None,
    }
}

/// For `copy_`: the conversion it does, `("Float8_e4m3fn", "BFloat16")`
/// (source, destination), when the dtypes differ.
pub fn conversion(op: &str, dtypes: &str) -> Option<(String, String)> {
    if !matches!(op, "aten::copy_" | "aten::_copy_from" | "aten::copy") {
        return None;
    }
    let types: Vec<String> = serde_json::from_str(dtypes).ok()?;
    let (dst, src) = (types.first()?, types.get(1)?);
    (dst != src && dtype_size(dst).is_some() && dtype_size(src).is_some())
        .then(|| (dtype_label(src).to_string(), dtype_label(dst).to_string()))
}

/// One GEMM call's shape: `m` rows by `k` by `n` columns, `batch` times,
/// with the dtype of its first matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Gemm {
    /// Batch (1 for a plain matrix product).
    pub batch: u64,
    /// Rows of the output.
    pub m: u64,
    /// The reduced dimension.
    pub k: u64,
    /// Columns of the output.
    pub n: u64,
    /// The first matrix's dtype as written (`c10::BFloat16`).
    pub dtype: String,
}

impl Gemm {
    /// Floating-point operations: a multiply and an add per term.
    pub fn flops(&self) -> f64 {
        2.0 * self.batch as f64 * self.m as f64 * self.k as f64 * self.n as f64
    }

    /// Bytes the product reads and writes at least: both matrices once,
    /// the output once (all in the first matrix's dtype).
    pub fn bytes(&self) -> Option<f64> {
        let size = dtype_size(&self.dtype)? as f64;
        let (b, m, k, n) = (
            self.batch as f64,
            self.m as f64,
            self.k as f64,
            self.n as f64,
        );
        Some(size * b * (m * k + k * n + m * n))
    }
}

/// The GEMM a call does, from `Input Dims` and `Input type`, for the ops
/// whose inputs say it (torch's own `with_flops` counts the same ops):
/// `mm(a, b)`, `addmm(bias, a, b)`, `bmm(a, b)`, `baddbmm(c, a, b)`,
/// `_scaled_mm(a, b, ...)` and `linear(x, w, bias)`.
pub fn gemm(op: &str, shapes: &str, dtypes: &str) -> Option<Gemm> {
    let dims = dims(shapes);
    let types: Vec<String> = serde_json::from_str(dtypes).unwrap_or_default();
    let (a, b, dtype) = match op {
        "aten::mm" | "aten::bmm" | "aten::_scaled_mm" => (0, 1, 0),
        "aten::addmm" | "aten::baddbmm" => (1, 2, 1),
        "aten::linear" => {
            let (x, w) = (dims.first()?, dims.get(1)?);
            let (&k, &n) = (x.last()?, w.first()?);
            if w.len() != 2 || w[1] != k {
                return None;
            }
            let m: u64 = x[..x.len() - 1].iter().product();
            return Some(Gemm {
                batch: 1,
                m,
                k,
                n,
                dtype: types.first()?.clone(),
            });
        }
        _ => return None,
    };
    let (x, y) = (dims.get(a)?, dims.get(b)?);
    let dtype = types.get(dtype)?.clone();
    match (x.as_slice(), y.as_slice()) {
        (&[m, k], &[k2, n]) if k == k2 => Some(Gemm {
            batch: 1,
            m,
            k,
            n,
            dtype,
        }),
        (&[bt, m, k], &[bt2, k2, n]) if k == k2 && bt == bt2 => Some(Gemm {
            batch: bt,
            m,
            k,
            n,
            dtype,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_shapes() {
        let mm = gemm(
            "aten::mm",
            "[[64, 7168], [7168, 2048]]",
            r#"["c10::BFloat16", "c10::BFloat16"]"#,
        )
        .unwrap();
        assert_eq!(
            (mm.m, mm.k, mm.n, mm.flops()),
            (64, 7168, 2048, 2.0 * 64.0 * 7168.0 * 2048.0)
        );
        assert_eq!(
            mm.bytes(),
            Some(2.0 * (64.0 * 7168.0 + 7168.0 * 2048.0 + 64.0 * 2048.0))
        );
        let addmm = gemm(
            "aten::addmm",
            "[[2048], [64, 7168], [7168, 2048], [], []]",
            r#"["float", "float", "float", "Scalar", "Scalar"]"#,
        )
        .unwrap();
        assert_eq!(
            (addmm.m, addmm.n, addmm.dtype.as_str()),
            (64, 2048, "float")
        );
        let bmm = gemm(
            "aten::bmm",
            "[[4, 1, 64], [4, 64, 201]]",
            r#"["float", "float"]"#,
        )
        .unwrap();
        assert_eq!(bmm.flops(), 2.0 * 4.0 * 64.0 * 201.0);
        let linear = gemm(
            "aten::linear",
            "[[2, 32, 512], [1024, 512], [1024]]",
            r#"["float", "float", "float"]"#,
        )
        .unwrap();
        assert_eq!((linear.m, linear.k, linear.n), (64, 512, 1024));
        assert_eq!(
            gemm("aten::mm", "[[64, 7], [8, 2]]", r#"["float", "float"]"#),
            None
        );
        assert_eq!(
            gemm("aten::add", "[[64, 7], [7, 2]]", r#"["float", "float"]"#),
            None
        );
    }

    #[test]
    fn copy_bytes_count_read_and_write() {
        let b = copy_bytes(
            "aten::copy_",
            "[[2, 1024, 8, 128], [2, 1024, 8, 128], []]",
            r#"["c10::BFloat16", "c10::Float8_e4m3fn", "Scalar"]"#,
        );
        assert_eq!(b, Some(2 * 1024 * 8 * 128 * 3));
        assert_eq!(
            conversion(
                "aten::copy_",
                r#"["c10::BFloat16", "c10::Float8_e4m3fn", "Scalar"]"#
            ),
            Some(("Float8_e4m3fn".into(), "BFloat16".into()))
        );
        assert_eq!(
            copy_bytes("aten::mm", "[[2, 2], [2, 2]]", r#"["float", "float"]"#),
            None
        );
        assert_eq!(
            copy_bytes("aten::clone", "[[10]]", r#"["float"]"#),
            Some(80)
        );
    }
}
