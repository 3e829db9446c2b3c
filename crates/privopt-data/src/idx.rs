//! The IDX format of MNIST and Fashion-MNIST (optionally gzip-compressed).
//!
//! Layout: two zero bytes, a type byte (`0x08` = unsigned byte, the only type these datasets
//! use), a dimension count, then one big-endian `u32` per dimension, then the data. A file is
//! rejected unless its magic, its dimensions and its length all agree.

use std::io::Read;
use std::path::Path;

use crate::error::{DataError, Result};
use privopt_ml::data::Dataset;

/// Upper bound on the decoded size of one IDX file (MNIST train images are 47 MB).
const MAX_IDX_BYTES: usize = 1 << 28;

/// A decoded IDX array of unsigned bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    /// The dimensions, outermost first (e.g. `[60000, 28, 28]`).
    pub dims: Vec<usize>,
    /// The values, row-major.
    pub data: Vec<u8>,
}

/// Parses an IDX byte buffer; `path` only names the source in errors.
pub fn parse_idx(bytes: &[u8], path: &Path) -> Result<IdxArray> {
    let bad = |reason: String| DataError::corrupt(path, reason);
    if bytes.len() < 4 {
        return Err(bad(format!(
            "{} bytes is too short for an IDX header",
            bytes.len()
        )));
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err(bad("bad IDX magic (first two bytes must be zero)".into()));
    }
    if bytes[2] != 0x08 {
        return Err(bad(format!(
            "IDX element type 0x{:02x} is not supported (expected 0x08, unsigned byte)",
            bytes[2]
        )));
    }
    let ndim = bytes[3] as usize;
    if ndim == 0 || ndim > 4 {
        return Err(bad(format!("IDX dimension count {ndim} is not in 1..=4")));
    }
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        return Err(bad("file ends inside the IDX header".into()));
    }
    let mut dims = Vec::with_capacity(ndim);
    let mut total: usize = 1;
    for k in 0..ndim {
        let off = 4 + 4 * k;
        let d = u32::from_be_bytes([bytes[off], bytes[off + 1], bytes[off + 2], bytes[off + 3]])
            as usize;
        total = total
            .checked_mul(d)
            .filter(|&t| t <= MAX_IDX_BYTES)
            .ok_or_else(|| bad("IDX dimensions describe an implausibly large array".into()))?;
        dims.push(d);
    }
    let body = &bytes[header..];
    if body.len() != total {
        return Err(bad(format!(
            "IDX header {:?} promises {} data bytes but the file has {} (truncated or padded)",
            dims,
            total,
            body.len()
        )));
    }
    Ok(IdxArray {
        dims,
        data: body.to_vec(),
    })
}

/// Reads and parses an IDX file; a `.gz` file (gzip magic) is decompressed first.
pub fn read_idx(path: &Path) -> Result<IdxArray> {
    let raw = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .take(MAX_IDX_BYTES as u64 + 64)
            .read_to_end(&mut out)
            .map_err(|e| DataError::corrupt(path, format!("bad gzip stream: {e}")))?;
        out
    } else {
        raw
    };
    parse_idx(&bytes, path)
}

/// Loads an image file and a label file into a [`Dataset`] with pixels scaled to `[0, 1]`.
pub fn load_images(images: &Path, labels: &Path, num_classes: usize) -> Result<Dataset> {
    let img = read_idx(images)?;
    let lab = read_idx(labels)?;
    if img.dims.len() < 2 {
        return Err(DataError::corrupt(
            images,
            "image file must have >= 2 dimensions",
        ));
    }
    if lab.dims.len() != 1 {
        return Err(DataError::corrupt(
            labels,
            "label file must have exactly 1 dimension",
        ));
    }
    if img.dims[0] != lab.dims[0] {
        return Err(DataError::corrupt(
            labels,
            format!(
                "{} labels for {} images in {}",
                lab.dims[0],
                img.dims[0],
                images.display()
            ),
        ));
    }
    if let Some(&bad) = lab.data.iter().find(|&&l| l as usize >= num_classes) {
        return Err(DataError::corrupt(
            labels,
            format!("label {bad} is not below {num_classes}"),
        ));
    }
    let d: usize = img.dims[1..].iter().product();
    let x = img.data.iter().map(|&p| f64::from(p) / 255.0).collect();
    let y = lab.data.iter().map(|&l| f64::from(l)).collect();
    Ok(Dataset::new(x, y, d, Some(num_classes))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut v = vec![0, 0, 0x08, dims.len() as u8];
        for d in dims {
            v.extend_from_slice(&d.to_be_bytes());
        }
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn roundtrip_and_rejections() {
        let p = Path::new("t.idx");
        let ok = idx_bytes(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let a = parse_idx(&ok, p).unwrap();
        assert_eq!(a.dims, vec![2, 3]);
        assert_eq!(a.data, vec![1, 2, 3, 4, 5, 6]);

        let truncated = &ok[..ok.len() - 1];
        let e = parse_idx(truncated, p).unwrap_err().to_string();
        assert!(e.contains("t.idx") && e.contains("truncated"), "{e}");
        let mut bad_magic = ok.clone();
        bad_magic[0] = 1;
        assert!(parse_idx(&bad_magic, p).is_err());
        let mut bad_type = ok.clone();
        bad_type[2] = 0x0D;
        assert!(parse_idx(&bad_type, p).is_err());
        assert!(parse_idx(&ok[..6], p).is_err());
        assert!(parse_idx(&idx_bytes(&[u32::MAX, u32::MAX], &[]), p).is_err());
    }

    #[test]
    fn loads_gzip_pairs_and_checks_counts() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img.gz");
        let lab = dir.path().join("lab");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&idx_bytes(&[2, 2, 2], &[0, 255, 51, 0, 1, 2, 3, 4]))
            .unwrap();
        std::fs::write(&img, gz.finish().unwrap()).unwrap();
        std::fs::write(&lab, idx_bytes(&[2], &[7, 1])).unwrap();
        let ds = load_images(&img, &lab, 10).unwrap();
        assert_eq!(ds.len(), 2);
        assert_eq!(ds.n_features(), 4);
        assert_eq!(ds.row(0), &[0.0, 1.0, 0.2, 0.0]);
        assert_eq!(ds.labels(), &[7.0, 1.0]);

        std::fs::write(&lab, idx_bytes(&[3], &[7, 1, 2])).unwrap();
        assert!(load_images(&img, &lab, 10).is_err());
        std::fs::write(&lab, idx_bytes(&[2], &[7, 11])).unwrap();
        assert!(load_images(&img, &lab, 10).is_err());
    }
}
