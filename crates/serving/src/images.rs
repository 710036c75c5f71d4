//! Images per request for vision-language models (docs/spec/options.md 4):
//! the spec's `image_height`, `image_width`, `num_images` and
//! `enable_encoder_dp`. A Qwen3-VL checkpoint turns each image into merged
//! tokens its language model reads after the text (`isl + tokens` wherever
//! the spec prices a sequence) and runs its vision encoder once per prefill,
//! before the context phase; other models ignore images, as the spec does.

use aicsql_tables::{EncoderRun, ImageTokens};

use crate::error::ServingError;
use crate::server::Server;

/// The images of one request and how the encoder is spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Images {
    /// Pixels; 0 in either side means no image (the spec's default).
    pub height: u32,
    pub width: u32,
    /// Images per request (the spec's default 1; 0 means none).
    pub count: u32,
    /// Encoder data parallelism: each rank encodes its share of the images
    /// with the whole encoder (the spec's default); `false` shards the
    /// encoder over the worker's tensor-parallel ranks.
    pub encoder_dp: bool,
}

impl Default for Images {
    fn default() -> Self {
        Images { height: 0, width: 0, count: 1, encoder_dp: true }
    }
}

/// The largest image side (pixels) and images per request aicsql prices:
/// far beyond any vision model's input, small enough that no token count
/// overflows.
pub const MAX_IMAGE_SIDE: u32 = 1 << 16;
pub const MAX_IMAGES: u32 = 1 << 10;

/// 32 MiB: the floor of the encoder's activations (options.md 4.7).
const MIN_ENCODER_ACTIVATION_BYTES: f64 = (32u64 * 1024 * 1024) as f64;

impl Server<'_> {
    /// The same server pricing `images` per request (sides up to
    /// [`MAX_IMAGE_SIDE`] pixels, up to [`MAX_IMAGES`] images). The memo
    /// starts empty.
    pub fn with_images(mut self, images: Images) -> Result<Self, ServingError> {
        for (value, name, limit) in [
            (images.height, "image_height", MAX_IMAGE_SIDE),
            (images.width, "image_width", MAX_IMAGE_SIDE),
            (images.count, "num_images", MAX_IMAGES),
        ] {
            if value > limit {
                return Err(ServingError::input(format!("{name} = {value} is above the limit of {limit}")));
            }
        }
        self.image_tokens = match (self.step.vision(), images.count) {
            (Some(vision), 1..) => vision.image_tokens(images.height, images.width),
            _ => None,
        };
        self.images = images;
        self.clear_memo();
        Ok(self)
    }

    /// The images priced per request.
    pub fn images(&self) -> Images {
        self.images
    }

    /// The sequence the language model reads: the text and every image's
    /// merged tokens (options.md 4.4).
    pub(crate) fn effective_isl(&self, isl: u32) -> Result<u32, ServingError> {
        let Some(tokens) = self.image_tokens else { return Ok(isl) };
        let extra = tokens.post_merge * i64::from(self.images.count);
        let total = i64::from(isl) + extra;
        // Named as the images' doing (the Python path's text), not as isl's.
        aicsql_tables::limits::check(
            &format!("isl + image tokens ({isl} + {extra})"),
            u64::try_from(total).unwrap_or(u64::MAX),
            u64::from(aicsql_tables::limits::MAX_ISL),
        )
        .map_err(ServingError::input)?;
        u32::try_from(total).map_err(|_| {
            ServingError::input(format!("isl {isl} plus {extra} image tokens per request is out of range"))
        })
    }

    /// The encoder phase of `batch` requests on a worker of `tp` GPUs, each
    /// op times `correction` (ms; 0.0 without images). A checkpoint with
    /// an encoder is checked on every call, images or not: the spec builds
    /// the encoder with the model and refuses a tp it cannot shard.
    pub(crate) fn encoder_ms(&mut self, tp: u32, batch: u32, correction: f64) -> Result<f64, ServingError> {
        let Some(tokens) = self.image_tokens else {
            self.step.check_encoder(tp, self.images.encoder_dp)?;
            return Ok(0.0);
        };
        // Builds (and so checks) the worker's encoder list itself.
        let run = self.encoder_run(tp, batch, tokens, correction);
        Ok(self.step.encoder_latency(&run)?)
    }

    /// The encoder's memory on one GPU of a worker running `batch` requests
    /// (options.md 4.7): (weights, activations) in bytes, `None` without
    /// images. The activations follow the busiest rank's images; the
    /// projected embeddings of the whole batch sit on every rank.
    pub(crate) fn encoder_memory(&mut self, tp: u32, batch: u32) -> Result<Option<(f64, f64)>, ServingError> {
        let (Some(tokens), Some(vision)) = (self.image_tokens, self.step.vision()) else { return Ok(None) };
        let run = self.encoder_run(tp, batch, tokens, 1.0);
        let weights = self.step.encoder_weights(tp, self.images.encoder_dp)?;
        let patches = run.images_per_rank() * tokens.pre_merge;
        let embedded = i64::from(batch) * i64::from(self.images.count) * tokens.post_merge;
        let mut activations = 0.0;
        if patches > 0 {
            let bytes = 2 * i128::from(patches) * i128::from(vision.hidden) * 3
                + 2 * i128::from(embedded) * i128::from(vision.out_hidden) * i128::from(vision.projectors);
            activations = (bytes as f64).max(MIN_ENCODER_ACTIVATION_BYTES);
        }
        Ok(Some((weights, activations)))
    }

    /// The total of [`Server::encoder_memory`]'s answer in GiB (the spec's
    /// `encoder_memory`), 0.0 without images.
    pub(crate) fn encoder_gib(memory: Option<(f64, f64)>) -> f64 {
        memory.map_or(0.0, |(weights, activations)| (weights + activations) / crate::memory::GIB)
    }

    fn encoder_run(&self, tp: u32, batch: u32, tokens: ImageTokens, correction: f64) -> EncoderRun {
        EncoderRun { tp, encoder_dp: self.images.encoder_dp, batch, images: self.images.count, tokens, correction }
    }
}
