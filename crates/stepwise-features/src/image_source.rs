//! Where step images come from: files under a corpus's image root, or any other source (the built-in world
//! renders its images on demand) implementing [`ImageSource`].
//!
//! Errors are plain strings: the feature store records them in `failures.jsonl` and carries on.

use std::path::{Path, PathBuf};

use stepwise_core::Corpus;
use stepwise_core::error::IoResultExt;
use stepwise_world::WorldImages;

/// A source of decoded step images, addressed by the image path as written in the procedure JSONL.
pub trait ImageSource: Sync {
    /// Decode the image at `rel_path` to RGB8. Unreadable or corrupt images are an `Err` with the reason.
    fn load(&self, rel_path: &str) -> Result<image::RgbImage, String>;

    /// A fingerprint of the image's content, used to key the feature store: it must change whenever the image
    /// would. The default decodes the image and hashes its pixels; sources that can do better (file bytes, the
    /// parameters an image is rendered from) override it.
    fn fingerprint(&self, rel_path: &str) -> Result<String, String> {
        let img = self.load(rel_path)?;
        let mut h = blake3::Hasher::new();
        h.update(&img.width().to_le_bytes());
        h.update(&img.height().to_le_bytes());
        h.update(img.as_raw());
        Ok(h.finalize().to_hex().to_string())
    }
}

/// Images stored as files under a root folder (a corpus's `image_root`).
#[derive(Debug, Clone)]
pub struct FsImageSource {
    pub root: PathBuf,
}

impl FsImageSource {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FsImageSource { root: root.into() }
    }

    fn path(&self, rel_path: &str) -> PathBuf {
        self.root.join(rel_path)
    }
}

impl ImageSource for FsImageSource {
    fn load(&self, rel_path: &str) -> Result<image::RgbImage, String> {
        let path = self.path(rel_path);
        let bytes = read_image_file(&path)?;
        decode_image(&bytes).map_err(|e| format!("cannot decode {}: {e}", path.display()))
    }

    /// BLAKE3 of the file's bytes (cheap: no decoding).
    fn fingerprint(&self, rel_path: &str) -> Result<String, String> {
        let path = self.path(rel_path);
        stepwise_core::hash::hash_file(&path).map(|(h, _)| h).map_err(|e| format!("cannot read: {e}"))
    }
}

/// Where a corpus's images come from: files under its image root or, for a built-in world corpus made without
/// stored images (`stepwise world generate --no-images`), rendered on demand from the manifest's world
/// parameters.
pub fn for_corpus(corpus: &Corpus) -> stepwise_core::Result<Box<dyn ImageSource>> {
    if let Some(m) = &corpus.manifest
        && let Some(world) = WorldImages::from_manifest(m)
    {
        let world = world?;
        if !world.params.images_stored {
            return Ok(Box::new(RenderedWorld::new(world, corpus)?));
        }
    }
    Ok(Box::new(FsImageSource::new(&corpus.image_root)))
}

/// World images rendered on demand.
///
/// Fingerprints must not cost a render each (a re-run with nothing new would redo half the work), so an image's
/// key is its path plus a key of the renderer: the world parameters and the pixels of a few reference images
/// (first, middle and last image of the corpus), rendered once per run — a renderer change shows there.
struct RenderedWorld {
    world: WorldImages,
    renderer_key: String,
}

impl RenderedWorld {
    fn new(world: WorldImages, corpus: &Corpus) -> stepwise_core::Result<Self> {
        let paths: Vec<&str> = corpus.procedures.iter().flat_map(|p| p.step_images()).collect();
        let mut bytes = serde_json::to_vec(&world.params)
            .map_err(|e| stepwise_core::Error::runtime(format!("world parameters: {e}")))?;
        if !paths.is_empty() {
            for rel in [paths[0], paths[paths.len() / 2], paths[paths.len() - 1]] {
                bytes.extend_from_slice(rel.as_bytes());
                bytes.extend_from_slice(world.render(rel)?.as_raw());
            }
        }
        Ok(RenderedWorld { world, renderer_key: stepwise_core::hash::hash_bytes(&bytes) })
    }
}

