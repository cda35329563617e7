//! Pretrained encoders without downloads: missing-model errors, the GloVe conversion on a small package made
//! here, and the EfficientNet-Lite conversion path on a synthetic legacy-format checkpoint.

use std::path::Path;

use stepwise_core::parquet::{Column, write_table};
use stepwise_features::pretrained::efficientnet_lite::{EfficientNetLite, Variant, synthetic_state_dict};
use stepwise_features::pretrained::glove::{self, Glove, GloveEncoder};
use stepwise_features::pretrained::torch_legacy::{self, DType, RawTensor};
use stepwise_features::registry::{self, EncoderContext, EncoderKind};
use stepwise_features::{FeatureError, Item};

#[test]
fn every_pretrained_encoder_says_how_to_install_its_missing_model() {
    let td = tempfile::tempdir().unwrap();
    let ctx = EncoderContext { models_dir: td.path().join("models"), ..Default::default() };
    let pretrained: Vec<_> = registry::list().iter().filter(|e| e.kind == EncoderKind::Pretrained).collect();
    assert!(pretrained.len() >= 8, "minilm, glove, 4 effnet, 2 clip");
    for e in pretrained {
        let err = registry::build_encoder(e.name, &ctx).err().unwrap_or_else(|| panic!("{} built", e.name));
        assert!(matches!(err, FeatureError::MissingModel(_)), "{}: {err}", e.name);
        assert_eq!(err.exit_code(), 2);
        let msg = err.to_string();
        assert!(msg.contains("models"), "{}: {msg}", e.name);
        if e.name.starts_with("clip") {
            assert!(msg.contains("clip-vit-b32"), "{msg}");
        } else {
            assert!(msg.contains("scripts/fetch-models.sh") && msg.contains("=="), "{}: {msg}", e.name);
        }
    }
}

/// A column-major `.npy` exactly as NumPy writes `np.asfortranarray(a)`.
fn write_fortran_npy(path: &Path, rows: usize, cols: usize, row_major: &[f32]) {
    let dict = format!("{{'descr': '<f4', 'fortran_order': True, 'shape': ({rows}, {cols}), }}");
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    let total = (10 + dict.len() + 1).div_ceil(64) * 64;
    b.extend_from_slice(&((total - 10) as u16).to_le_bytes());
    b.extend_from_slice(dict.as_bytes());
    b.resize(total - 1, b' ');
    b.push(b'\n');
    for c in 0..cols {
        for r in 0..rows {
            b.extend_from_slice(&row_major[r * cols + c].to_le_bytes());
        }
    }
    std::fs::write(path, b).unwrap();
}

#[test]
fn glove_package_converts_to_row_major_vectors_and_vocab() {
    let td = tempfile::tempdir().unwrap();
    let src = td.path().join("pkg");
    std::fs::create_dir_all(&src).unwrap();
    let words = ["the", ",", "eggs", "whisk", "stir-fry"];
    let data: Vec<f32> = (0..words.len() * 3).map(|i| i as f32 * 0.25 - 1.0).collect();
    write_fortran_npy(&src.join(glove::KUMO_VECTORS), words.len(), 3, &data);
    let col = Column::Str(words.iter().map(|w| Some(w.to_string())).collect());
    write_table(&src.join(glove::KUMO_INDEX), &[("index", col)]).unwrap();

    let dest = td.path().join("models/glove-6b-50d");
    assert_eq!(glove::convert_kumo_package(&src, &dest, false).unwrap(), words.len());
    assert_eq!(std::fs::read_to_string(dest.join("vocab.txt")).unwrap(), "the\n,\neggs\nwhisk\nstir-fry\n");
    assert!(dest.join("manifest.json").is_file());
    let g = Glove::from_dir(&dest).unwrap();
    assert_eq!(g.get("eggs").unwrap(), &data[6..9]);
    assert_eq!(g.get("stir-fry").unwrap(), &data[12..15]);
    // Mean of "whisk", "the" and "eggs" (rows 3, 0, 2); "," is punctuation and dropped.
    let (v, known) = g.mean_vector("Whisk, the eggs!");
    assert_eq!(known, 3);
    for d in 0..3 {
        let want = (data[d] + data[6 + d] + data[9 + d]) / 3.0;
        assert!((v[d] - want).abs() < 1e-6);
    }
    // Converting again needs --force; the existing folder is untouched.
    assert!(glove::convert_kumo_package(&src, &dest, false).is_err());
    // Through the registry, from a models folder.
    let ctx = EncoderContext { models_dir: td.path().join("models"), ..Default::default() };
    let enc = registry::build_encoder("glove-50d", &ctx).unwrap();
    assert_eq!(enc.info().dim, 3);
    let out = enc.encode(&[Item::Text("eggs"), Item::Text("番茄炒蛋")]).unwrap();
    let n: f32 = out[..3].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((n - 1.0).abs() < 1e-6);
    assert_eq!(&out[3..], &[0.0; 3], "a text with no known word is the zero vector");
    let _ = GloveEncoder::new(Glove::from_dir(&dest).unwrap(), false);
}

#[test]
fn glove_conversion_rejects_mismatched_inputs() {
    let td = tempfile::tempdir().unwrap();
    write_fortran_npy(&td.path().join(glove::KUMO_VECTORS), 2, 2, &[0.0; 4]);
    let col = Column::Str(vec![Some("a".into()), Some("b".into()), Some("c".into())]);
    write_table(&td.path().join(glove::KUMO_INDEX), &[("index", col)]).unwrap();
    let dest = td.path().join("out");
    let e = glove::convert_kumo_package(td.path(), &dest, false).expect_err("must fail").to_string();
    assert!(e.contains("2 rows") && e.contains("3 words"), "{e}");
    assert!(!dest.exists(), "nothing half-written");
    std::fs::write(td.path().join(glove::KUMO_INDEX), b"not parquet").unwrap();
    let e = glove::convert_kumo_package(td.path(), &dest, false).expect_err("must fail").to_string();
    assert!(e.contains(glove::KUMO_INDEX), "{e}");
}

