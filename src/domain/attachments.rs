//! Attachments as the providers take and count them (docs/design.md, "Attachments"): `data:`
//! URIs read as inline data, image dimensions read from the header at append, and each
//! format's token cost by its provider's published rule.

use base64::{Engine, engine::general_purpose::STANDARD};

use super::message::{Attachment, AttachmentSource};

/// A `data:` URI's parts: its media type and its base64 payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataUri<'a> {
    /// The media type, e.g. `image/png` (parameters left out).
    pub media_type: &'a str,
    /// The payload, base64 as written.
    pub base64: &'a str,
}

/// `uri` read as a `data:` URI: None when it is not one, an error when it is one but not
/// `data:<type>;base64,<payload>` with a non-empty type and valid base64.
pub fn data_uri(uri: &str) -> Option<Result<DataUri<'_>, String>> {
    let rest = uri
        .get(..5)
        .filter(|p| p.eq_ignore_ascii_case("data:"))
        .map(|_| &uri[5..])?;
    let parsed = (|| {
        let (header, payload) = rest
            .split_once(',')
            .ok_or("a data URI needs a comma before its payload")?;
        let mut params = header.split(';');
        let media_type = params.next().unwrap_or_default().trim();
        if media_type.is_empty() || !media_type.contains('/') {
            return Err("a data URI needs its media type (`data:image/png;base64,...`)".to_owned());
        }
        if !params.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
            return Err("a data URI must be base64 (`data:<type>;base64,<data>`)".to_owned());
        }
        STANDARD
            .decode(payload)
            .map_err(|e| format!("the data URI's payload is not base64: {e}"))?;
        Ok(DataUri {
            media_type,
            base64: payload,
        })
    })();
    Some(parsed)
}

/// The attachment's media type: a data URI's own, else the declared one (without parameters).
pub fn media_type(attachment: &Attachment) -> &str {
    if let AttachmentSource::Uri(uri) = &attachment.source
        && let Some(Ok(data)) = data_uri(uri)
    {
        return data.media_type;
    }
    attachment.mime_type.split(';').next().unwrap_or_default().trim()
}

/// Fills in an image's width and height from its header (inline data and data URIs; a URI's
/// stay as the caller gave them), without decoding the image. Unreadable headers leave them.
pub fn measure(attachment: &mut Attachment) {
    if !media_type(attachment).starts_with("image/") {
        return;
    }
    let decoded;
    let bytes: &[u8] = match &attachment.source {
        AttachmentSource::Data(data) => data,
        AttachmentSource::Uri(uri) => match data_uri(uri) {
            Some(Ok(data)) => {
                decoded = STANDARD.decode(data.base64).unwrap_or_default();
                &decoded
            }
            _ => return,
        },
    };
    if let Ok(size) = imagesize::blob_size(bytes) {
        attachment.width = u32::try_from(size.width).unwrap_or(u32::MAX);
        attachment.height = u32::try_from(size.height).unwrap_or(u32::MAX);
    }
}

/// Which provider's counting rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    /// OpenAI (Chat Completions and Responses).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini.
    Gemini,
}

/// The most an Anthropic image costs: 1568 patches (standard models).
const ANTHROPIC_MAX: usize = 1_568;

/// The most a Gemini image costs: 2240, Gemini 3's ultra-high resolution.
const GEMINI_MAX: usize = 2_240;

/// Image tokens by the provider's published rule (docs/design.md, "Attachments": the rules,
/// their sources and the resizing they assume); unknown dimensions (0) cost the most an image
/// can cost after the provider's own downscaling.
pub fn image_tokens(counting: Counting, width: u32, height: u32) -> usize {
    let known = width > 0 && height > 0;
    let (w, h) = (f64::from(width), f64::from(height));
    match counting {
        // detail high (what `auto` picks for large images): fit in 2048x2048, then the short
        // side to 768; 85 base tokens and 170 per 512-pixel tile.
        Counting::OpenAi => {
            if !known {
                return 85 + 170 * 8;
            }
            let fit = (2048.0 / w.max(h)).min(1.0);
            let (w, h) = (w * fit, h * fit);
            let short = (768.0 / w.min(h)).min(1.0);
            let (w, h) = ((w * short).ceil(), (h * short).ceil());
            let tiles = (w / 512.0).ceil() * (h / 512.0).ceil();
            85 + 170 * tiles as usize
        }
        // Anthropic publishes two rules that agree within a few percent on ordinary images: its
        // table's one token per 28x28-pixel patch, and (width x height) / 750; both after
        // scaling the long edge to at most 1568 pixels and the patches to at most 1568 (Claude's
        // standard models; the high-resolution ones allow more and cost up to 4784). They part
        // on narrow images, where whole patches round the short side up (100x2500: 168 patches,
        // 132 by the formula): ctxd charges the lower of the two.
        Counting::Anthropic => {
            if !known {
                return ANTHROPIC_MAX;
            }
            let patches = |w: f64, h: f64| (w / 28.0).ceil() * (h / 28.0).ceil();
            let long = (1568.0 / w.max(h)).min(1.0);
            let (mut w, mut h) = ((w * long).round().max(1.0), (h * long).round().max(1.0));
            while patches(w, h) > 1568.0 {
                let shrink = (1568.0 / patches(w, h)).sqrt().min(0.999);
                (w, h) = ((w * shrink).floor().max(1.0), (h * shrink).floor().max(1.0));
            }
            let by_area = (w * h / 750.0).ceil();
            patches(w, h).min(by_area) as usize
        }
        // Gemini 3 charges 1120 per image at its default resolution; Gemini 2 charges 258 for
        // an image with both sides at most 384 pixels and 258 per 768x768 tile above: the
        // larger of the two. Unknown dimensions: 2240 (Gemini 3's ultra-high resolution).
        Counting::Gemini => {
            if !known {
                return GEMINI_MAX;
            }
            let tiles = match width <= 384 && height <= 384 {
                true => 1.0,
                false => (w / 768.0).ceil() * (h / 768.0).ceil(),
            };
            // Gemini downscales what it takes: no image costs more than the unknown size does.
            (258.0 * tiles).clamp(1_120.0, GEMINI_MAX as f64) as usize
        }
    }
}

