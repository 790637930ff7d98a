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

#[cfg(test)]
mod tests {
    use super::*;

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