/// Serialise a state dict in PyTorch's legacy (non-zip) format, with every weight stored transposed through
/// strides like the TensorFlow-converted EfficientNet-Lite files.
fn legacy_checkpoint(tensors: &[RawTensor]) -> Vec<u8> {
    fn unicode(b: &mut Vec<u8>, s: &str) {
        b.push(b'X');
        b.extend_from_slice(&(s.len() as u32).to_le_bytes());
        b.extend_from_slice(s.as_bytes());
    }
    fn int(b: &mut Vec<u8>, v: usize) {
        b.push(b'J');
        b.extend_from_slice(&(v as i32).to_le_bytes());
    }
    let mut b = vec![0x80, 2, 0x8a, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, b'.'];
    b.extend_from_slice(&[0x80, 2, b'M', 0xe9, 0x03, b'.']);
    b.extend_from_slice(&[0x80, 2, b'}', b'.']);
    b.extend_from_slice(&[0x80, 2]);
    b.extend_from_slice(b"ccollections\nOrderedDict\n)R(");
    let mut storages: Vec<Vec<u8>> = Vec::new();
    for (i, t) in tensors.iter().enumerate() {
        unicode(&mut b, &t.name);
        b.extend_from_slice(b"ctorch._utils\n_rebuild_tensor_v2\n(");
        b.push(b'(');
        unicode(&mut b, "storage");
        b.extend_from_slice(b"ctorch\nFloatStorage\n");
        unicode(&mut b, &format!("{}", 1000 + i));
        unicode(&mut b, "cpu");
        int(&mut b, t.numel());
        b.extend_from_slice(b"Nt");
        b.push(b'Q');
        int(&mut b, 0);
        // Store reversed-dimension (transposed) data and describe it with reversed strides.
        let dims = &t.shape;
        let mut rev_strides = vec![0usize; dims.len()];
        let mut acc = 1;
        for d in 0..dims.len() {
            rev_strides[d] = acc;
            acc *= dims[d];
        }
        b.push(b'(');
        dims.iter().for_each(|&d| int(&mut b, d));
        b.push(b't');
        b.push(b'(');
        rev_strides.iter().for_each(|&s| int(&mut b, s));
        b.push(b't');
        b.extend_from_slice(&[0x89, b'N', b't', b'R']);
        let vals = t.to_f32().unwrap();
        let mut stored = vec![0f32; vals.len()];
        let n = dims.len();
        let mut idx = vec![0usize; n];
        for v in &vals {
            let e: usize = idx.iter().zip(&rev_strides).map(|(i, s)| i * s).sum();
            stored[e] = *v;
            for d in (0..n).rev() {
                idx[d] += 1;
                if idx[d] < dims[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        storages.push(stored.iter().flat_map(|v| v.to_le_bytes()).collect());
    }
    b.extend_from_slice(b"u.");
    b.extend_from_slice(&[0x80, 2, b']', b'(']);
    for i in 0..tensors.len() {
        unicode(&mut b, &format!("{}", 1000 + i));
    }
    b.extend_from_slice(b"e.");
    for s in &storages {
        b.extend_from_slice(&((s.len() / 4) as i64).to_le_bytes());
        b.extend_from_slice(s);
    }
    b
}

#[test]
fn legacy_pth_with_strided_weights_converts_and_runs() {
    let td = tempfile::tempdir().unwrap();
    let sd = synthetic_state_dict(Variant::Lite0, 3);
    let pth = td.path().join("lite0.pth");
    std::fs::write(&pth, legacy_checkpoint(&sd)).unwrap();
    let read = torch_legacy::read_checkpoint(&pth, None).unwrap();
    assert_eq!(read.len(), sd.len());
    for (a, b) in read.iter().zip(&sd) {
        assert_eq!((&a.name, a.dtype, &a.shape), (&b.name, DType::F32, &b.shape));
        assert_eq!(a.data, b.data, "{} differs after the strided round trip", a.name);
    }
    let st = td.path().join("model.safetensors");
    torch_legacy::write_safetensors(&st, &read, &Default::default()).unwrap();
    let direct = td.path().join("direct.safetensors");
    torch_legacy::write_safetensors(&direct, &sd, &Default::default()).unwrap();
    assert_eq!(std::fs::read(&st).unwrap(), std::fs::read(&direct).unwrap());
    let model = EfficientNetLite::from_safetensors(&st, Variant::Lite0).unwrap();
    let img = stepwise_features::pretrained::preprocess::synthetic_photo(90, 60, "t");
    let x = model.preprocess(&[&img]).unwrap();
    let logits = model.logits_from_features(&model.features_from_inputs(&x));
    assert_eq!(logits.len(), 1000);
    assert!(logits.iter().all(|v| v.is_finite()));

    // A truncated file is an error naming the file, not a panic.
    let bytes = std::fs::read(&pth).unwrap();
    std::fs::write(&pth, &bytes[..bytes.len() - 100]).unwrap();
    let e = torch_legacy::read_checkpoint(&pth, None).expect_err("must fail").to_string();
    assert!(e.contains("lite0.pth") && e.contains("truncated"), "{e}");
}