/// Tokens of a PDF, whose page count ctxd does not read: an estimate of 3 pages, each its text
/// (up to 3,000 tokens, Anthropic's upper figure) plus its page image (Anthropic: 1,568;
/// OpenAI: a high-detail page, 1,445; Gemini 3: up to 1,120 at high resolution).
pub fn pdf_tokens(counting: Counting) -> usize {
    const PAGES: usize = 3;
    const TEXT: usize = 3_000;
    PAGES
        * (TEXT
            + match counting {
                Counting::OpenAi => 1_445,
                Counting::Anthropic => 1_568,
                Counting::Gemini => 1_120,
            })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_uris_parse_or_say_why_not() {
        let ok = data_uri("data:image/png;base64,iVBORw0KGgo=").unwrap().unwrap();
        assert_eq!((ok.media_type, ok.base64), ("image/png", "iVBORw0KGgo="));
        assert!(data_uri("https://example.com/a.png").is_none());
        for bad in [
            "data:,abc",
            "data:image/png,abc",
            "data:image/png;base64",
            "data:image/png;base64,@@@",
        ] {
            assert!(data_uri(bad).unwrap().is_err(), "{bad}");
        }
    }

    #[test]
    fn image_costs_follow_each_providers_formula() {
        // OpenAI: 85 + 170 per 512-pixel tile after fitting 2048 and short side 768.
        assert_eq!(image_tokens(Counting::OpenAi, 32, 32), 85 + 170);
        assert_eq!(image_tokens(Counting::OpenAi, 1024, 1024), 85 + 170 * 4);
        assert_eq!(image_tokens(Counting::OpenAi, 4000, 3000), 85 + 170 * 4);
        assert_eq!(image_tokens(Counting::OpenAi, 6000, 1000), 85 + 170 * 4);
        assert_eq!(image_tokens(Counting::OpenAi, 2048, 768), 85 + 170 * 8);
        // Anthropic: a token per 28x28 patch within the 1568-pixel and 1568-patch caps (the
        // figures of its own table: 1024x1024 is 1369, 2000x1500 is 1564).
        assert_eq!(image_tokens(Counting::Anthropic, 32, 32), 2);
        // Narrow images: the formula's figure, not whole patches (63x1568 after scaling).
        assert_eq!(image_tokens(Counting::Anthropic, 100, 2500), 132);
        assert_eq!(image_tokens(Counting::Anthropic, 2500, 100), 132);
        assert_eq!(image_tokens(Counting::Anthropic, 1024, 1024), 1_369);
        assert_eq!(image_tokens(Counting::Anthropic, 2000, 1500), 1_564);
        let large = image_tokens(Counting::Anthropic, 4000, 3000);
        assert!((1_500..=1_568).contains(&large), "{large}");
        assert_eq!(image_tokens(Counting::Anthropic, 6000, 1000), 546);
        // Gemini: the larger of Gemini 3's 1120 and Gemini 2's 258 per 768x768 tile.
        assert_eq!(image_tokens(Counting::Gemini, 32, 32), 1_120);
        assert_eq!(image_tokens(Counting::Gemini, 1024, 1024), 1_120);
        assert_eq!(image_tokens(Counting::Gemini, 4000, 3000), GEMINI_MAX);
        assert_eq!(image_tokens(Counting::Gemini, 1536, 768), 1_120);
        assert_eq!(image_tokens(Counting::Gemini, 3000, 1000), 258 * 8);
        // A header claiming a billion pixels costs what the largest image costs.
        assert_eq!(image_tokens(Counting::Gemini, 40_000, 25_000), GEMINI_MAX);
        assert_eq!(image_tokens(Counting::Anthropic, 40_000, 25_000), 1_550);
        assert_eq!(image_tokens(Counting::OpenAi, u32::MAX, u32::MAX), 85 + 170 * 4);
        // Unknown dimensions cost the most a provider charges after its own downscaling.
        assert!(image_tokens(Counting::OpenAi, 0, 0) >= image_tokens(Counting::OpenAi, 6000, 1000));
        assert!(image_tokens(Counting::Anthropic, 0, 100) >= image_tokens(Counting::Anthropic, 4000, 3000));
    }
}
