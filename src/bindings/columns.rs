//! Batches as arrays, both ways: a column of strings held as an Arrow string array's two buffers
//! (the UTF-8 data and the n + 1 offsets) encoded without a Python `str` per row (a `datasets`
//! batch), and a batch's flat ids written into padded 2-D arrays (`return_tensors="np"`).

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;

use super::encoder::{allowed_of, disallowed_of, flat_arrays, Encoder};
use super::{no_panic, threads, value_error};
use crate::batch;

/// Checks that `offsets` are n + 1 non-decreasing positions in `0..=len` (of `what`); the error
/// names the first bad row.
fn check_offsets(offsets: &[i64], len: usize, what: &str) -> Result<(), String> {
    let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) else {
        return Err("offsets must hold n + 1 entries (got none)".into());
    };
    if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(format!("row {i}: offsets go backwards ({} then {})", offsets[i], offsets[i + 1]));
    }
    if first < 0 || last as u64 > len as u64 {
        return Err(format!("offsets {first}..{last} do not fit the {len} {what}"));
    }
    Ok(())
}

/// The rows `data[offsets[i]:offsets[i+1]]` as strs, or an error naming the first bad row.
fn rows_of<'a>(data: &'a [u8], offsets: &[i64]) -> Result<Vec<&'a str>, String> {
    check_offsets(offsets, data.len(), "bytes of string data")?;
    let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
    let text = std::str::from_utf8(&data[first as usize..last as usize]).map_err(|e| {
        let at = first as usize + e.valid_up_to();
        let row = offsets.partition_point(|&o| o as usize <= at).saturating_sub(1);
        format!("row {row}: its string data is not valid UTF-8 (at byte {at})")
    })?;
    let mut rows = Vec::with_capacity(offsets.len() - 1);
    for (i, w) in offsets.windows(2).enumerate() {
        let (s, e) = ((w[0] - first) as usize, (w[1] - first) as usize);
        if !text.is_char_boundary(s) || !text.is_char_boundary(e) {
            return Err(format!("row {i}: offsets {}..{} cut a UTF-8 character", w[0], w[1]));
        }
        rows.push(&text[s..e]);
    }
    Ok(rows)
}

/// `Encoder.encode_batch_flat` over the rows of an Arrow string column: `data` is its UTF-8
/// buffer, `offsets` its n + 1 row offsets (int64; a `string` array's int32 ones widened).
#[pyfunction]
#[pyo3(signature = (encoder, data, offsets, allowed_special=None, disallowed_special=None, num_threads=None))]
#[allow(clippy::type_complexity)]
pub fn encode_utf8_column<'py>(
    py: Python<'py>,
    encoder: &Encoder,
    data: PyReadonlyArray1<'py, u8>,
    offsets: PyReadonlyArray1<'py, i64>,
    allowed_special: Option<&Bound<'_, PyAny>>,
    disallowed_special: Option<&Bound<'_, PyAny>>,
    num_threads: Option<isize>,
) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>)> {
    let allowed = allowed_of(allowed_special)?;
    let disallowed = disallowed_of(disallowed_special)?;
    let n = threads(num_threads)?;
    let (data, offsets) = (data.as_slice()?, offsets.as_slice()?);
    let enc = &encoder.inner;
    let flat = py
        .allow_threads(|| {
            let rows = rows_of(data, offsets)?;
            no_panic(|| batch::encode_docs(enc, &rows, &allowed, &disallowed, None, n))
        })
        .map_err(value_error)?;
    flat_arrays(py, flat)
}

/// A batch's flat ids (`ids`, rows cut by `offsets`) as a 2-D int64 array `width` wide: each
/// row cut to `width` (its end kept when `truncate_left`), placed at the left or right
/// (`pad_left`) and the rest set to `pad_id`; with `attention_mask`, the matching 0/1 array.
#[pyfunction]
#[pyo3(signature = (ids, offsets, width, pad_id, pad_left=false, truncate_left=false, attention_mask=true))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn pad_rows<'py>(
    py: Python<'py>,
    ids: PyReadonlyArray1<'py, u32>,
    offsets: PyReadonlyArray1<'py, i64>,
    width: usize,
    pad_id: i64,
    pad_left: bool,
    truncate_left: bool,
    attention_mask: bool,
) -> PyResult<(Bound<'py, PyArray2<i64>>, Option<Bound<'py, PyArray2<i64>>>)> {
    let (ids, off) = (ids.as_slice()?, offsets.as_slice()?);
    check_offsets(off, ids.len(), "ids").map_err(value_error)?;
    let n = off.len() - 1;
    let out = PyArray2::<i64>::zeros(py, [n, width], false);
    let mask = attention_mask.then(|| PyArray2::<i64>::zeros(py, [n, width], false));
    // SAFETY: both arrays were just made here, are contiguous and nothing else refers to them.
    let o = unsafe { out.as_slice_mut()? };
    let m = match &mask {
        Some(m) => Some(unsafe { m.as_slice_mut()? }),
        None => None,
    };
    py.allow_threads(move || {
        let mut m = m;
        for r in 0..n {
            let (s, e) = (off[r] as usize, off[r + 1] as usize);
            let len = (e - s).min(width);
            let s = if truncate_left { e - len } else { s };
            let at = if pad_left { width - len } else { 0 };
            let row = &mut o[r * width..(r + 1) * width];
            for (d, &x) in row[at..at + len].iter_mut().zip(&ids[s..s + len]) {
                *d = i64::from(x);
            }
            if pad_id != 0 {
                row[..at].fill(pad_id);
                row[at + len..].fill(pad_id);
            }
            if let Some(m) = m.as_deref_mut() {
                m[r * width + at..r * width + at + len].fill(1);
            }
        }
    });
    Ok((out, mask))
}

#[cfg(test)]
mod tests {
    use super::rows_of;

    #[test]
    fn rows_are_checked() {
        let data = "ab\u{e9}c".as_bytes();
        assert_eq!(rows_of(data, &[0, 2, 2, 5]).unwrap(), ["ab", "", "\u{e9}c"]);
        assert_eq!(rows_of(data, &[1, 2]).unwrap(), ["b"]);
        assert!(rows_of(data, &[0, 3, 5]).unwrap_err().contains("row 0: offsets 0..3 cut"));
        assert!(rows_of(data, &[0, 2, 1]).unwrap_err().contains("row 1: offsets go backwards"));
        assert!(rows_of(data, &[0, 9]).unwrap_err().contains("do not fit the 5 bytes"));
        assert!(rows_of(b"ok\xff", &[0, 2, 3]).unwrap_err().contains("row 1: its string data is not valid UTF-8"));
        assert!(rows_of(data, &[]).is_err());
        assert!(super::check_offsets(&[0, 5], 3, "ids").unwrap_err().contains("do not fit the 3 ids"));
    }
}