impl ImageSource for RenderedWorld {
    fn load(&self, rel_path: &str) -> Result<image::RgbImage, String> {
        self.world.render(rel_path).map_err(|e| e.to_string())
    }

    fn fingerprint(&self, rel_path: &str) -> Result<String, String> {
        Ok(stepwise_core::hash::hash_str(&format!("world-render\n{}\n{rel_path}", self.renderer_key)))
    }
}

/// The .jpg, .jpeg and .png files under `root` (any depth), as sorted `/`-separated paths relative to it.
/// Symlinked folders are followed once: a link back to a folder being walked is not walked again.
pub fn image_files(root: &Path) -> stepwise_core::Result<Vec<String>> {
    let mut out = Vec::new();
    image_files_within(root, root, &mut stepwise_core::paths::WalkAncestors::default(), &mut out)?;
    out.sort();
    Ok(out)
}

fn image_files_within(
    root: &Path,
    dir: &Path,
    ancestors: &mut stepwise_core::paths::WalkAncestors,
    out: &mut Vec<String>,
) -> stepwise_core::Result<()> {
    // A symlink back to a folder being walked would list its images again on every lap (and never end).
    if ancestors.enter(dir)?.is_some() {
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir).at(dir)?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            image_files_within(root, &p, ancestors, out)?;
        } else if matches!(
            p.extension().and_then(|x| x.to_str()).map(str::to_lowercase).as_deref(),
            Some("jpg" | "jpeg" | "png")
        ) && let Ok(rel) = p.strip_prefix(root)
        {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    ancestors.leave();
    Ok(())
}

/// The largest side of an image stepwise decodes, in pixels (a 16k photo is already far beyond any step image).
pub const MAX_IMAGE_SIDE: u32 = 16_384;
/// The most memory one image decode may allocate: a 60-megapixel RGBA photo fits; a decompression bomb (a small
/// file claiming a huge canvas) is refused from its header, before anything is allocated.
pub const MAX_IMAGE_ALLOC: u64 = 256 << 20;

/// The largest image file read (a link to a device, or a multi-gigabyte file, is refused before decoding).
pub const MAX_IMAGE_FILE: u64 = 256 << 20;

fn read_image_file(path: &Path) -> Result<Vec<u8>, String> {
    stepwise_core::paths::read_file_within(path, MAX_IMAGE_FILE, "stepwise reads as one image")
        .map_err(|e| format!("cannot read {e}"))
}

/// Decode image bytes (format guessed from the content) to RGB8, within [`MAX_IMAGE_SIDE`] and
/// [`MAX_IMAGE_ALLOC`]. Never panics: a decoder panic on hostile input becomes an error.
pub fn decode_image(bytes: &[u8]) -> Result<image::RgbImage, String> {
    let result = std::panic::catch_unwind(|| {
        let mut reader =
            image::ImageReader::new(std::io::Cursor::new(bytes)).with_guessed_format().map_err(|e| e.to_string())?;
        let mut limits = image::Limits::default();
        limits.max_image_width = Some(MAX_IMAGE_SIDE);
        limits.max_image_height = Some(MAX_IMAGE_SIDE);
        limits.max_alloc = Some(MAX_IMAGE_ALLOC);
        reader.limits(limits);
        reader.decode().map_err(|e| match e {
            image::ImageError::Limits(l) => format!(
                "{l} (stepwise decodes images up to {MAX_IMAGE_SIDE} pixels a side and {} MiB: a decompression \
                 bomb?)",
                MAX_IMAGE_ALLOC >> 20
            ),
            e => e.to_string(),
        })
    });
    match result {
        Ok(Ok(img)) => {
            if img.width() == 0 || img.height() == 0 {
                Err("image has no pixels".to_string())
            } else {
                Ok(img.into_rgb8())
            }
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err("the image decoder panicked on this file".to_string()),
    }
}

/// Decode an image file (convenience for tools and tests).
pub fn load_image_file(path: &Path) -> Result<image::RgbImage, String> {
    let bytes = read_image_file(path)?;
    decode_image(&bytes).map_err(|e| format!("cannot decode {}: {e}", path.display()))
}

/// An 8×8 PNG whose header claims `side`×`side` pixels, its checksum fixed so that only a size limit can refuse
/// it: the decompression bomb of the tests and of `stepwise bench reliability`.
pub fn png_bomb(side: u32) -> Vec<u8> {
    let img = image::RgbImage::from_pixel(8, 8, image::Rgb([1, 2, 3]));
    let mut png = Vec::new();
    // Encoding 8×8 pixels into memory cannot fail.
    img.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).expect("an 8x8 PNG encodes");
    png[16..20].copy_from_slice(&side.to_be_bytes());
    png[20..24].copy_from_slice(&side.to_be_bytes());
    // CRC-32 (IEEE) of the IHDR chunk's type and data.
    let mut crc = !0u32;
    for &b in &png[12..29] {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    png[29..33].copy_from_slice(&(!crc).to_be_bytes());
    png
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_png_and_reports_corrupt_and_missing_files() {
        let td = tempfile::tempdir().unwrap();
        let img = image::RgbImage::from_fn(5, 3, |x, y| image::Rgb([x as u8 * 40, y as u8 * 80, 7]));
        img.save(td.path().join("ok.png")).unwrap();
        std::fs::write(td.path().join("bad.jpg"), b"\xff\xd8\xff\xe0 not really a jpeg").unwrap();
        let src = FsImageSource::new(td.path());
        assert_eq!(src.load("ok.png").unwrap(), img);
        let e = src.load("bad.jpg").unwrap_err();
        assert!(e.contains("cannot decode") && e.contains("bad.jpg"), "{e}");
        let e = src.load("missing.png").unwrap_err();
        assert!(e.contains("cannot read"), "{e}");
        assert!(src.fingerprint("missing.png").is_err());
        assert_eq!(src.fingerprint("ok.png").unwrap(), src.fingerprint("ok.png").unwrap());
        assert_ne!(src.fingerprint("ok.png").unwrap(), src.fingerprint("bad.jpg").unwrap());
    }

    #[test]
    fn decompression_bombs_are_refused_from_their_headers() {
        let img = image::RgbImage::from_pixel(8, 8, image::Rgb([1, 2, 3]));
        // PNG: the IHDR says 60,000 x 60,000 (10.8 GB of RGB).
        let e = decode_image(&png_bomb(60_000)).unwrap_err();
        assert!(e.contains("decompression bomb"), "{e}");
        // JPEG: the frame header (SOF0) says 65,000 x 65,000.
        let mut jpg = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut jpg), image::ImageFormat::Jpeg).unwrap();
        let sof = jpg.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        jpg[sof + 5..sof + 7].copy_from_slice(&65_000u16.to_be_bytes());
        jpg[sof + 7..sof + 9].copy_from_slice(&65_000u16.to_be_bytes());
        let e = decode_image(&jpg).unwrap_err();
        assert!(e.contains("decompression bomb"), "{e}");
        // Within the limits, the same files decode.
        let mut ok = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut ok), image::ImageFormat::Png).unwrap();
        assert_eq!(decode_image(&ok).unwrap(), img);
    }

    #[test]
    fn default_fingerprint_hashes_pixels() {
        struct Solid(u8);
        impl ImageSource for Solid {
            fn load(&self, _: &str) -> Result<image::RgbImage, String> {
                Ok(image::RgbImage::from_pixel(2, 2, image::Rgb([self.0; 3])))
            }
        }
        assert_eq!(Solid(1).fingerprint("a").unwrap(), Solid(1).fingerprint("b").unwrap());
        assert_ne!(Solid(1).fingerprint("a").unwrap(), Solid(2).fingerprint("a").unwrap());
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_loop_in_an_image_folder_lists_each_image_once() {
        let td = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(td.path().join("fruit")).unwrap();
        std::fs::write(td.path().join("fruit/apple.jpg"), b"jpeg").unwrap();
        std::os::unix::fs::symlink(td.path(), td.path().join("fruit/all")).unwrap();
        std::os::unix::fs::symlink(td.path(), td.path().join("fruit/again")).unwrap();
        assert_eq!(image_files(td.path()).unwrap(), ["fruit/apple.jpg"]);
    }
}
